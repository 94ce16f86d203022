// ckpt.c: lesson 16's checkpoint files: a rank's file and the manifest, written and read
// (ckpt.h). The run's fields: ckpt_run.c; the text read a word at a time: ckpt_text.c; the folders
// (check, list, prune): ckpt_folders.c.
#define _POSIX_C_SOURCE 200809L
#include "common/recovery/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // fstat: the file's size, against its header's

#include "common/base/regular_file.h"  // regular_file_open: a named pipe refused, never waited on
#include "common/recovery/ckpt_internal.h"
#include "common/recovery/ckpt_text.h"  // defines: ckpt_next_key, ckpt_next_int, ckpt_next_word, ckpt_at_end

#define MAX_BATCH (1LL << 32)           // a batch number, and a loss count, read from a file
#define MANIFEST_MAX_BYTES (64 * 1024)  // every field and CKPT_MAX_RANKS lines fit well below
#define SPARSE_MIN_BYTES (256LL << 20)  // a rank file larger than this is refused when mostly holes

void ckpt_folder(const char *root, long long batch, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%08lld", root, batch);
}

void ckpt_rank_file(const char *root, long long batch, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%08lld/rank%d.bin", root, batch, rank);
}

void ckpt_manifest_file(const char *root, long long batch, char *out, size_t size)
{
    snprintf(out, size, "%s/ckpt-%08lld/manifest", root, batch);
}

// ----------------------------------------------------------------------------
// a rank's file

static size_t params_bytes(const ckpt_header *h) { return (size_t)h->run.params * sizeof(float); }
static size_t losses_bytes(const ckpt_header *h) { return (size_t)h->losses * sizeof(double); }

int ckpt_header_text(const ckpt_header *h, char *out)
{
    char header[CKPT_HEADER_BYTES + 1];
    int n = snprintf(header, sizeof header, "course-checkpoint %d rank %d batch %lld losses %lld ", CKPT_VERSION,
                     h->rank, h->batch, h->losses);
    int k = n > 0 && n < CKPT_HEADER_BYTES ? ckpt_run_write(&h->run, ' ', header + n, sizeof header - (size_t)n) : -1;
    if (k < 0 || n + k >= CKPT_HEADER_BYTES) return -1;
    n += k;
    memset(header + n, ' ', (size_t)(CKPT_HEADER_BYTES - n));
    header[CKPT_HEADER_BYTES - 1] = '\n';
    memcpy(out, header, CKPT_HEADER_BYTES);
    return 0;
}

void ckpt_trailer_text(uint64_t sum, char *out)
{
    char trailer[CKPT_TRAILER_BYTES + 1];
    snprintf(trailer, sizeof trailer, "checksum %016llx\n", (unsigned long long)sum);
    memcpy(out, trailer, CKPT_TRAILER_BYTES);
}

size_t ckpt_file_bytes(const ckpt_header *h)
{
    return CKPT_HEADER_BYTES + params_bytes(h) + losses_bytes(h) + CKPT_TRAILER_BYTES;
}

unsigned char *ckpt_encode(const ckpt_header *h, const float *params, const double *losses, size_t *size, uint64_t *sum)
{
    size_t total = ckpt_file_bytes(h), body = total - CKPT_HEADER_BYTES - CKPT_TRAILER_BYTES;
    unsigned char *buf = (unsigned char *)malloc(total);
    if (!buf) return NULL;
    if (ckpt_header_text(h, (char *)buf) != 0) {
        free(buf);
        return NULL;
    }
    memcpy(buf + CKPT_HEADER_BYTES, params, params_bytes(h));
    if (h->losses) memcpy(buf + CKPT_HEADER_BYTES + params_bytes(h), losses, losses_bytes(h));
    uint64_t s = ckpt_sum_of(buf, CKPT_HEADER_BYTES + body);
    ckpt_trailer_text(s, (char *)buf + CKPT_HEADER_BYTES + body);
    *size = total;
    if (sum) *sum = s;
    return buf;
}

// 1 when the header reads: this version, every number within its bounds, the rank among the
// run's ranks. Its losses are checked apart (read_rank_sum): batch + 1.
static int parse_header(char *text, ckpt_header *h, long long *version)
{
    long long rank = 0;
    memset(h, 0, sizeof *h);
    *version = 0;
    if (!ckpt_next_key(&text, "course-checkpoint") || !ckpt_next_int(&text, 1, 1000, version) ||
        *version != CKPT_VERSION)
        return 0;
    return ckpt_next_key(&text, "rank") && ckpt_next_int(&text, 0, CKPT_MAX_RANKS - 1, &rank) &&
           ckpt_next_key(&text, "batch") && ckpt_next_int(&text, 0, MAX_BATCH - 1, &h->batch) &&
           ckpt_next_key(&text, "losses") && ckpt_next_int(&text, 1, MAX_BATCH, &h->losses) &&
           ckpt_run_read(&text, &h->run) && (h->rank = (int)rank) < h->run.world && ckpt_at_end(text);
}

