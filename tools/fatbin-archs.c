// fatbin-archs: the GPU code a CUDA program carries, read from its fat binaries (what
// cuobjdump --list-elf and --list-ptx say, where the toolkit has no cuobjdump).
//
//   fatbin-archs PROGRAM     two lines: "sm=75 80 90" (the architectures compiled for) and
//                            "ptx=90" (those whose PTX it carries, for later GPUs to compile)
//
// tools/make-handout writes them into a handout's README, from the binaries it hands out.
// A fat binary (nvcc's .nv_fatbin section) is a header, magic 0xBA55ED50, its size at byte 8,
// then entries: the kind at byte 0 (1 PTX, 2 an ELF cubin), the header's size at byte 4, the
// payload's at byte 8, the architecture at byte 28; the next entry follows the payload. The
// whole file is searched for the magic, so that no ELF parsing is needed.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"  // defines: arg_spec, arg_exit_codes, args_parse_files, usage_error

#define FATBIN_MAGIC 0xBA55ED50u
#define MAX_ARCH 1024
#define KIND_PTX 1
#define KIND_ELF 2

static uint64_t read_u(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; k--) v = v << 8 | p[k];  // little-endian, as nvcc writes it
    return v;
}

// Marks every architecture of the fat binaries in buf; returns how many fat binaries it found.
static int scan(const unsigned char *buf, size_t n, char *elf, char *ptx)
{
    int found = 0;
    for (size_t i = 0; i + 16 <= n; i += 8) {  // fat binaries are 8-byte aligned
        if (read_u(buf + i, 4) != FATBIN_MAGIC) continue;
        size_t header = read_u(buf + i + 6, 2), size = read_u(buf + i + 8, 8);
        if (size > n - i - header) continue;  // not a fat binary after all
        found++;
        for (size_t e = i + header, end = i + header + size; e + 32 <= end;) {
            unsigned kind = (unsigned)read_u(buf + e, 2), arch = (unsigned)read_u(buf + e + 28, 4);
            size_t entry_header = read_u(buf + e + 4, 4), payload = read_u(buf + e + 8, 8);
            if (entry_header < 32 || payload > end - e - entry_header) break;
            if (arch < MAX_ARCH && kind == KIND_ELF) elf[arch] = 1;
            if (arch < MAX_ARCH && kind == KIND_PTX) ptx[arch] = 1;
            e += entry_header + payload;
        }
    }
    return found;
}

static void print_archs(const char *key, const char *marks)
{
    printf("%s=", key);
    for (int a = 0, first = 1; a < MAX_ARCH; a++)
        if (marks[a]) {
            printf("%s%d", first ? "" : " ", a);
            first = 0;
        }
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *files[1] = {NULL};
    const arg_spec specs[] = {arg_exit_codes("0 listed, 1 not readable or no GPU code in it, 2 bad usage")};
    int nfiles = args_parse_files(argc, argv, "fatbin-archs", "List the GPU architectures a CUDA program carries.",
                                  specs, 1, "PROGRAM", files, 1);
    if (nfiles != 1) usage_error("fatbin-archs", "give one program (try --help)");
    FILE *in = fopen(files[0], "rb");
    if (!in) {
        fprintf(stderr, "fatbin-archs: cannot open '%s'\n", files[0]);
        return EXIT_FAILURE;
    }
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    rewind(in);
    unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
    int ok = buf && fread(buf, 1, (size_t)n, in) == (size_t)n;
    fclose(in);
    char elf[MAX_ARCH] = {0}, ptx[MAX_ARCH] = {0};
    if (!ok || scan(buf, (size_t)n, elf, ptx) == 0) {
        fprintf(stderr, "fatbin-archs: %s holds no GPU code (no fat binary)\n", files[0]);
        free(buf);
        return EXIT_FAILURE;
    }
    print_archs("sm", elf);
    print_archs("ptx", ptx);
    free(buf);
    return 0;
}
