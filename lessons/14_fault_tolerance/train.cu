// STUDENT VERSION of solutions/14_fault_tolerance/train.cu, made by `make lessons` (checksum 3225120584)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, recorder.cu, resume.cu.
// train.cu (lesson 14): lesson 12's data-parallel training, each bucket's all-reduce issued as
// soon as its gradients are ready, with three additions: every NCCL call goes into the flight
// recorder; the faults of --fault are injected; every --fingerprint-every batches the ranks
// compare their calls before they issue them. The loop starts at the resume point and writes
// a checkpoint every --checkpoint-every batches.
#include <signal.h>  // raise, SIGKILL
#include <unistd.h>  // pause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

// ----------------------------------------------------------------------------
// the buckets (lesson 12)

// The layers grouped last first; a bucket closes once it holds `bytes` of gradients.
void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p)
{
    memset(p, 0, sizeof *p);
    int last = s->layers;
    for (int l = s->layers; l >= 1; l--) {
        size_t first = s->w_off[l], end = s->b_off[last] + (size_t)s->dims[last];
        if ((end - first) * sizeof(float) >= bytes || l == 1) {
            int b = p->count++;
            p->first_layer[b] = l;
            p->last_layer[b] = last;
            p->first[b] = first;
            p->floats[b] = end - first;
            last = l - 1;
        }
    }
}

// ----------------------------------------------------------------------------
// the step

// This rank's samples of batch i (lesson 12).
static void prepare_shard(trainer *t, const fault_tolerance *ft, long i, float *h_batch)
{
    int shard = t->opt.batch;
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, ft->dist->rank * shard, shard, h_batch);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;
    t->run.main_prep_ms += ms;
}

// --fault kill: holds the communication stream until the process is killed.
static void CUDART_CB hold_until_killed(void *unused)
{
    (void)unused;
    for (;;) pause();
}

// Bucket b's all-reduce on the communication stream after its gradients, recorded.
static void issue_bucket(trainer *t, fault_tolerance *ft, long i, int b)
{
    if (fault_now(ft, FAULT_KILL, i)) {
        // every earlier call completed here, so every rank issued it; this one is held back on its
        // stream: the others enter it and wait for this rank's part, which never comes
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaLaunchHostFunc(ft->dp.comm_stream, hold_until_killed, NULL));
    }
    CUDA_CHECK(cudaEventRecord(ft->dp.grads_ready[b], t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(ft->dp.comm_stream, ft->dp.grads_ready[b], 0));
    test_delay(t, DELAY_COPY, ft->dp.comm_stream);
    size_t first = ft->dp.plan.first[b];
    NCCL_CHECK(ft->dist, ncclAllReduce(t->model.d_grads + first, ft->dp.d_sum + first, ft->dp.plan.floats[b], ncclFloat,
                                       ncclSum, ft->dist->comm, ft->dp.comm_stream));
    recorder_record(&ft->rec, FLIGHT_ALL_REDUCE, i, b, ft->dp.plan.floats[b], sizeof(float), -1, ft->dp.comm_stream,
                    "comm");
    CUDA_CHECK(cudaEventRecord(ft->dp.reduced[b], ft->dp.comm_stream));
    if (fault_now(ft, FAULT_KILL, i)) {
        fprintf(stderr, "%s: killed inside all-reduce #%lld at batch %ld as asked (--fault kill)\n", ft->dist->name,
                ft->rec.collectives - 1, i);
        fflush(stderr);
        raise(SIGKILL);
    }
}

// The order this rank issues batch i's buckets in: 0, 1, ... (the order of the backward pass),
// but for the faults. Returns how many.
static int bucket_order(const fault_tolerance *ft, long i, int *order)
{
    int n = 0;
    for (int b = 0; b < ft->dp.plan.count; b++) {
        if (b == 0 && fault_now(ft, FAULT_SKIP, i)) continue;  // one all-reduce skipped
        order[n++] = b;
    }
    if (fault_now(ft, FAULT_ORDER, i))
        for (int k = 0; k < n / 2; k++) {
            int swap = order[k];
            order[k] = order[n - 1 - k];
            order[n - 1 - k] = swap;
        }
    return n;
}

