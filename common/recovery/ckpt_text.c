// ckpt_text.c: a checkpoint's text read one word at a time (ckpt_text.h).
#include "common/recovery/ckpt_text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ckpt_next_word(char **p, char *out, size_t size)
{
    while (**p == ' ' || **p == '\n') (*p)++;
    size_t n = strcspn(*p, " \n");
    if (n == 0 || n >= size) return 0;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    return 1;
}

int ckpt_next_key(char **p, const char *key)
{
    char word[32];
    return ckpt_next_word(p, word, sizeof word) && strcmp(word, key) == 0;
}

int ckpt_next_int(char **p, long long lo, long long hi, long long *out)
{
    char word[32], *end = NULL;
    if (!ckpt_next_word(p, word, sizeof word) || (word[0] != '-' && (word[0] < '0' || word[0] > '9'))) return 0;
    errno = 0;
    long long v = strtoll(word, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int ckpt_at_end(const char *p) { return p[strspn(p, " \n")] == '\0'; }
