// ckpt_resume.c: where a restart resumes: the checkpoints this run may resume from, and the one
// every rank holds (ckpt.h).
#include <stdio.h>

#include "common/recovery/ckpt.h"

int ckpt_resumable(const char *root, const ckpt_run *run, int batches, long long *held,
                   void (*skipped)(void *ctx, long long batch, const char *why), void *ctx, char *why, size_t size)
{
    ckpt_manifest m[CKPT_HELD];
    int n = ckpt_complete(root, held, m, CKPT_HELD, skipped, ctx);
    char field[400];
    for (int k = 0; k < n; k++) {
        if (ckpt_run_differs(&m[k].run, run, CKPT_EVERY_FIELD, field, sizeof field))
            return snprintf(why, size, "its checkpoint of batch %lld %s (a checkpoint of another run)", held[k], field),
                   -1;
        if (held[k] + 1 >= batches)
            return snprintf(why, size,
                            "its checkpoint of batch %lld lies at or past this run's last batch (--batches %d: a "
                            "checkpoint of another run)",
                            held[k], batches),
                   -1;
    }
    return n;
}

// 1 when h holds checkpoint `batch`.
static int holds(const ckpt_held *h, long long batch)
{
    for (int k = 0; k < h->n; k++)
        if (h->batch[k] == batch) return 1;
    return 0;
}

long long ckpt_agree(const ckpt_held *all, int world, int *any, int *alike, char *newest, size_t size)
{
    long long agreed = -1;
    for (int k = 0; k < all[0].n && agreed < 0; k++) {
        int everyone = 1;
        for (int r = 1; r < world && everyone; r++) everyone = holds(&all[r], all[0].batch[k]);
        if (everyone) agreed = all[0].batch[k];
    }
    size_t at = 0;
    *any = 0, *alike = 1;
    newest[0] = '\0';
    for (int r = 0; r < world && at < size; r++) {
        *any = *any || all[r].n > 0;
        *alike = *alike && all[r].n > 0 && all[0].n > 0 && all[r].batch[0] == all[0].batch[0];
        if (all[r].n > 0)
            at += (size_t)snprintf(newest + at, size - at, "%srank %d: batch %lld", r ? ", " : "", r, all[r].batch[0]);
        else
            at += (size_t)snprintf(newest + at, size - at, "%srank %d: none", r ? ", " : "", r);
    }
    return agreed;
}
