// train.cu (lesson 12): lesson 08's training loop on this rank's shard, its waits polled
// (stop.cu), each batch's step ddp.h's with this lesson's exercises as its hooks
// (buckets.cu); the synchronous reference every run must match.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// ----------------------------------------------------------------------------
// the training loop (lesson 08's, with polled waits)

float *copy_batch(trainer *t, data_parallel *dp, long i)
{
    int s = (int)(i % SLOTS);
    float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
    if (i >= SLOTS && event_pending(dp->copied[s])) SLOT_WAIT(t, wait_polled(dp->dist, dp->copied[s]));
    ddp_prepare_shard(t, dp, i, h_batch);  // ddp.h, as is everything ddp_
    // BEGIN SOLUTION(12-device-slot): lesson 08's rule: device slot s is still read by the
    // step of batch i-2: make the copy stream (not the host) wait for that step's event
    if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, dp->stepped[s], 0));
    // END SOLUTION
    test_delay(t, DELAY_COPY, t->copy_stream);
    CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(dp->copied[s], t->copy_stream));
    CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, dp->copied[s], 0));
    return d_batch;
}

int train_loop(trainer *t, void *ctx)
{
    data_parallel *dp = (data_parallel *)ctx;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        dist_fault_inject(dp->dist, &dp->fault, i, t->compute_stream);  // --fault: a failure on purpose
        float *d_batch = copy_batch(t, dp, i);
        ddp_step(t, dp, i, d_batch);  // forward, backward, the buckets (buckets.cu: the hooks), the updates
        CUDA_CHECK(cudaEventRecord(dp->stepped[i % SLOTS], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
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
int reference_loop(trainer *t, void *ctx)
{
    data_parallel *dp = (data_parallel *)ctx;
    cudaStream_t s = t->compute_stream;
    const bucket_plan *p = &dp->plan;
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    cudaEvent_t done;  // the batch has finished
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    for (long i = 0; i < t->opt.batches; i++) {
        ddp_prepare_shard(t, dp, i, h_batch);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        ddp_backward(t, dp, i, d_batch, s, 0);
        for (int b = 0; b < p->count; b++) allreduce_gradients(t, dp, p->first[b], p->floats[b], s);
        for (int b = 0; b < p->count; b++) mlp_update(&dp->averaged, p->first[b], p->floats[b], s);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaEventRecord(done, s));
        CUDA_CHECK(wait_polled(dp->dist, done));
        trainer_take_loss(t, i);
    }
    CUDA_CHECK(cudaEventDestroy(done));
    ddp_average_losses(t, dp);
    return 0;
}
