// STUDENT VERSION of solutions/16_checkpoint_restart/train.cu, made by `make lessons` (checksum 597084574)
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

// hooks.issue: lesson 12's issue_bucket (bucket b's all-reduce after its gradients); --fault kill
// strikes around it, and --fault kill-writing two batches after its checkpoint, the writer stopped
// in its file.
static void issue_killed(trainer *t, data_parallel *dp, long i, int b)
{
    checkpoint_restart *cr = (checkpoint_restart *)dp->hooks.ctx;
    int kill = fault_now(cr, FAULT_KILL, i), writing = fault_now(cr, FAULT_KILL_WRITING, i - 2);
    if (kill || writing) {  // every checkpoint begun before is complete (kill-writing: but the one its writer is in)
        if (writing) wait_writer_mid_file(cr);
        checkpoints_settle(cr, kill);
        dist_fault_hold(dp->comm_stream);  // the all-reduce below held back: the others wait in it
    }
    issue_bucket(t, dp, i, b);  // lesson 12's
    cr->calls++;
    if (kill || writing)
        dist_fault_kill(cr->dist, "killed inside all-reduce #%lld at batch %ld as asked (--fault %s)", cr->calls - 1, i,
                        kill ? "kill" : "kill-writing, its writer half way through its file");
}

// hooks.wait: before bucket b's update, lesson 12's wait for its all-reduce; before the step's
// first update, when a checkpoint is due, the snapshot of the weights the step is about to change
// (snapshot.cu), then handed to the writer thread.
static void wait_before_update(trainer *t, data_parallel *dp, int b)
{
    checkpoint_restart *cr = (checkpoint_restart *)dp->hooks.ctx;
    if (b == 0 && cr->ckpt.snap.due) {
        double t0 = host_now_ms();
        snapshot_copy(t, cr);  // exercise 16-snapshot
        snapshot_hand_over(cr);
        cr->ckpt.fig.stall_ms += host_now_ms() - t0;
    }
    wait_reduced(t, dp, b);  // lesson 12's
}

// hooks.issued: the losses' all-reduce at the end of the run, counted.
static void count_losses(data_parallel *dp, long batch, size_t count, cudaStream_t stream)
{
    (void)batch, (void)count, (void)stream;
    ((checkpoint_restart *)dp->hooks.ctx)->calls++;
}

void step_hooks(checkpoint_restart *cr)
{
    ddp_hooks *h = &cr->dp.hooks;
    h->issue = issue_killed;
    h->wait = wait_before_update;  // lesson 12's wait_reduced, the snapshot before it
    h->issued = count_losses;
    h->ctx = cr;
}

void gather(checkpoint_restart *cr, const void *mine, void *all, size_t bytes)
{
    dist_allgather(cr->dist, mine, all, bytes, cr->dp.comm_stream);
    cr->calls++;
}

// ----------------------------------------------------------------------------
// the training loop (lesson 12's), from the resume point, with its checkpoints

int train_loop(trainer *t, checkpoint_restart *cr)
{
    checkpointing *c = &cr->ckpt;
    data_parallel *dp = &cr->dp;
    long next_loss = c->start;  // the losses before the resume point came with the checkpoint
    c->steady_t0_ms = host_now_ms(), c->steady_from = c->start;  // --checkpoint-every auto moves them on
    for (long i = c->start; i < t->opt.batches; i++) {
        writer_check(cr);  // a checkpoint writer that failed stops the run here, saying why
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        if (i >= c->start + SLOTS && event_pending(dp->copied[s]))
            SLOT_WAIT(t, dist_event_wait(cr->dist, dp->copied[s]));
        ddp_prepare_shard(t, dp, i, h_batch);
        if (i >= c->start + SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, dp->stepped[s], 0));
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(dp->copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, dp->copied[s], 0));
        ddp_step(t, dp, i, d_batch);  // lesson 12's step, its hooks above (a snapshot before the update)
        CUDA_CHECK(cudaEventRecord(dp->stepped[s], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
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
    return 0;
}