// Reads `bytes` of f through a small buffer, or straight into `into` when it is not NULL,
// folding them into the checksum *h: 0, or -1 when the file ends first.
static int stream(FILE *f, size_t bytes, void *into, ckpt_sum *h)
{
    unsigned char buf[1 << 16];
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < sizeof buf ? bytes - done : sizeof buf;
        unsigned char *p = into ? (unsigned char *)into + done : buf;
        if (fread(p, 1, n, f) != n) return -1;
        ckpt_sum_add(h, p, n);
        done += n;
    }
    return 0;
}

// The file after its header: its size against the header's (before anything is allocated),
// then the weights and losses streamed through the checksum, then the checksum it stores.
static int read_body(FILE *f, const char *path, ckpt_header *h, float **params, double **losses, ckpt_sum *summed,
                     uint64_t *stored, char *why, size_t size)
{
    struct stat st;
    size_t want = CKPT_HEADER_BYTES + params_bytes(h) + losses_bytes(h) + CKPT_TRAILER_BYTES;
    if (fstat(fileno(f), &st) != 0 || (unsigned long long)st.st_size < want) {
        snprintf(why, size, "%s: torn: %lld bytes where its header says %zu", path, (long long)st.st_size, want);
        return -1;
    }
    if ((unsigned long long)st.st_size > want) {
        snprintf(why, size, "%s: %lld bytes where its header says %zu: not the file its header describes", path,
                 (long long)st.st_size, want);
        return -1;
    }
    // a writer writes every byte: a large file that holds most of itself as holes (a sparse file,
    // 64 GiB that are 4 KiB on disk) is no checkpoint, and summing its zeros would take a minute
    if (st.st_size > SPARSE_MIN_BYTES && (unsigned long long)st.st_blocks * 512 < (unsigned long long)st.st_size / 2) {
        snprintf(why, size, "%s: sparse: %lld bytes, of which %lld on disk: not a file a checkpoint writes", path,
                 (long long)st.st_size, (long long)st.st_blocks * 512);
        return -1;
    }
    if (params) *params = (float *)malloc(params_bytes(h));
    if (losses) *losses = (double *)malloc(losses_bytes(h));
    if ((params && !*params) || (losses && !*losses)) {
        snprintf(why, size, "%s: out of memory for its %lld weights and %lld losses", path, h->run.params, h->losses);
        return -1;
    }
    char trailer[CKPT_TRAILER_BYTES + 1] = "";
    unsigned long long s = 0;
    if (stream(f, params_bytes(h), params ? *params : NULL, summed) != 0 ||
        stream(f, losses_bytes(h), losses ? *losses : NULL, summed) != 0 ||
        fread(trailer, 1, CKPT_TRAILER_BYTES, f) != CKPT_TRAILER_BYTES) {
        snprintf(why, size, "%s: torn: it ended while being read", path);
        return -1;
    }
    uint64_t sum = ckpt_sum_end(summed);
    if (sscanf(trailer, "checksum %16llx", &s) != 1 || s != sum) {
        snprintf(why, size, "%s: corrupt: its checksum is %016llx, its bytes sum to %016llx", path, s,
                 (unsigned long long)sum);
        return -1;
    }
    *stored = s;
    return 0;
}

int ckpt_read_rank_sum(const char *path, ckpt_header *h, float **params, double **losses, uint64_t *stored, char *why,
                       size_t size)
{
    if (params) *params = NULL;
    if (losses) *losses = NULL;
    char what[160];
    FILE *f = regular_file_open(path, what, sizeof what);  // a named pipe would block the reader forever
    if (!f) {
        snprintf(why, size, "%s: %s", path, what);
        return -1;
    }
    char header[CKPT_HEADER_BYTES + 1];
    size_t got = fread(header, 1, CKPT_HEADER_BYTES, f);
    header[got] = '\0';
    long long version = 0;
    int bad = -1;
    if (got < CKPT_HEADER_BYTES && strncmp(header, "course-checkpoint ", got < 18 ? got : 18) == 0)
        snprintf(why, size, "%s: torn: %zu bytes, shorter than its header", path, got);
    else if (memchr(header, '\0', got) || !parse_header(header, h, &version))
        snprintf(why, size,
                 version && version != CKPT_VERSION
                     ? "%s: a checkpoint of another version of the course (its header does not read)"
                     : "%s: not a checkpoint of this course (its header does not read)",
                 path);
    else if (h->losses != h->batch + 1)  // a restore writes that many into the run's loss arrays
        snprintf(why, size, "%s: its header says %lld losses after batch %lld, where a checkpoint holds batch + 1",
                 path, h->losses, h->batch);
    else {
        ckpt_sum summed;
        ckpt_sum_start(&summed);
        ckpt_sum_add(&summed, header, CKPT_HEADER_BYTES);
        bad = read_body(f, path, h, params, losses, &summed, stored, why, size);
    }
    fclose(f);
    if (bad && params) {
        free(*params);
        *params = NULL;
    }
    if (bad && losses) {
        free(*losses);
        *losses = NULL;
    }
    return bad;
}

