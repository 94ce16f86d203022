// STUDENT VERSION of solutions/12_data_parallel_overlap/train.cu, made by `make lessons` (checksum 707814490)
// Fill in its 1 TODO.
// train.cu (lesson 12's library, ddp.h): the step, where this lesson's exercises are called (its
// hooks: buckets.cu), lesson 08's training loop around it on this rank's shard, its waits polled
// (common/dist's dist_event_wait), and the synchronous reference every run must match.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"                   // the library's face
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/dist/dist.h"      // defines: dist_event_wait, dist_fault_inject
#include "common/train/trainer.h"  // defines: trainer_forward, mlp_forward, mlp_update, trainer_loss_slot,
                                   //          trainer_take_loss, test_delay, event_pending, SLOT_WAIT, batch_features

// ----------------------------------------------------------------------------
// the step: the backward pass hands each bucket to hooks.issue (ddp_issue_bucket, buckets.cu) as
// soon as its gradients are queued; each bucket's update waits in hooks.wait (ddp_wait_reduced)

void ddp_backward(trainer *t, ddp_state *dp, long i, float *d_batch, cudaStream_t stream, int issue)
{
    mlp_model *m = &t->model;
    int L = m->shape.layers, cols = t->opt.batch, b = 0;
    float *delta = m->d_delta[0], *prev = m->d_delta[1];
    test_delay(t, DELAY_COMPUTE, stream);
    // the mean is over this rank's shard; the update then takes the mean of the ranks' means
    mlp_loss(m, m->d_act[L], batch_targets(t, d_batch), delta, trainer_loss_slot(t, i), cols, cols, stream);
    for (int l = L; l >= 1; l--) {
        const float *in = l == 1 ? batch_features(d_batch) : m->d_act[l - 1];
        int completes = issue && l == dp->plan.first_layer[b];  // layer l completes bucket b
        mlp_backward_weights(m, l, in, delta, cols, 0, stream);
        if (completes && dp->ready_after == DDP_READY_WEIGHTS) dp->hooks.issue(t, dp, i, b++);
        if (l > 1) mlp_backward_error(m, l, in, delta, prev, cols, stream);
        if (completes && dp->ready_after == DDP_READY_LAYER) dp->hooks.issue(t, dp, i, b++);
        float *swap = delta;
        delta = prev;
        prev = swap;
    }
}

// The buckets this rank issues at batch i, in order; returns how many. Sets *as_planned when
// they are the plan's in the plan's order, which the backward pass may issue as they get ready.
static int issue_order(const ddp_state *dp, long i, int *order, int *as_planned)
{
    int n = dp->plan.count;
    if (dp->hooks.order)
        n = dp->hooks.order(dp, i, order);
    else
        for (int b = 0; b < n; b++) order[b] = b;
    *as_planned = n == dp->plan.count;
    for (int k = 0; k < n && *as_planned; k++) *as_planned = order[k] == k;
    return n;
}

void ddp_step(trainer *t, ddp_state *dp, long i, float *d_batch)
{
    cudaStream_t compute = t->compute_stream;
    int order[DDP_MAX_BUCKETS], as_planned = 0;
    int n = issue_order(dp, i, order, &as_planned);
    int overlapped = dp->overlap && as_planned;
    trainer_forward(t, d_batch, compute);
    ddp_backward(t, dp, i, d_batch, compute, overlapped);
    if (!overlapped)
        for (int k = 0; k < n; k++) dp->hooks.issue(t, dp, i, order[k]);
    // every update after the whole backward pass: an update issued right after its all-reduce
    // would make the compute stream wait for the communication, and the lower layers behind it
    for (int b = 0; b < dp->plan.count; b++) {
        dp->hooks.wait(t, dp, b);
        mlp_update(&dp->averaged, dp->plan.first[b], dp->plan.floats[b], compute);
    }
}

// ----------------------------------------------------------------------------
// the training loop (lesson 08's, with polled waits)

float *ddp_copy_batch(trainer *t, ddp_state *dp, long i, long first)
{
    int s = (int)(i % DDP_SLOTS);
    float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
    if (i >= first + DDP_SLOTS && event_pending(dp->copied[s])) SLOT_WAIT(t, dist_event_wait(dp->dist, dp->copied[s]));
    ddp_prepare_shard(t, dp, i, h_batch);  // ddp.h, as is everything ddp_
    // TODO(12-device-slot): lesson 08's rule: device slot s is still read by the
    // step of batch i-2: make the copy stream (not the host) wait for that step's event
    test_delay(t, DELAY_COPY, t->copy_stream);
    CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(dp->copied[s], t->copy_stream));
    CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, dp->copied[s], 0));
    return d_batch;
}

int ddp_train_loop(trainer *t, void *ctx)
{
    ddp_state *dp = (ddp_state *)ctx;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        dist_fault_inject(dp->dist, &dp->fault, i, t->compute_stream);  // --fault: a failure on purpose
        float *d_batch = ddp_copy_batch(t, dp, i, 0);
        ddp_step(t, dp, i, d_batch);  // forward, backward, the buckets (buckets.cu: the hooks), the updates
        CUDA_CHECK(cudaEventRecord(dp->stepped[i % DDP_SLOTS], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, DDP_SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
    }
    ddp_average_losses(t, dp);  // the last loss's copy came after the last update: the GPU is done
    return 0;
}

// ----------------------------------------------------------------------------
// the reference

// What every run must match: the same data-parallel training with the host waiting
// for every batch, everything on the compute stream (NCCL's calls too), the same
// buckets in the same order (so, on any number of ranks, the same sums in the same
// order). The harness runs it once, first.
int ddp_reference_loop(trainer *t, void *ctx)
{
    ddp_state *dp = (ddp_state *)ctx;
    cudaStream_t s = t->compute_stream;
    const ddp_bucket_plan *p = &dp->plan;
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    cudaEvent_t done;  // the batch has finished
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    for (long i = 0; i < t->opt.batches; i++) {
        ddp_prepare_shard(t, dp, i, h_batch);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        ddp_backward(t, dp, i, d_batch, s, 0);
        for (int b = 0; b < p->count; b++) ddp_allreduce_gradients(t, dp, p->first[b], p->floats[b], s);
        for (int b = 0; b < p->count; b++) mlp_update(&dp->averaged, p->first[b], p->floats[b], s);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaEventRecord(done, s));
        CUDA_CHECK(dist_event_wait(dp->dist, done));
        trainer_take_loss(t, i);
    }
    CUDA_CHECK(cudaEventDestroy(done));
    ddp_average_losses(t, dp);
    return 0;
}
