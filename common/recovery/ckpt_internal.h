// ckpt_internal.h: what ckpt.c, ckpt_run.c and ckpt_folders.c call in one another (the API is
// ckpt.h). A header and a manifest are words separated by spaces or newlines: "key value"
// pairs, read one word at a time, every number within its bounds.
#ifndef COMMON_CKPT_INTERNAL_H
#define COMMON_CKPT_INTERNAL_H

#include "common/recovery/ckpt.h"

// The next word of *p (after spaces and newlines) into out: 0 when there is none or it does
// not fit. *p moves past it.
int ckpt_next_word(char **p, char *out, size_t size);
int ckpt_next_key(char **p, const char *key);  // the next word is `key`
// The next word as a whole number within [lo, hi] (no overflow): 0 when it is not one.
int ckpt_next_int(char **p, long long lo, long long hi, long long *out);
int ckpt_at_end(const char *p);  // nothing but spaces and newlines left

// The run's fields as "key value" pairs, each followed by `sep` (' ' in a header, '\n' in a
// manifest): the length written, or -1 when it does not fit. And their reading, in that order.
int ckpt_run_write(const ckpt_run *r, char sep, char *out, size_t size);
int ckpt_run_read(char **p, ckpt_run *r);

// ckpt_read_rank, and the checksum the file stores (what the manifest holds of it).
int ckpt_read_rank_sum(const char *path, ckpt_header *h, float **params, double **losses, uint64_t *stored, char *why,
                       size_t size);

#endif
