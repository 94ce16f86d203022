// ckpt_run.c: the fields that make a run this run, as text and compared (ckpt.h).
#define _POSIX_C_SOURCE 200809L
#include "common/recovery/ckpt.h"

#include <errno.h>
#include <limits.h>  // INT_MAX
#include <math.h>    // isfinite
#include <stddef.h>  // offsetof
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/recovery/ckpt_text.h"  // defines: ckpt_next_key, ckpt_next_int, ckpt_next_word

typedef enum { INT_FIELD, LONG_FIELD, REAL_FIELD, TEXT_FIELD } field_type;

// Every field of ckpt_run in the files' order (ckpt_field's), with the bounds a file's value
// must keep and the words that say a difference: the checkpoint's value, then this run's.
static const struct {
    const char *key;
    field_type type;
    size_t offset;
    long long lo, hi;
    const char *says;
} FIELDS[CKPT_FIELDS] = {
    {"world", INT_FIELD, offsetof(ckpt_run, world), 1, CKPT_MAX_RANKS, "holds %s ranks, this run has %s"},
    {"shape", TEXT_FIELD, offsetof(ckpt_run, shape), 0, 0, "holds a model of shape %s, this run's is %s"},
    {"params", LONG_FIELD, offsetof(ckpt_run, params), 1, 1LL << 34, "holds %s weights, this run's model has %s"},
    {"seed", INT_FIELD, offsetof(ckpt_run, seed), 0, INT_MAX, "was trained with --seed %s, this run has --seed %s"},
    {"global-batch", INT_FIELD, offsetof(ckpt_run, global_batch), 1, INT_MAX,
     "was trained with --batch %s, this run has --batch %s"},
    {"rank-batch", INT_FIELD, offsetof(ckpt_run, rank_batch), 1, INT_MAX,
     "was trained on %s samples per rank and batch, this run on %s"},
    {"lr", REAL_FIELD, offsetof(ckpt_run, lr), 0, 0, "was trained with --lr %s, this run has --lr %s"},
    {"prep-work", INT_FIELD, offsetof(ckpt_run, prep_work), 0, INT_MAX,
     "was trained with --prep-work %s, this run has --prep-work %s"},
    {"bucket-bytes", LONG_FIELD, offsetof(ckpt_run, bucket_bytes), 0, 1LL << 50,
     "cut its gradients into buckets of %s bytes (--bucket-mib), this run into buckets of %s"},
};

#define FIELD_AT(r, f) ((const char *)(r) + FIELDS[f].offset)

// A field's value as the files write it: a number of a double as the shortest text that reads
// back to the same bits.
static void value_text(const ckpt_run *r, int f, char *out, size_t size)
{
    const char *at = FIELD_AT(r, f);
    if (FIELDS[f].type == INT_FIELD) {
        snprintf(out, size, "%d", *(const int *)at);
    } else if (FIELDS[f].type == LONG_FIELD) {
        snprintf(out, size, "%lld", *(const long long *)at);
    } else if (FIELDS[f].type == REAL_FIELD) {
        double v = *(const double *)at;
        snprintf(out, size, "%.15g", v);
        if (strtod(out, NULL) != v) snprintf(out, size, "%.17g", v);
    } else {
        snprintf(out, size, "%s", at);
    }
}

static int same_value(const ckpt_run *a, const ckpt_run *b, int f)
{
    const char *x = FIELD_AT(a, f), *y = FIELD_AT(b, f);
    switch (FIELDS[f].type) {
    case INT_FIELD: return *(const int *)x == *(const int *)y;
    case LONG_FIELD: return *(const long long *)x == *(const long long *)y;
    case REAL_FIELD: return *(const double *)x == *(const double *)y;
    default: return strcmp(x, y) == 0;
    }
}