// The loss, then every layer's gradients, last layer first; with `overlap`, each bucket's
// all-reduce issued as soon as the layer that completes it is queued (lesson 12).
static void backward_pass(trainer *t, fault_tolerance *ft, long i, float *d_batch, int overlap)
{
    mlp_model *m = &t->model;
    cudaStream_t stream = t->compute_stream;
    int L = m->shape.layers, cols = t->opt.batch, b = 0;
    float *delta = m->d_delta[0], *prev = m->d_delta[1];
    test_delay(t, DELAY_COMPUTE, stream);
    mlp_loss(m, m->d_act[L], batch_targets(t, d_batch), delta, trainer_loss_slot(t, i), cols, cols, stream);
    for (int l = L; l >= 1; l--) {
        mlp_backward_layer(m, l, l == 1 ? batch_features(d_batch) : m->d_act[l - 1], delta, l > 1 ? prev : NULL, cols,
                           0, stream);
        float *swap = delta;
        delta = prev;
        prev = swap;
        if (overlap && l == ft->dp.plan.first_layer[b]) issue_bucket(t, ft, i, b++);
    }
}

// Batch i's step. A rank whose faults change its calls this batch issues them after the
// backward pass, in the order bucket_order says.
static void train_step(trainer *t, fault_tolerance *ft, long i, float *d_batch)
{
    int order[MAX_BUCKETS];
    int n = bucket_order(ft, i, order);
    int as_planned = n == ft->dp.plan.count && order[0] == 0 && order[n - 1] == n - 1;
    trainer_forward(t, d_batch, t->compute_stream);
    backward_pass(t, ft, i, d_batch, as_planned);
    if (!as_planned)
        for (int k = 0; k < n; k++) issue_bucket(t, ft, i, order[k]);
    for (int b = 0; b < ft->dp.plan.count; b++) {
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, ft->dp.reduced[b], 0));
        mlp_update(&ft->dp.averaged, ft->dp.plan.first[b], ft->dp.plan.floats[b], t->compute_stream);
    }
}

// ----------------------------------------------------------------------------
// the fingerprint check

// What each rank shows the others before batch i: the fingerprint of every call it made so
// far, and the calls it is about to make.
typedef struct {
    uint64_t hash;
    long long calls, collectives;
    int n, pad;
    flight_entry next[MAX_BUCKETS];
} fingerprint;

// Every rank's fingerprint through one small all-gather; where they differ, this rank stops
// with the first divergence in one line (every rank finds the same), before any rank issues a
// call that could hang.
static void fingerprint_check(fault_tolerance *ft, long i)
{
    dist_env *d = ft->dist;
    fingerprint mine;
    memset(&mine, 0, sizeof mine);
    mine.hash = ft->rec.hash;
    mine.calls = ft->rec.calls;
    mine.collectives = ft->rec.collectives;
    int order[MAX_BUCKETS];
    mine.n = bucket_order(ft, i, order);
    for (int k = 0; k < mine.n; k++) {
        flight_entry *e = &mine.next[k];
        int b = order[k];
        e->seq = mine.calls + 1 + k;  // after this check's own all-gather
        e->index = mine.collectives + 1 + k;
        e->op = FLIGHT_ALL_REDUCE;
        e->batch = i;
        e->part = b;
        e->count = (long long)ft->dp.plan.floats[b];
        e->bytes = e->count * (long long)sizeof(float);
        e->peer = -1;
        snprintf(e->stream, sizeof e->stream, "comm");
        e->fired = 1;  // not issued yet: nothing to wait for
    }
    fingerprint *all = (fingerprint *)host_calloc((size_t)d->world, sizeof(fingerprint), "the fingerprints");
    recorder_allgather(&ft->rec, d, i, &mine, all, sizeof mine, ft->dp.comm_stream, "comm");
    ft->fingerprint_checks++;
    char line[1024] = "";
    int differ = 0;
    for (int r = 1; r < d->world && !differ; r++)
        if (all[r].hash != all[0].hash || all[r].calls != all[0].calls) {
            snprintf(line, sizeof line,
                     "rank %d made %lld calls before batch %ld (fingerprint %016llx), rank 0 %lld "
                     "(%016llx): build/tools/flight-report names the first that differs",
                     r, all[r].calls, i, (unsigned long long)all[r].hash, all[0].calls,
                     (unsigned long long)all[0].hash);
            differ = 1;
        }
    if (!differ) {
        flight_ring *held = (flight_ring *)host_calloc((size_t)d->world, sizeof(flight_ring), "the fingerprints");
        flight_ring **ptrs = (flight_ring **)host_calloc((size_t)d->world, sizeof(flight_ring *), "the fingerprints");
        for (int r = 0; r < d->world; r++) {
            held[r].rank = r;
            held[r].world = d->world;
            held[r].n = all[r].n;
            held[r].entries = all[r].next;
            ptrs[r] = &held[r];
        }
        differ = flight_diverge(ptrs, d->world, line, sizeof line);
        free(ptrs);
        free(held);
    }
    free(all);
    if (differ) dist_fail(d, "fingerprint check before batch %ld: %s", i, line);
}

