// ckpt.c: lesson 14's checkpoint files, checked (ckpt.h).
#define _POSIX_C_SOURCE 200809L
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t ckpt_fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 1099511628211ULL;
    return h;
}

void ckpt_shape_text(const int *dims, int layers, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int l = 0; l <= layers && n < size; l++)
        n += (size_t)snprintf(out + n, size - n, "%s%d", l ? "," : "", dims[l]);
}

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

static size_t payload_bytes(const ckpt_header *h)
{
    return (size_t)h->params * sizeof(float) + (size_t)h->losses * sizeof(double);
}

unsigned char *ckpt_encode(const ckpt_header *h, const float *params, const double *losses, size_t *size, uint64_t *sum)
{
    size_t body = payload_bytes(h), total = CKPT_HEADER_BYTES + body + CKPT_TRAILER_BYTES;
    unsigned char *buf = (unsigned char *)malloc(total);
    if (!buf) return NULL;
    char header[CKPT_HEADER_BYTES + 1];
    int n = snprintf(header, sizeof header,
                     "course-checkpoint 1 rank %d world %d batch %lld params %lld losses %lld "
                     "shape %s seed %d",
                     h->rank, h->world, h->batch, h->params, h->losses, h->shape, h->seed);
    if (n < 0 || n >= CKPT_HEADER_BYTES) {
        free(buf);
        return NULL;
    }
    memset(header + n, ' ', (size_t)(CKPT_HEADER_BYTES - n));
    header[CKPT_HEADER_BYTES - 1] = '\n';
    memcpy(buf, header, CKPT_HEADER_BYTES);
    memcpy(buf + CKPT_HEADER_BYTES, params, (size_t)h->params * sizeof(float));
    if (h->losses)
        memcpy(buf + CKPT_HEADER_BYTES + (size_t)h->params * sizeof(float), losses, (size_t)h->losses * sizeof(double));
    uint64_t s = ckpt_fnv1a(CKPT_FNV_START, buf, CKPT_HEADER_BYTES + body);
    char trailer[CKPT_TRAILER_BYTES + 1];
    snprintf(trailer, sizeof trailer, "checksum %016llx\n", (unsigned long long)s);
    memcpy(buf + CKPT_HEADER_BYTES + body, trailer, CKPT_TRAILER_BYTES);
    *size = total;
    if (sum) *sum = s;
    return buf;
}

static int parse_header(const char *text, ckpt_header *h)
{
    int version = 0;
    memset(h, 0, sizeof *h);
    return sscanf(text, "course-checkpoint %d rank %d world %d batch %lld params %lld losses %lld shape %127s seed %d",
                  &version, &h->rank, &h->world, &h->batch, &h->params, &h->losses, h->shape, &h->seed) == 8 &&
           version == 1 && h->world >= 1 && h->rank >= 0 && h->rank < h->world && h->batch >= 0 && h->params > 0 &&
           h->params < (1LL << 34) && h->losses >= 0 && h->losses < (1LL << 32);
}