int ckpt_read_rank(const char *path, ckpt_header *h, float **params, double **losses, char *why, size_t size)
{
    uint64_t stored = 0;
    return ckpt_read_rank_sum(path, h, params, losses, &stored, why, size);
}

// ----------------------------------------------------------------------------
// the manifest

void ckpt_manifest_text(const ckpt_manifest *m, char *out, size_t size)
{
    int n = snprintf(out, size, "course-checkpoint-manifest %d\nbatch %lld\n", CKPT_VERSION, m->batch);
    int k = n >= 0 && (size_t)n < size ? ckpt_run_write(&m->run, '\n', out + n, size - (size_t)n) : -1;
    size_t at = k < 0 ? size : (size_t)(n + k);
    for (int r = 0; r < m->run.world && at < size; r++)
        at += (size_t)snprintf(out + at, size - at, "rank %d rank%d.bin %lld %016llx\n", r, r, m->size[r],
                               (unsigned long long)m->sum[r]);
    if (at < size) snprintf(out + at, size - at, "end\n");
}

// "rank R rankR.bin SIZE CHECKSUM" of rank r
static int parse_rank_line(char **p, int r, ckpt_manifest *m)
{
    long long rank = -1;
    char name[32], want[32], sum[32], *end = NULL;
    snprintf(want, sizeof want, "rank%d.bin", r);
    if (!ckpt_next_key(p, "rank") || !ckpt_next_int(p, r, r, &rank) || !ckpt_next_word(p, name, sizeof name) ||
        strcmp(name, want) != 0 || !ckpt_next_int(p, 0, 1LL << 50, &m->size[r]) ||
        !ckpt_next_word(p, sum, sizeof sum) || strlen(sum) != 16 || strspn(sum, "0123456789abcdef") != 16)
        return 0;
    m->sum[r] = (uint64_t)strtoull(sum, &end, 16);
    return 1;
}

static int parse_manifest(char *text, ckpt_manifest *m)
{
    long long version = 0;
    if (!ckpt_next_key(&text, "course-checkpoint-manifest") ||
        !ckpt_next_int(&text, CKPT_VERSION, CKPT_VERSION, &version) || !ckpt_next_key(&text, "batch") ||
        !ckpt_next_int(&text, 0, MAX_BATCH - 1, &m->batch) || !ckpt_run_read(&text, &m->run))
        return 0;
    for (int r = 0; r < m->run.world; r++)
        if (!parse_rank_line(&text, r, m)) return 0;
    return ckpt_next_key(&text, "end") && ckpt_at_end(text);
}

int ckpt_read_manifest(const char *path, ckpt_manifest *m, char *why, size_t size)
{
    memset(m, 0, sizeof *m);
    char what[160];
    FILE *f = regular_file_open(path, what, sizeof what);
    if (!f) {
        snprintf(why, size, "%s: %s%s", path, what,
                 errno == EINVAL ? "" : " (no manifest: the checkpoint was never completed)");
        return -1;
    }
    char *text = (char *)malloc(MANIFEST_MAX_BYTES + 1);
    size_t got = text ? fread(text, 1, MANIFEST_MAX_BYTES + 1, f) : 0;
    fclose(f);
    int ok = text && got <= MANIFEST_MAX_BYTES && !memchr(text, '\0', got);
    if (ok) text[got] = '\0';
    ok = ok && parse_manifest(text, m);
    free(text);
    if (!ok) {
        snprintf(why, size, "%s: the manifest does not read (torn, or not one of this course's)", path);
        return -1;
    }
    return 0;
}

size_t ckpt_image_header(unsigned char *image, int rank, long long batch, const ckpt_run *run)
{
    ckpt_header h;
    memset(&h, 0, sizeof h);
    h.rank = rank;
    h.batch = batch;
    h.losses = batch + 1;
    h.run = *run;
    return ckpt_header_text(&h, (char *)image) == 0 ? ckpt_file_bytes(&h) : 0;
}
