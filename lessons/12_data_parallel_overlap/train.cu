// STUDENT VERSION of solutions/12_data_parallel_overlap/train.cu, made by `make lessons` (checksum 1703376395)
// Fill in its 3 TODOs.
// train.cu (lesson 12): this rank's shard of a batch; the step, each bucket's all-reduce issued
// as soon as its gradients are ready (exercises 12-ready, 12-allreduce, 12-update-wait); lesson
// 08's training loop with polled waits; the synchronous reference every run must match.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// the rank's shard

// Host work: this rank's samples [rank * shard, (rank + 1) * shard) of batch i, the
// same bits as those columns of lesson 06's whole batch (a prep range on the timeline).
void prepare_shard(trainer *t, const data_parallel *dp, long i, float *h_batch)
{
    int shard = t->opt.batch;  // the trainer was built for one shard
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, dp->dist->rank * shard, shard, h_batch);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;  // only the main thread prepares here: no lock needed
    t->run.main_prep_ms += ms;
}

// ----------------------------------------------------------------------------
// the step

// Sums floats [first, first + floats) of the gradients over the ranks into the same range of
// dp->d_sum, on `stream`. Every path that all-reduces gradients calls it: the step (one bucket),
// the reference, and the parts timed alone (every bucket, then the whole gradient at once).
void allreduce_gradients(trainer *t, data_parallel *dp, size_t first, size_t floats, cudaStream_t stream)
{
    // TODO(12-allreduce): sum that range of t->model.d_grads over the ranks into the same
    // range of dp->d_sum: ncclAllReduce (ncclFloat, ncclSum, the gradients' communicator dp->grads)
    // on `stream`, inside NCCL_CHECK(dp->dist, ...)
    (void)t, (void)dp, (void)first, (void)floats, (void)stream;
}

// Issues bucket b's all-reduce on the communication stream, after its gradients.
static void issue_bucket(trainer *t, data_parallel *dp, int b)
{
    // TODO(12-ready): the all-reduce must not read the bucket's gradients before the
    // backward pass has written them: mark that point on the compute stream with grads_ready[b],
    // and make the communication stream (not the host) wait for it
    test_delay(t, DELAY_COPY, dp->comm_stream);  // the test hook holds communication back with the copies
    allreduce_gradients(t, dp, dp->plan.first[b], dp->plan.floats[b], dp->comm_stream);
    CUDA_CHECK(cudaEventRecord(dp->reduced[b], dp->comm_stream));
}

// The loss of batch i into its ring slot, then every layer's gradients, last layer
// first, on `stream` (mlp_backward without its update). With issue_buckets, each
// bucket's all-reduce is issued as soon as its gradients are queued: right after the
// weight gradients of its lowest layer (--ready-after weights), so that it runs beside that
// layer's error product and everything below; or after the whole layer (--ready-after layer).
void backward_pass(trainer *t, data_parallel *dp, long i, float *d_batch, cudaStream_t stream, int issue_buckets)
{
    mlp_model *m = &t->model;
    int L = m->shape.layers, cols = t->opt.batch, b = 0;
    float *delta = m->d_delta[0], *prev = m->d_delta[1];
    test_delay(t, DELAY_COMPUTE, stream);
    // the mean is over this rank's shard; the update then takes the mean of the ranks' means
    mlp_loss(m, m->d_act[L], batch_targets(t, d_batch), delta, trainer_loss_slot(t, i), cols, cols, stream);
    for (int l = L; l >= 1; l--) {
        const float *in = l == 1 ? batch_features(d_batch) : m->d_act[l - 1];
        int completes = issue_buckets && l == dp->plan.first_layer[b];  // layer l completes bucket b
        mlp_backward_weights(m, l, in, delta, cols, 0, stream);
        if (completes && dp->ready_after == READY_WEIGHTS) issue_bucket(t, dp, b++);
        if (l > 1) mlp_backward_error(m, l, in, delta, prev, cols, stream);
        if (completes && dp->ready_after == READY_LAYER) issue_bucket(t, dp, b++);
        float *swap = delta;
        delta = prev;
        prev = swap;
    }
}