int ckpt_read_rank(const char *path, ckpt_header *h, float **params, double **losses, char *why, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, size, "%s: %s", path, strerror(errno));
        return -1;
    }
    char header[CKPT_HEADER_BYTES + 1];
    size_t got = fread(header, 1, CKPT_HEADER_BYTES, f);
    header[got] = '\0';
    if (got < CKPT_HEADER_BYTES && strncmp(header, "course-checkpoint ", got < 18 ? got : 18) == 0) {
        fclose(f);
        snprintf(why, size, "%s: torn: %zu bytes, shorter than its header", path, got);
        return -1;
    }
    if (!parse_header(header, h)) {
        fclose(f);
        snprintf(why, size, "%s: not a checkpoint of this course (its header does not read)", path);
        return -1;
    }
    size_t body = payload_bytes(h), want = body + CKPT_TRAILER_BYTES;
    unsigned char *buf = (unsigned char *)malloc(want + 1);
    if (!buf) {
        fclose(f);
        snprintf(why, size, "%s: out of memory", path);
        return -1;
    }
    got = fread(buf, 1, want + 1, f);  // one more: a file longer than its header says is not this one
    fclose(f);
    if (got != want) {
        free(buf);
        snprintf(why, size, "%s: torn: %zu bytes where its header says %zu", path, CKPT_HEADER_BYTES + got,
                 CKPT_HEADER_BYTES + want);
        return -1;
    }
    uint64_t s = ckpt_fnv1a(ckpt_fnv1a(CKPT_FNV_START, header, CKPT_HEADER_BYTES), buf, body);
    unsigned long long stored = 0;
    char trailer[CKPT_TRAILER_BYTES + 1];
    memcpy(trailer, buf + body, CKPT_TRAILER_BYTES);
    trailer[CKPT_TRAILER_BYTES] = '\0';
    if (sscanf(trailer, "checksum %16llx", &stored) != 1 || stored != s) {
        free(buf);
        snprintf(why, size, "%s: corrupt: its checksum is %016llx, its bytes sum to %016llx", path, stored,
                 (unsigned long long)s);
        return -1;
    }
    if (params) {
        *params = (float *)malloc((size_t)h->params * sizeof(float));
        if (*params) memcpy(*params, buf, (size_t)h->params * sizeof(float));
    }
    if (losses) {
        *losses = (double *)malloc((size_t)(h->losses ? h->losses : 1) * sizeof(double));
        if (*losses && h->losses)
            memcpy(*losses, buf + (size_t)h->params * sizeof(float), (size_t)h->losses * sizeof(double));
    }
    free(buf);
    if ((params && !*params) || (losses && !*losses)) {
        snprintf(why, size, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the manifest

void ckpt_manifest_text(const ckpt_manifest *m, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size,
                                "course-checkpoint-manifest 1\nbatch %lld\nworld %d\nshape %s\nparams %lld\n"
                                "seed %d\n",
                                m->batch, m->world, m->shape, m->params, m->seed);
    for (int r = 0; r < m->world && n < size; r++)
        n += (size_t)snprintf(out + n, size - n, "rank %d rank%d.bin %lld %016llx\n", r, r, m->size[r],
                              (unsigned long long)m->sum[r]);
    if (n < size) snprintf(out + n, size - n, "end\n");
}

int ckpt_read_manifest(const char *path, ckpt_manifest *m, char *why, size_t size)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, size, "%s: %s (no manifest: the checkpoint was never completed)", path, strerror(errno));
        return -1;
    }
    char line[256];
    int version = 0, ok = 1, ended = 0;
    ok = fgets(line, sizeof line, f) && sscanf(line, "course-checkpoint-manifest %d", &version) == 1 && version == 1;
    ok = ok && fgets(line, sizeof line, f) && sscanf(line, "batch %lld", &m->batch) == 1;
    ok = ok && fgets(line, sizeof line, f) && sscanf(line, "world %d", &m->world) == 1 && m->world >= 1 &&
         m->world <= CKPT_MAX_RANKS;
    ok = ok && fgets(line, sizeof line, f) && sscanf(line, "shape %127s", m->shape) == 1;
    ok = ok && fgets(line, sizeof line, f) && sscanf(line, "params %lld", &m->params) == 1;
    ok = ok && fgets(line, sizeof line, f) && sscanf(line, "seed %d", &m->seed) == 1;
    for (int r = 0; ok && r < m->world; r++) {
        int rank = -1, named = -1;
        unsigned long long sum = 0;
        ok = fgets(line, sizeof line, f) &&
             sscanf(line, "rank %d rank%d.bin %lld %16llx", &rank, &named, &m->size[r], &sum) == 4 && rank == r &&
             named == r;
        m->sum[r] = sum;
    }
    ended = ok && fgets(line, sizeof line, f) && strcmp(line, "end\n") == 0;
    fclose(f);
    if (!ended) {
        snprintf(why, size, "%s: the manifest does not read (torn, or not one of this course's)", path);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// which checkpoint

int ckpt_check(const char *root, long long batch, ckpt_manifest *m, char *why, size_t size)
{
    char path[1200];
    ckpt_manifest_file(root, batch, path, sizeof path);
    if (ckpt_read_manifest(path, m, why, size) != 0) return -1;
    if (m->batch != batch) {
        snprintf(why, size, "%s: says batch %lld, in the folder of batch %lld", path, m->batch, batch);
        return -1;
    }
    for (int r = 0; r < m->world; r++) {
        ckpt_header h;
        ckpt_rank_file(root, batch, r, path, sizeof path);
        if (ckpt_read_rank(path, &h, NULL, NULL, why, size) != 0) return -1;
        size_t bytes = CKPT_HEADER_BYTES + payload_bytes(&h) + CKPT_TRAILER_BYTES;
        if (h.rank != r || h.world != m->world || h.batch != batch || h.params != m->params ||
            strcmp(h.shape, m->shape) != 0 || (long long)bytes != m->size[r]) {
            snprintf(why, size, "%s: its header does not match the manifest", path);
            return -1;
        }
        FILE *f = fopen(path, "rb");  // the checksum the manifest holds: the same file, not an older one
        unsigned long long stored = 0;
        char trailer[CKPT_TRAILER_BYTES + 1] = "";
        if (f) {
            if (fseek(f, -(long)CKPT_TRAILER_BYTES, SEEK_END) == 0 &&
                fread(trailer, 1, CKPT_TRAILER_BYTES, f) == CKPT_TRAILER_BYTES)
                trailer[CKPT_TRAILER_BYTES] = '\0';
            fclose(f);
        }
        if (sscanf(trailer, "checksum %16llx", &stored) != 1 || stored != m->sum[r]) {
            snprintf(why, size, "%s: its checksum is not the manifest's", path);
            return -1;
        }
    }
    return 0;
}

int ckpt_list(const char *root, long long *batches, int max)
{
    DIR *d = opendir(root);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        char *end = NULL;
        if (strncmp(e->d_name, "ckpt-", 5) != 0) continue;
        long long b = strtoll(e->d_name + 5, &end, 10);
        if (end == e->d_name + 5 || *end || b < 0) continue;
        batches[n++] = b;
    }
    closedir(d);
    for (int i = 1; i < n; i++)  // newest first
        for (int j = i; j > 0 && batches[j] > batches[j - 1]; j--) {
            long long t = batches[j];
            batches[j] = batches[j - 1];
            batches[j - 1] = t;
        }
    return n;
}

long long ckpt_latest(const char *root, ckpt_manifest *m, void (*skipped)(void *ctx, long long batch, const char *why),
                      void *ctx)
{
    long long batches[1024];
    int n = ckpt_list(root, batches, 1024);
    for (int k = 0; k < n; k++) {
        char why[1400];
        if (ckpt_check(root, batches[k], m, why, sizeof why) == 0) return batches[k];
        if (skipped) skipped(ctx, batches[k], why);
    }
    return -1;
}
