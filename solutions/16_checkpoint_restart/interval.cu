// interval.cu (lesson 16): when a checkpoint is due. With --checkpoint-every N, after every N
// batches, counted from batch 0 (a restart keeps the schedule). With --checkpoint-every auto (the
// default), CheckFreq's rule (Mohan et al., FAST '21): measure what a checkpoint costs, then choose
// the interval from it. The first checkpoint comes after AUTO_FIRST batches; after the next batch
// (its snapshot copied by then) every rank waits once for it to be complete, the ranks agree on the
// worst of their figures (one small all-gather), and every later checkpoint comes the smallest
// interval after it whose write finishes within it with room to spare (AUTO_SPARE) and whose steady
// cost stays within AUTO_MAX_COST of the step. auto_interval is that rule alone, a pure function.
#include <math.h>  // ceil
#include <stdio.h>
#include <string.h>

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

int auto_interval(const ckpt_cost *c, int most)
{
    if (!(c->step_ms > 0)) return most;  // no step measured: as rarely as the run allows
    // the write (the file, and rank 0's manifest) within 1 / AUTO_SPARE of the interval: the next
    // snapshot finds the image free, and a slower write now and then still fits
    double by_write = ceil(AUTO_SPARE * c->write_ms / c->step_ms - 1e-9);
    // what the training pays per checkpoint (the main thread's stall, and at most the copy's whole
    // time: the update waits for it when the forward and backward passes are the shorter), spread
    // over the interval, at most AUTO_MAX_COST of a step
    double by_cost = ceil((c->stall_ms + c->copy_ms) / (AUTO_MAX_COST * c->step_ms) - 1e-9);
    double every = by_write > by_cost ? by_write : by_cost;
    if (every < 1) every = 1;
    return every < most ? (int)every : most;
}

// This rank's figures of the first checkpoint, once it is complete: the step before it, the main
// thread's stall, the snapshot's copy, and the writer's time (the file, and rank 0's manifest and
// prune: the whole cycle must fit in the interval).
static ckpt_cost first_cost(const checkpointing *c, double step_ms)
{
    const ckpt_figures *f = &c->fig;
    ckpt_cost cost = {step_ms, f->stall_ms, f->copies ? f->copy_ms / f->copies : 0,
                      f->last_write_ms + f->last_commit_ms};
    return cost;
}

// After the batch that follows the first checkpoint: wait for it to be complete (once, counted
// apart), agree across ranks on the worst figures, and choose the interval.
static void choose_interval(trainer *t, checkpoint_restart *cr, long i)
{
    checkpointing *c = &cr->ckpt;
    dist_env *d = cr->dist;
    double t0 = host_now_ms();
    checkpoints_settle(cr, 1);  // the first checkpoint complete, its manifest written
    c->fig.auto_wait_ms = host_now_ms() - t0;
    ckpt_cost mine = first_cost(c, c->probe_step_ms), worst = mine;
    if (d->world > 1) {  // every rank must choose the same interval: the slowest's figures, each
        ckpt_cost *all = (ckpt_cost *)host_calloc((size_t)d->world, sizeof mine, "the checkpoint costs");
        gather(cr, &mine, all, sizeof mine);
        for (int r = 0; r < d->world; r++) {
            if (all[r].step_ms > worst.step_ms) worst.step_ms = all[r].step_ms;
            if (all[r].stall_ms > worst.stall_ms) worst.stall_ms = all[r].stall_ms;
            if (all[r].copy_ms > worst.copy_ms) worst.copy_ms = all[r].copy_ms;
            if (all[r].write_ms > worst.write_ms) worst.write_ms = all[r].write_ms;
        }
        free(all);
    }
    c->cost = worst;
    c->every = auto_interval(&worst, t->opt.batches);
    c->next_due = c->probe + c->every;  // at or after this batch, i = probe + 1: every >= 1
    c->steady_t0_ms = host_now_ms();    // the steady state: from here on, checkpoints every c->every batches
    c->steady_from = i + 1;
}

int checkpoint_due(trainer *t, checkpoint_restart *cr, long i)
{
    checkpointing *c = &cr->ckpt;
    if (!c->root) return 0;
    if (!c->auto_every) return (i + 1) % c->every == 0 && i + 1 < t->opt.batches;  // none after the last batch
    if (i == c->start) c->probe_t0_ms = host_now_ms();
    if (c->probe >= 0 && c->every == 0 && i == c->probe + 1) choose_interval(t, cr, i);
    if (i != c->next_due || i + 1 >= t->opt.batches) return 0;
    if (c->probe < 0) {  // the first: what it costs chooses the interval
        c->probe = i;
        c->probe_step_ms = i > c->start ? (host_now_ms() - c->probe_t0_ms) / (double)(i - c->start) : 0;
    } else {
        c->next_due += c->every;
    }
    return 1;
}
