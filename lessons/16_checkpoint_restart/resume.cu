// STUDENT VERSION of solutions/16_checkpoint_restart/resume.cu, made by `make lessons` (checksum 812888057)
// Fill in its 1 TODO.
// resume.cu (lesson 16): where a run starts. Before the GPU is touched, each rank lists the newest
// complete checkpoints under --checkpoint-dir (a torn or corrupt one is said and passed over for
// the one before it); a checkpoint of another run (any field of common/recovery/ckpt.h's ckpt_run: rank
// count, shape, seed, --batch, --lr, ...), or one at or past the run's last batch, is refused with
// one line and exit code 2. Once connected, the ranks agree with one small all-gather on the newest
// checkpoint every rank holds (a rank that cannot read a manifest, or sees another folder, would
// otherwise train other batches than the rest); none in common stops every rank, saying why. Then
// each rank takes its own state back and trains from the batch after it (exercise 16-resume).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

static void say_skipped(void *ctx, long long batch, const char *why)
{
    const checkpoint_restart *cr = (const checkpoint_restart *)ctx;
    if (cr->dist->rank == 0) stderr_line("%s: checkpoint of batch %lld passed over: %s", cr->dist->name, batch, why);
}

void find_checkpoints(checkpoint_restart *cr, int batches)
{
    checkpointing *c = &cr->ckpt;
    char why[600];
    c->held_n = 0;
    if (!c->root) return;
    c->held_n = ckpt_resumable(c->root, &c->run, batches, c->held, say_skipped, (void *)cr, why, sizeof why);
    if (c->held_n < 0) usage_error(cr->dist->name, "--checkpoint-dir %s: %s", c->root, why);
    for (int k = c->held_n - 1; k >= 0; k--) c->known[c->known_n++] = c->held[k];  // verified just now
}

long long agree_on_checkpoint(checkpoint_restart *cr)
{
    dist_env *d = cr->dist;
    checkpointing *c = &cr->ckpt;
    if (!c->root || d->world == 1) return c->held_n > 0 ? c->held[0] : -1;
    ckpt_held mine;
    memset(&mine, 0, sizeof mine);
    mine.n = c->held_n;
    for (int k = 0; k < c->held_n; k++) mine.batch[k] = c->held[k];
    ckpt_held *all = (ckpt_held *)host_calloc((size_t)d->world, sizeof mine, "the checkpoints held");
    gather(cr, &mine, all, sizeof mine);
    int any = 0, alike = 0;
    char newest[256];
    long long agreed = ckpt_agree(all, d->world, &any, &alike, newest, sizeof newest);
    free(all);
    if (agreed < 0 && any)
        dist_fail(d,
                  "the ranks hold no complete checkpoint in common under --checkpoint-dir %s (the newest each "
                  "holds: %s): every rank must see the same folder, whole",
                  c->root, newest);
    if (agreed >= 0 && !alike && d->rank == 0)
        stderr_line("%s: every rank resumes from the checkpoint of batch %lld, the newest they all hold complete "
                    "(the newest each holds: %s)",
                    d->name, agreed, newest);
    return agreed;
}

// This rank's state from checkpoint `batch` (the one the ranks agreed on): the weights
// on the GPU, the losses taken so far; returns the first batch to train.
long restore(trainer *t, checkpoint_restart *cr, long long batch)
{
    char path[1300], why[1500];
    ckpt_header h;
    float *params = NULL;
    double *losses = NULL;
    ckpt_rank_file(cr->ckpt.root, batch, cr->dist->rank, path, sizeof path);
    if (ckpt_read_rank(path, &h, &params, &losses, why, sizeof why) != 0 ||
        ckpt_header_differs(&h, batch, cr->dist->rank, &cr->ckpt.run, why, sizeof why))
        dist_fail(cr->dist, "cannot resume: %s", why);  // checked a moment ago: the file changed since
    long start = 0;
    // TODO(16-resume): put the checkpoint's weights (params, h.run.params floats) into
    // t->model.d_params (cudaMemcpy), its losses (losses[k] for k < h.losses) into
    // t->run.losses[k], each counted taken once (t->run.taken[k] = 1), and start at the batch after
    // the checkpoint's: h.batch + 1
    (void)t;
    free(params);
    free(losses);
    cr->ckpt.resume_from = start > 0 ? batch : -1;
    return start;
}