int ckpt_run_differs(const ckpt_run *have, const ckpt_run *want, unsigned fields, char *why, size_t size)
{
    for (int f = 0; f < CKPT_FIELDS; f++) {
        if (!(fields & CKPT_FIELD(f)) || same_value(have, want, f)) continue;
        char a[160], b[160];
        value_text(have, f, a, sizeof a);
        value_text(want, f, b, sizeof b);
        snprintf(why, size, FIELDS[f].says, a, b);
        return 1;
    }
    return 0;
}

int ckpt_header_differs(const ckpt_header *h, long long batch, int rank, const ckpt_run *run, char *why, size_t size)
{
    char what[400];
    if (h->batch != batch)
        snprintf(why, size, "its header says batch %lld, the checkpoint is of batch %lld", h->batch, batch);
    else if (h->rank != rank)
        snprintf(why, size, "its header says rank %d, the file is rank %d's", h->rank, rank);
    else if (ckpt_run_differs(&h->run, run, CKPT_EVERY_FIELD, what, sizeof what))
        snprintf(why, size, "its header %s", what);
    else
        return 0;
    return 1;
}

void ckpt_shape_text(const int *dims, int layers, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int l = 0; l <= layers && n < size; l++)
        n += (size_t)snprintf(out + n, size - n, "%s%d", l ? "," : "", dims[l]);
}

int ckpt_shape_valid(const char *text)
{
    int widths = 0;
    size_t n = strlen(text);
    if (n == 0 || n >= sizeof((ckpt_run *)0)->shape) return 0;
    for (const char *p = text; *p;) {
        char *end = NULL;
        if (*p < '0' || *p > '9') return 0;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno == ERANGE || v < 1 || v > INT_MAX || (*end != ',' && *end != '\0') || (*end == ',' && !end[1]))
            return 0;
        widths++;
        p = *end ? end + 1 : end;
    }
    return widths >= 2;
}

void ckpt_run_init(ckpt_run *r, int world, const int *dims, int layers, long long params, int seed, int global_batch,
                   int rank_batch, double lr, int prep_work, long long bucket_bytes)
{
    memset(r, 0, sizeof *r);
    r->world = world;
    ckpt_shape_text(dims, layers, r->shape, sizeof r->shape);
    r->params = params;
    r->seed = seed;
    r->global_batch = global_batch;
    r->rank_batch = rank_batch;
    r->lr = lr;
    r->prep_work = prep_work;
    r->bucket_bytes = bucket_bytes;
}

// ----------------------------------------------------------------------------
// as text

int ckpt_run_write(const ckpt_run *r, char sep, char *out, size_t size)
{
    size_t n = 0;
    for (int f = 0; f < CKPT_FIELDS; f++) {
        char value[160];
        value_text(r, f, value, sizeof value);
        int k = snprintf(out + n, size - n, "%s %s%c", FIELDS[f].key, value, sep);
        if (k < 0 || (size_t)k >= size - n) return -1;
        n += (size_t)k;
    }
    return (int)n;
}

int ckpt_run_read(char **p, ckpt_run *r)
{
    memset(r, 0, sizeof *r);
    for (int f = 0; f < CKPT_FIELDS; f++) {
        char *at = (char *)r + FIELDS[f].offset, word[160], *end = NULL;
        long long v = 0;
        if (!ckpt_next_key(p, FIELDS[f].key)) return 0;
        if (FIELDS[f].type == INT_FIELD || FIELDS[f].type == LONG_FIELD) {
            if (!ckpt_next_int(p, FIELDS[f].lo, FIELDS[f].hi, &v)) return 0;
            if (FIELDS[f].type == INT_FIELD)
                *(int *)at = (int)v;
            else
                *(long long *)at = v;
        } else if (FIELDS[f].type == REAL_FIELD) {
            if (!ckpt_next_word(p, word, sizeof word)) return 0;
            double d = strtod(word, &end);
            if (*end || !isfinite(d) || d <= 0) return 0;
            *(double *)at = d;
        } else {
            if (!ckpt_next_word(p, at, sizeof r->shape) || !ckpt_shape_valid(at)) return 0;
        }
    }
    return 1;
}