// Batch i's step: forward and backward on the compute stream, the all-reduces on the
// communication stream (each as soon as its bucket is ready, or all after the backward
// pass), then each bucket's update.
static void train_step(trainer *t, data_parallel *dp, long i, float *d_batch)
{
    cudaStream_t compute = t->compute_stream;
    trainer_forward(t, d_batch, compute);
    backward_pass(t, dp, i, d_batch, compute, dp->overlap == OVERLAP_BUCKETS);
    if (dp->overlap == OVERLAP_NONE)
        for (int b = 0; b < dp->plan.count; b++) issue_bucket(t, dp, b);
    for (int b = 0; b < dp->plan.count; b++) {
        // TODO(12-update-wait): the update of bucket b reads its range of dp->d_sum,
        // which its all-reduce writes on the other stream: make the compute stream wait for that
        // all-reduce first
        mlp_update(&dp->averaged, dp->plan.first[b], dp->plan.floats[b], compute);
    }
}

// ----------------------------------------------------------------------------
// the training loop (lesson 08's, with polled waits)

// Each rank took its own shard's losses; batch i's loss is their mean over the ranks
// (the shards are equal). One all-reduce of the whole run's losses at its end, not
// one per batch: a collective costs tens of microseconds.
static void average_losses(trainer *t, data_parallel *dp)
{
    size_t n = (size_t)t->opt.batches;
    for (size_t i = 0; i < n; i++) dp->h_losses[i] = (float)t->run.losses[i];
    CUDA_CHECK(cudaMemcpyAsync(dp->d_losses, dp->h_losses, sizeof(float) * n, cudaMemcpyHostToDevice, dp->comm_stream));
    NCCL_CHECK(dp->dist,
               ncclAllReduce(dp->d_losses, dp->d_losses, n, ncclFloat, ncclSum, dp->dist->comm, dp->comm_stream));
    CUDA_CHECK(cudaMemcpyAsync(dp->h_losses, dp->d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost, dp->comm_stream));
    CUDA_CHECK(cudaEventRecord(dp->losses_averaged, dp->comm_stream));
    HOST_SYNC(t, wait_polled(dp->dist, dp->losses_averaged));
    for (size_t i = 0; i < n; i++) t->run.losses[i] = dp->h_losses[i] / (float)dp->dist->world;
}

int train_loop(trainer *t, void *ctx)
{
    data_parallel *dp = (data_parallel *)ctx;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        dist_fault_inject(dp->dist, &dp->fault, i, t->compute_stream);  // --fail-rank: a failure on purpose
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        if (i >= SLOTS && event_pending(dp->copied[s])) SLOT_WAIT(t, wait_polled(dp->dist, dp->copied[s]));
        prepare_shard(t, dp, i, h_batch);
        if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, dp->stepped[s], 0));
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(dp->copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, dp->copied[s], 0));
        train_step(t, dp, i, d_batch);
        CUDA_CHECK(cudaEventRecord(dp->stepped[s], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
    }
    average_losses(t, dp);  // the last loss's copy came after the last update: the GPU is done
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
    for (long i = 0; i < t->opt.batches; i++) {
        prepare_shard(t, dp, i, h_batch);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        backward_pass(t, dp, i, d_batch, s, 0);
        for (int b = 0; b < p->count; b++) allreduce_gradients(t, dp, p->first[b], p->floats[b], s);
        for (int b = 0; b < p->count; b++) mlp_update(&dp->averaged, p->first[b], p->floats[b], s);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaEventRecord(dp->ref_done, s));
        CUDA_CHECK(wait_polled(dp->dist, dp->ref_done));
        trainer_take_loss(t, i);
    }
    average_losses(t, dp);
    return 0;
}
