// ckpt_text.h: the reading of a checkpoint's text (ckpt_text.c): a rank file's header and a
// manifest are words separated by spaces or newlines, "key value" pairs, read one word at a time,
// every number within its bounds. ckpt.c reads its files with it, ckpt_run.c the run's fields.
#ifndef COMMON_CKPT_TEXT_H
#define COMMON_CKPT_TEXT_H

#include <stddef.h>

// The next word of *p (after spaces and newlines) into out: 0 when there is none or it does
// not fit. *p moves past it.
int ckpt_next_word(char **p, char *out, size_t size);
int ckpt_next_key(char **p, const char *key);  // the next word is `key`
// The next word as a whole number within [lo, hi] (no overflow): 0 when it is not one.
int ckpt_next_int(char **p, long long lo, long long hi, long long *out);
int ckpt_at_end(const char *p);  // nothing but spaces and newlines left

#endif
