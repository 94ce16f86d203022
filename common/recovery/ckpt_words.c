// ckpt_words.c: the checkpoint writers' words to rank 0, small files of the rendezvous folder (ckpt.h).
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>  // getpid, unlink

#include "common/base/own_file.h"      // defines: own_file_create, own_file_publish
#include "common/base/regular_file.h"  // defines: regular_file_open
#include "common/recovery/ckpt.h"

static void word_path(const ckpt_words *w, long long batch, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/checkpoint.%s.b%lld.rank%d", w->folder, w->run, batch, rank);
}

void ckpt_word_say(const ckpt_words *w, long long batch, int rank, const ckpt_word *word)
{
    char path[1300], tmp[1400];
    word_path(w, batch, rank, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = own_file_create(tmp);
    if (!f) return;  // rank 0 then waits until its time limit, and says so
    fprintf(f, "%s %lld %s %lld %016llx %d\n", w->fingerprint, batch, word->what, word->size,
            (unsigned long long)word->sum, word->err);
    own_file_publish(f, tmp, path);
}

int ckpt_word_read(const ckpt_words *w, long long batch, int rank, ckpt_word *word)
{
    char path[1300], fp[32], why[160];
    long long b = -1;
    unsigned long long s = 0;
    word_path(w, batch, rank, path, sizeof path);
    FILE *f = regular_file_open(path, why, sizeof why);  // a named pipe there would block rank 0's writer
    if (!f) return 0;
    int n = fscanf(f, "%31s %lld %15s %lld %16llx %d", fp, &b, word->what, &word->size, &s, &word->err);
    fclose(f);
    word->sum = s;
    return n == 6 && strcmp(fp, w->fingerprint) == 0 && b == batch;
}

void ckpt_words_clear(const ckpt_words *w, long long batch, int world)
{
    char path[1300];
    for (int r = 1; r < world; r++) {
        word_path(w, batch, r, path, sizeof path);
        unlink(path);
    }
}