// ----------------------------------------------------------------------------
// the training loop (lesson 12's), from the resume point

// Batch i's loss is the mean of the ranks' shard losses: one all-reduce of the whole run's at
// its end (the losses of batches before the resume point come from the checkpoint).
static void average_losses(trainer *t, fault_tolerance *ft)
{
    size_t n = (size_t)t->opt.batches;
    for (size_t i = 0; i < n; i++) ft->dp.h_losses[i] = (float)t->run.losses[i];
    CUDA_CHECK(cudaMemcpyAsync(ft->dp.d_losses, ft->dp.h_losses, sizeof(float) * n, cudaMemcpyHostToDevice,
                               ft->dp.comm_stream));
    NCCL_CHECK(ft->dist, ncclAllReduce(ft->dp.d_losses, ft->dp.d_losses, n, ncclFloat, ncclSum, ft->dist->comm,
                                       ft->dp.comm_stream));
    recorder_record(&ft->rec, FLIGHT_ALL_REDUCE, t->opt.batches, -1, n, sizeof(float), -1, ft->dp.comm_stream, "comm");
    CUDA_CHECK(cudaMemcpyAsync(ft->dp.h_losses, ft->dp.d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost,
                               ft->dp.comm_stream));
    CUDA_CHECK(cudaEventRecord(ft->dp.losses_averaged, ft->dp.comm_stream));
    HOST_SYNC(t, dist_event_wait(ft->dist, ft->dp.losses_averaged));
    for (size_t i = 0; i < n; i++) t->run.losses[i] = ft->dp.h_losses[i] / (float)ft->dist->world;
}

int train_loop(trainer *t, fault_tolerance *ft)
{
    long next_loss = ft->ckpt.start;  // the losses before the resume point came with the checkpoint
    for (long i = ft->ckpt.start; i < t->opt.batches; i++) {
        if (ft->fingerprint_every > 0 && i % ft->fingerprint_every == 0) fingerprint_check(ft, i);
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        if (i >= ft->ckpt.start + SLOTS && event_pending(ft->dp.copied[s]))
            SLOT_WAIT(t, dist_event_wait(ft->dist, ft->dp.copied[s]));
        prepare_shard(t, ft, i, h_batch);
        if (i >= ft->ckpt.start + SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, ft->dp.stepped[s], 0));
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(ft->dp.copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, ft->dp.copied[s], 0));
        train_step(t, ft, i, d_batch);
        CUDA_CHECK(cudaEventRecord(ft->dp.stepped[s], t->compute_stream));
        loss_ring_queue(&ft->dp.losses, t, i, t->compute_stream);
        loss_ring_interval(&ft->dp.losses, t, i, SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
        // with --checkpoint-dir, a checkpoint after every --checkpoint-every batches, none after
        // the last: the run is done
        if (ft->ckpt.root && (i + 1) % ft->ckpt.every == 0 && i + 1 < t->opt.batches)
            checkpoint_save(t, ft, i, &next_loss);
    }
    average_losses(t, ft);
    return 0;
}
