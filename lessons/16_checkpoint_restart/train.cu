// STUDENT VERSION of solutions/16_checkpoint_restart/train.cu, made by `make lessons` (checksum 2769161433)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, resume.cu, snapshot.cu.
// train.cu (lesson 16): lesson 12's data-parallel training (12's ddp.h step, its hooks lesson 12's
// own exercises) from the resume point, a checkpoint every --checkpoint-every batches: blocking
// (checkpoint.cu), or a snapshot copied before the next update and written behind the training
// (snapshot.cu); the faults of --fault that kill a rank around 12's step; every NCCL call counted.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

// ----------------------------------------------------------------------------
// lesson 12's step, with the snapshot and the faults

// hooks.issue: lesson 12's ddp_issue_bucket (bucket b's all-reduce after its gradients); --fault kill
// strikes around it, and --fault kill-writing two batches after its checkpoint, the writer stopped
// in its file.
static void issue_killed(trainer *t, ddp_state *dp, long i, int b)
{
    checkpoint_restart *cr = (checkpoint_restart *)dp->hooks.ctx;
    int kill = fault_now(cr, FAULT_KILL, i), writing = fault_now(cr, FAULT_KILL_WRITING, i - 2);
    if (kill || writing) {  // every checkpoint begun before is complete (kill-writing: but the one its writer is in)
        if (writing) wait_writer_mid_file(cr);
        checkpoints_settle(cr, kill);
        dist_fault_hold(dp->comm_stream);  // the all-reduce below held back: the others wait in it
    }
    ddp_issue_bucket(t, dp, i, b);  // lesson 12's
    cr->calls++;
    if (kill || writing)
        dist_fault_kill(cr->dist, "killed inside all-reduce #%lld at batch %ld as asked (--fault %s)", cr->calls - 1, i,
                        kill ? "kill" : "kill-writing, its writer half way through its file");
}

// hooks.wait: before bucket b's update, lesson 12's wait for its all-reduce; before the step's
// first update, when a checkpoint is due, the snapshot of the weights the step is about to change
// (snapshot.cu), then handed to the writer thread.
static void wait_before_update(trainer *t, ddp_state *dp, int b)
{
    checkpoint_restart *cr = (checkpoint_restart *)dp->hooks.ctx;
    if (b == 0 && cr->ckpt.snap.due) {
        double t0 = host_now_ms();
        snapshot_copy(t, cr);  // exercise 16-snapshot
        snapshot_hand_over(cr);
        cr->ckpt.fig.stall_ms += host_now_ms() - t0;
    }
    ddp_wait_reduced(t, dp, b);  // lesson 12's
}

// hooks.issued: the losses' all-reduce at the end of the run, counted.
static void count_losses(ddp_state *dp, long batch, size_t count, cudaStream_t stream)
{
    (void)batch, (void)count, (void)stream;
    ((checkpoint_restart *)dp->hooks.ctx)->calls++;
}

void step_hooks(checkpoint_restart *cr)
{
    ddp_hooks *h = &cr->dp.hooks;
    h->issue = issue_killed;
    h->wait = wait_before_update;  // lesson 12's ddp_wait_reduced, the snapshot before it
    h->issued = count_losses;
    h->ctx = cr;
}

void gather(checkpoint_restart *cr, const void *mine, void *all, size_t bytes)
{
    dist_allgather(cr->dist, mine, all, bytes, cr->dp.comm_stream);
    cr->calls++;
}

// ----------------------------------------------------------------------------
// the training loop (lesson 12's), from the resume point, with its checkpoints: its time (ms)

double train_loop(trainer *t, checkpoint_restart *cr)
{
    checkpointing *c = &cr->ckpt;
    ddp_state *dp = &cr->dp;
    long next_loss = c->start;  // the losses before the resume point came with the checkpoint
    double t0 = host_now_ms();
    trace_range run = trace_begin(TL_RANGE_PHASE, "run", -1);
    t->delays_on = 1;  // the test delays (--delay-us) act in the run, not in the setup's measurement
    c->steady_t0_ms = host_now_ms(), c->steady_from = c->start;  // --checkpoint-every auto moves them on
    for (long i = c->start; i < t->opt.batches; i++) {
        writer_check(cr);  // a checkpoint writer that failed stops the run here, saying why
        float *d_batch = ddp_copy_batch(t, dp, i, c->start);  // lesson 12's, its slots new at the resume point
        ddp_step(t, dp, i, d_batch);  // lesson 12's step, its hooks above (a snapshot before the update)
        CUDA_CHECK(cudaEventRecord(dp->stepped[i % DDP_SLOTS], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, DDP_SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
        // with --checkpoint-dir, a checkpoint every --checkpoint-every batches (auto: chosen from what
        // the first cost, interval.cu), none after the last: the run is done
        if (checkpoint_due(t, cr, i)) {
            if (c->mode == CKPT_BLOCKING)
                checkpoint_save(t, cr, i, &next_loss);
            else
                snapshot_due(t, cr, i, next_loss);  // copied before batch i + 1's update, written behind it
        }
    }
    ddp_average_losses(t, dp);  // its all-reduce counted (count_losses)
    checkpoints_drain(t, cr);   // the last checkpoint written before the run ends
    CUDA_CHECK(dist_event_wait(cr->dist, dp->losses_averaged));
    t->delays_on = 0;
    trace_end(&run);
    return host_now_ms() - t0;
}
