// STUDENT VERSION of solutions/12_data_parallel_overlap/train.cu, made by `make lessons` (checksum 3507092492): fill in every TODO.
// 12_data_parallel_overlap: data-parallel training on any number of GPUs, the
// gradients averaged with NCCL while the backward pass is still running.
//
// build: make build/solutions/12_data_parallel_overlap      (where make finds NCCL: its first line says)
// run:   build/solutions/12_data_parallel_overlap [--batches 200] [--json]      one GPU, one rank
//        tools/launch -n 2 build/solutions/12_data_parallel_overlap [--bucket-mib 25]   two GPUs
//
// One process per GPU, each a rank (common/dist.h: the launcher's environment, the
// rendezvous, the communicator). Every rank holds the whole model. Batch i of --batch
// samples is cut into one shard per rank: rank r trains on samples [r*B/N, (r+1)*B/N).
// Before the update the ranks sum their gradients with ncclAllReduce (ncclSum) and
// each applies the mean (the rate divided by the ranks), so every rank applies the same
// update and the weights stay identical everywhere.
//
// The backward pass produces the gradients last layer first. The gradients are grouped
// into buckets of about --bucket-mib in that order; as soon as an event says a
// bucket's gradients are written, its all-reduce is issued on a communication stream
// and runs while the compute stream goes on with the layers below. Each bucket's
// update waits for its all-reduce's event. Every rank issues the buckets in the same
// order: NCCL pairs the ranks' collectives by the order they were issued in.
//
// Two variants run round-robin, every run checked bit for bit against a synchronous
// data-parallel reference: "buckets" (the overlap) and "none" (the same buckets, all
// reduced after the backward pass). --overlap chooses which one is the lesson's own.
// The host loop is lesson 08's: two batch slots, a loss ring read every 10 batches.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"     // defines: arg_spec, arg_int, arg_double, arg_string, arg_choice, args_parse, usage_error
#include "common/check.h"    // defines: CUDA_CHECK
#include "common/dist.h"     // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_connect,
                             //          dist_event_wait, NCCL_CHECK, dist_fail, dist_allgather, dist_finish
#include "common/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_report_to,
                             //          harness_finish
#include "common/json.h"     // defines: json_int, json_num, json_str, json_bool
#include "common/kernels.h"  // defines: launch_spin
#include "common/memory.h"   // defines: device_alloc, pinned_alloc, host_calloc and their frees
#include "common/timing.h"   // defines: host_now_ms, stats_of
#include "common/trace.h"    // defines: trace_begin, trace_end, trace_name_stream
#include "common/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                             //          trainer_init, trainer_forward, trainer_loss_slot, trainer_take_loss,
                             //          test_delay, event_pending, HOST_SYNC, SLOT_WAIT; and through
                             //          model.h, mlp.h and data.h: mlp_forward, mlp_loss, mlp_backward_layer,
                             //          mlp_update, mlp_weights_checksum, mlp_shape_init, mlp_cpu_reference,
                             //          dataset_prepare_shard, dataset_init, fnv1a

static const char *PROG = "12_data_parallel_overlap";

#define SHARD 512                   // samples per rank and batch, by default: --batch is 512 x ranks
#define SLOTS 2                     // host and device batch slots (lesson 08)
#define SYNC_INTERVAL 10            // batches between two reads of the losses (lesson 08)
#define LOSS_RING (SYNC_INTERVAL + 1)
#define MAX_BUCKETS MLP_MAX_LAYERS  // at most one bucket per layer
#define PART_REPS 5                 // repetitions of each part timed alone
#define QUEUE_AHEAD_NS 2000000LL    // 2 ms of spinning before timed work: the host queues it all meanwhile

typedef enum { OVERLAP_BUCKETS, OVERLAP_NONE } overlap_mode;

// Bucket b holds layers first_layer[b] to last_layer[b]; its gradients are floats
// [first[b], first[b] + floats[b]) of d_grads. Bucket 0 is the last layer's.
typedef struct {
    int count;
    int first_layer[MAX_BUCKETS], last_layer[MAX_BUCKETS];
    size_t first[MAX_BUCKETS], floats[MAX_BUCKETS];
} bucket_plan;

typedef struct {
    dist_env *dist;
    overlap_mode overlap;
    bucket_plan plan;
    cudaStream_t comm_stream;              // the all-reduces (high priority: they start as soon as they may)
    float *d_sum;                          // the gradients summed over the ranks: what the all-reduce writes
    mlp_model averaged;                    // the model as the update sees it: gradients d_sum, rate lr / ranks
    cudaEvent_t copied[SLOTS];             // slot s's copy has finished (lesson 08)
    cudaEvent_t stepped[SLOTS];            // the step that read device slot s has finished (lesson 08)
    cudaEvent_t loss_ready[LOSS_RING];     // that loss has landed in pinned memory (lesson 08)
    cudaEvent_t grads_ready[MAX_BUCKETS];  // bucket b's gradients are written (compute stream)
    cudaEvent_t reduced[MAX_BUCKETS];      // bucket b's all-reduce has finished (communication stream)
    cudaEvent_t ref_done;                  // the reference's batch has finished
    cudaEvent_t losses_averaged;           // the run's losses are averaged and back on the host
    float *h_losses, *d_losses;            // the run's losses, on their way through the all-reduce
    int fail_rank, fail_at_batch;          // --fail-rank, --fail-at-batch (-1: never)
} data_parallel;

typedef struct {
    double forward_ms, backward_ms, update_ms;  // the compute stream alone, one step
    double comm_ms;                             // every bucket's all-reduce, back to back, nothing else running
    double comm_one_ms;                         // the whole gradient in one all-reduce
} part_times;

// ----------------------------------------------------------------------------
// the buckets

// Groups the layers into buckets in the order the backward pass finishes them, the
// last layer first. A bucket closes once it holds at least `bytes` of gradients (the
// first layer's may hold less). Layer l's parameters are W_l then b_l, and the layers
// lie in increasing order in d_grads (mlp_shape_init), so a bucket of layers
// first..last is one range: from W_first to the end of b_last.
static void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p)
{
    memset(p, 0, sizeof *p);
    // TODO(12-bucket-plan): walk down from the last layer; a bucket closes at the layer where its range of parameters (from that layer's W to its top layer's b: s->w_off, s->b_off, s->dims) reaches `bytes`, or at layer 1; fill first_layer, last_layer, first, floats, count
    (void)s, (void)bytes;
}

// Every parameter in exactly one bucket, the buckets in the order the backward pass
// finishes the layers: the program checks the plan before training with it.
static int plan_is_sound(const mlp_shape *s, const bucket_plan *p, char *why, size_t size)
{
    if (p->count < 1 || p->count > MAX_BUCKETS) {
        snprintf(why, size, "%d buckets for %d layers", p->count, s->layers);
        return 0;
    }
    int next = s->layers;      // the layer the backward pass finishes next
    size_t end = s->nparams;  // where that layer's parameters end
    for (int b = 0; b < p->count; b++) {
        int first = p->first_layer[b], last = p->last_layer[b];
        if (last != next || first < 1 || first > last) {
            snprintf(why, size, "bucket %d holds layers %d to %d; the backward pass finishes layer %d next", b,
                     first, last, next);
            return 0;
        }
        if (p->first[b] != s->w_off[first] || p->first[b] + p->floats[b] != end) {
            snprintf(why, size, "bucket %d is parameters [%zu, %zu); layers %d to %d are [%zu, %zu)", b, p->first[b],
                     p->first[b] + p->floats[b], first, last, s->w_off[first], end);
            return 0;
        }
        next = first - 1;
        end = p->first[b];
    }
    if (next != 0) {
        snprintf(why, size, "the buckets stop at layer %d: the layers below it are never averaged", next + 1);
        return 0;
    }
    return 1;
}

// "4-3|2|1": the layers of each bucket, in the order they are issued.
static void plan_text(const bucket_plan *p, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int b = 0; b < p->count && n < size; b++) {
        if (p->first_layer[b] == p->last_layer[b])
            n += (size_t)snprintf(out + n, size - n, "%s%d", b ? "|" : "", p->last_layer[b]);
        else
            n += (size_t)snprintf(out + n, size - n, "%s%d-%d", b ? "|" : "", p->last_layer[b], p->first_layer[b]);
    }
}

// ----------------------------------------------------------------------------
// the rank's shard

// Host work: this rank's samples [rank * shard, (rank + 1) * shard) of batch i, the
// same bits as those columns of lesson 06's whole batch (a prep range on the timeline).
static void prepare_shard(trainer *t, const data_parallel *e, long i, float *h_batch)
{
    int shard = t->opt.batch;  // the trainer was built for one shard
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, e->dist->rank * shard, shard, h_batch);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;  // only the main thread prepares here: no lock needed
    t->run.main_prep_ms += ms;
}

// ----------------------------------------------------------------------------
// the step

// Issues bucket b's all-reduce on the communication stream, after its gradients.
static void issue_bucket(trainer *t, data_parallel *e, int b)
{
    // TODO(12-ready): the all-reduce must not read the bucket's gradients before the backward pass has written them: mark that point on the compute stream with grads_ready[b], and make the communication stream (not the host) wait for it
    test_delay(t, DELAY_COPY, e->comm_stream);  // the test hook holds communication back with the copies
    // TODO(12-allreduce): sum the bucket's range of t->model.d_grads over the ranks into the same range of e->d_sum: ncclAllReduce (ncclFloat, ncclSum, e->dist->comm) on the communication stream, inside NCCL_CHECK(e->dist, ...); then record reduced[b] on that stream
    (void)b;
}

// The loss of batch i into its ring slot, then every layer's gradients, last layer
// first, on `stream` (mlp_backward without its update). With issue_buckets, each
// bucket's all-reduce is issued as soon as the layer that completes it is queued.
static void backward_pass(trainer *t, data_parallel *e, long i, float *d_batch, cudaStream_t stream,
                          int issue_buckets)
{
    mlp_model *m = &t->model;
    int L = m->shape.layers, cols = t->opt.batch, b = 0;
    float *delta = m->d_delta[0], *prev = m->d_delta[1];
    test_delay(t, DELAY_COMPUTE, stream);
    // the mean is over this rank's shard; the update then takes the mean of the ranks' means
    mlp_loss(m, m->d_act[L], batch_targets(t, d_batch), delta, trainer_loss_slot(t, i), cols, cols, stream);
    for (int l = L; l >= 1; l--) {
        mlp_backward_layer(m, l, l == 1 ? batch_features(d_batch) : m->d_act[l - 1], delta, l > 1 ? prev : NULL,
                           cols, 0, stream);
        float *swap = delta;
        delta = prev;
        prev = swap;
        if (issue_buckets && l == e->plan.first_layer[b]) issue_bucket(t, e, b++);  // layer l completes bucket b
    }
}

// Batch i's step: forward and backward on the compute stream, the all-reduces on the
// communication stream (each as soon as its bucket is ready, or all after the backward
// pass), then each bucket's update.
static void train_step(trainer *t, data_parallel *e, long i, float *d_batch)
{
    cudaStream_t compute = t->compute_stream;
    trainer_forward(t, d_batch, compute);
    backward_pass(t, e, i, d_batch, compute, e->overlap == OVERLAP_BUCKETS);
    if (e->overlap == OVERLAP_NONE)
        for (int b = 0; b < e->plan.count; b++) issue_bucket(t, e, b);
    for (int b = 0; b < e->plan.count; b++) {
        // TODO(12-update-wait): the update of bucket b reads its range of e->d_sum, which its all-reduce writes on the other stream: make the compute stream wait for that all-reduce first
        mlp_update(&e->averaged, e->plan.first[b], e->plan.floats[b], compute);
    }
}

// ----------------------------------------------------------------------------
// the training loop (lesson 08's, with polled waits)

// Lesson 08's interval: at the end of every SYNC_INTERVAL batches one counted wait for
// the loss of batch i-1 (batch i's after the last batch), then every loss up to it.
// Every host wait here is dist_event_wait: it gives up when another rank has failed.
static void take_losses(trainer *t, data_parallel *e, long i, long *next_loss)
{
    int last = i == t->opt.batches - 1;
    if ((i + 1) % SYNC_INTERVAL != 0 && !last) return;
    long upto = last ? i : i - 1;
    if (upto < *next_loss) return;
    HOST_SYNC(t, dist_event_wait(e->dist, e->loss_ready[upto % LOSS_RING]));
    for (; *next_loss <= upto; (*next_loss)++) {
        cudaEvent_t landed = e->loss_ready[*next_loss % LOSS_RING];
        if (event_pending(landed)) SLOT_WAIT(t, dist_event_wait(e->dist, landed));
        trainer_take_loss(t, *next_loss);
    }
}

// Each rank took its own shard's losses; batch i's loss is their mean over the ranks
// (the shards are equal). One all-reduce of the whole run's losses at its end, not
// one per batch: a collective costs tens of microseconds.
static void average_losses(trainer *t, data_parallel *e)
{
    size_t n = (size_t)t->opt.batches;
    for (size_t i = 0; i < n; i++) e->h_losses[i] = (float)t->run.losses[i];
    CUDA_CHECK(cudaMemcpyAsync(e->d_losses, e->h_losses, sizeof(float) * n, cudaMemcpyHostToDevice, e->comm_stream));
    NCCL_CHECK(e->dist, ncclAllReduce(e->d_losses, e->d_losses, n, ncclFloat, ncclSum, e->dist->comm, e->comm_stream));
    CUDA_CHECK(cudaMemcpyAsync(e->h_losses, e->d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost, e->comm_stream));
    CUDA_CHECK(cudaEventRecord(e->losses_averaged, e->comm_stream));
    HOST_SYNC(t, dist_event_wait(e->dist, e->losses_averaged));
    for (size_t i = 0; i < n; i++) t->run.losses[i] = e->h_losses[i] / (float)e->dist->world;
}

static int train_loop(trainer *t, void *ctx)
{
    data_parallel *e = (data_parallel *)ctx;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        if (e->dist->rank == e->fail_rank && i == e->fail_at_batch)
            dist_fail(e->dist, "stopping at batch %ld as asked (--fail-rank %d --fail-at-batch %d)", i, e->fail_rank,
                      e->fail_at_batch);
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        if (i >= SLOTS && event_pending(e->copied[s])) SLOT_WAIT(t, dist_event_wait(e->dist, e->copied[s]));
        prepare_shard(t, e, i, h_batch);
        if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, e->stepped[s], 0));
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(e->copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, e->copied[s], 0));
        train_step(t, e, i, d_batch);
        CUDA_CHECK(cudaEventRecord(e->stepped[s], t->compute_stream));
        int slot = (int)(i % LOSS_RING);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[slot], trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost,
                                   t->compute_stream));
        CUDA_CHECK(cudaEventRecord(e->loss_ready[slot], t->compute_stream));
        take_losses(t, e, i, &next_loss);
    }
    average_losses(t, e);  // the last loss's copy came after the last update: the GPU is done
    return 0;
}

// ----------------------------------------------------------------------------
// the reference

// What every run must match: the same data-parallel training with the host waiting
// for every batch, everything on the compute stream (NCCL's calls too), the same
// buckets in the same order (so, on any number of ranks, the same sums in the same
// order). The harness runs it once, first.
static int reference_loop(trainer *t, void *ctx)
{
    data_parallel *e = (data_parallel *)ctx;
    cudaStream_t s = t->compute_stream;
    const bucket_plan *p = &e->plan;
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    for (long i = 0; i < t->opt.batches; i++) {
        prepare_shard(t, e, i, h_batch);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        backward_pass(t, e, i, d_batch, s, 0);
        for (int b = 0; b < p->count; b++)
            NCCL_CHECK(e->dist, ncclAllReduce(t->model.d_grads + p->first[b], e->d_sum + p->first[b], p->floats[b],
                                              ncclFloat, ncclSum, e->dist->comm, s));
        for (int b = 0; b < p->count; b++) mlp_update(&e->averaged, p->first[b], p->floats[b], s);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaEventRecord(e->ref_done, s));
        CUDA_CHECK(dist_event_wait(e->dist, e->ref_done));
        trainer_take_loss(t, i);
    }
    average_losses(t, e);
    return 0;
}

// ----------------------------------------------------------------------------
// each part alone: what the figures are made of

// The ranks line up on a one-float all-reduce; then `stream` spins for 2 ms, long
// enough for the host to queue everything that follows: the time measured after the
// spin is the GPU's work, not the host's issuing (NCCL issues each call from a thread).
static void line_up(data_parallel *e, cudaStream_t stream)
{
    NCCL_CHECK(e->dist, ncclAllReduce(e->d_losses, e->d_losses, 1, ncclFloat, ncclSum, e->dist->comm, e->comm_stream));
    CUDA_CHECK(cudaEventRecord(e->losses_averaged, e->comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(stream, e->losses_averaged, 0));
    launch_spin(1, 32, QUEUE_AHEAD_NS, stream);
}

static double between_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

static void profile_parts(trainer *t, data_parallel *e, part_times *p)
{
    cudaStream_t s = t->compute_stream, c = e->comm_stream;
    const bucket_plan *plan = &e->plan;
    float *d_batch = t->d_batch[0];
    double fwd[PART_REPS], bwd[PART_REPS], upd[PART_REPS], comm[PART_REPS], one[PART_REPS];
    cudaEvent_t ev[4];
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventCreate(&ev[k]));
    prepare_shard(t, e, 0, t->h_batch[0]);
    CUDA_CHECK(cudaMemcpyAsync(d_batch, t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice, s));
    for (int k = -1; k < PART_REPS; k++) {  // k = -1 is a warm-up: NCCL connects on first use
        line_up(e, s);
        CUDA_CHECK(cudaEventRecord(ev[0], s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        CUDA_CHECK(cudaEventRecord(ev[1], s));
        backward_pass(t, e, 0, d_batch, s, 0);
        CUDA_CHECK(cudaEventRecord(ev[2], s));
        for (int b = 0; b < plan->count; b++) mlp_update(&e->averaged, plan->first[b], plan->floats[b], s);
        CUDA_CHECK(cudaEventRecord(ev[3], s));
        CUDA_CHECK(dist_event_wait(e->dist, ev[3]));
        if (k >= 0) {
            fwd[k] = between_ms(ev[0], ev[1]);
            bwd[k] = between_ms(ev[1], ev[2]);
            upd[k] = between_ms(ev[2], ev[3]);
        }
        line_up(e, c);
        CUDA_CHECK(cudaEventRecord(ev[0], c));
        for (int b = 0; b < plan->count; b++)
            NCCL_CHECK(e->dist, ncclAllReduce(t->model.d_grads + plan->first[b], e->d_sum + plan->first[b],
                                              plan->floats[b], ncclFloat, ncclSum, e->dist->comm, c));
        CUDA_CHECK(cudaEventRecord(ev[1], c));
        line_up(e, c);
        CUDA_CHECK(cudaEventRecord(ev[2], c));
        NCCL_CHECK(e->dist, ncclAllReduce(t->model.d_grads, e->d_sum, t->model.shape.nparams, ncclFloat, ncclSum,
                                          e->dist->comm, c));
        CUDA_CHECK(cudaEventRecord(ev[3], c));
        CUDA_CHECK(dist_event_wait(e->dist, ev[3]));
        if (k >= 0) {
            comm[k] = between_ms(ev[0], ev[1]);
            one[k] = between_ms(ev[2], ev[3]);
        }
    }
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventDestroy(ev[k]));
    p->forward_ms = stats_of(fwd, PART_REPS).median;
    p->backward_ms = stats_of(bwd, PART_REPS).median;
    p->update_ms = stats_of(upd, PART_REPS).median;
    p->comm_ms = stats_of(comm, PART_REPS).median;
    p->comm_one_ms = stats_of(one, PART_REPS).median;
}

// ----------------------------------------------------------------------------
// the checks across ranks, and the report

static uint64_t losses_checksum(const trainer *t)
{
    uint64_t h = FNV1A_START;
    for (int i = 0; i < t->opt.batches; i++) {
        float f = (float)t->run.losses[i];
        h = fnv1a(&f, sizeof f, h);
    }
    return h;
}

// Every rank must end with the same weights and losses, bit for bit: they applied the
// same averaged updates. Rank 0 reports every rank's verdict. Returns 1 when the ranks
// agree and every rank's own checks passed.
static int ranks_agree(trainer *t, data_parallel *e, int ok, FILE *out)
{
    dist_env *d = e->dist;
    uint64_t mine[3] = {mlp_weights_checksum(&t->model, t->compute_stream), losses_checksum(t), (uint64_t)ok};
    uint64_t *all = (uint64_t *)host_calloc((size_t)d->world * 3, sizeof(uint64_t), "every rank's verdict");
    dist_allgather(d, mine, all, sizeof mine, t->compute_stream);
    int same = 1, passed = 1;
    char sums[1024] = "";
    size_t n = 0;
    for (int r = 0; r < d->world; r++) {
        same = same && all[3 * r] == all[0] && all[3 * r + 1] == all[1];
        passed = passed && all[3 * r + 2] == 1;
        if (n < sizeof sums)
            n += (size_t)snprintf(sums + n, sizeof sums - n, "%s%016llx", r ? "," : "", (unsigned long long)all[3 * r]);
    }
    if (out) {
        fprintf(out, "ranks: %d; final weights and losses identical on every rank: %s\n", d->world, same ? "yes" : "NO");
        for (int r = 0; r < d->world; r++)
            if (all[3 * r + 2] != 1) fprintf(out, "  rank %d: its own checks FAILED\n", r);
    }
    if (t->opt.json) {
        json_bool(&t->js, "ranks_identical", same);
        json_bool(&t->js, "ranks_verified", passed);
        json_str(&t->js, "weights_checksums", sums);
    }
    free(all);
    return same && passed;
}

// The figures the lesson is about, from the parts alone and the two variants' steps.
static void report(trainer *t, const data_parallel *e, const part_times *p, const harness_extras *x,
                   overlap_mode first, int global_batch, double bucket_mib, FILE *out)
{
    int n = e->dist->world;
    double bytes = sizeof(float) * (double)t->model.shape.nparams;
    double factor = 2.0 * (n - 1) / n;  // nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n
    double algbw = bytes / (p->comm_ms * 1e6), one_algbw = bytes / (p->comm_one_ms * 1e6);
    double t_buckets = x->step_ms[first == OVERLAP_BUCKETS ? 0 : 1], t_none = x->step_ms[first == OVERLAP_NONE ? 0 : 1];
    double hideable = p->comm_ms < p->backward_ms ? p->comm_ms : p->backward_ms;
    double hidden = (t_none - t_buckets) / hideable;
    char plan[128], version[32];
    plan_text(&e->plan, plan, sizeof plan);
    dist_nccl_version(version, sizeof version);
    if (out) {
        fprintf(out, "data parallel: %d rank%s (launcher: %s, NCCL %s), %d samples per batch, %d per rank\n", n,
                n == 1 ? "" : "s", dist_launcher_name(e->dist->launcher), version, global_batch, t->opt.batch);
        fprintf(out, "  gradients: %.1f MB per step in %d buckets of about %g MiB (layers %s, issued in that order)\n",
                bytes / 1e6, e->plan.count, bucket_mib, plan);
        fprintf(out, "  alone (median of %d): forward %.3f ms, backward %.3f ms, update %.3f ms\n", PART_REPS,
                p->forward_ms, p->backward_ms, p->update_ms);
        fprintf(out, "  all-reduce alone: the buckets back to back %.3f ms (bus bandwidth %.0f GB/s), "
                     "the whole gradient at once %.3f ms (%.0f GB/s)\n",
                p->comm_ms, algbw * factor, p->comm_one_ms, one_algbw * factor);
        fprintf(out, "  step: buckets %.3f ms, none %.3f ms: %.3f ms saved, %.0f%% of min(all-reduce, backward) hidden\n",
                t_buckets, t_none, t_none - t_buckets, 100 * hidden);
        fprintf(out, "  throughput: %.0f samples/s overlapped, %.0f without overlap\n", global_batch / t_buckets * 1e3,
                global_batch / t_none * 1e3);
    }
    if (!t->opt.json) return;
    json_writer *js = &t->js;
    json_int(js, "world_size", n);
    json_str(js, "launcher", dist_launcher_name(e->dist->launcher));
    json_str(js, "nccl_version", version);
    json_int(js, "global_batch", global_batch);
    json_int(js, "shard_batch", t->opt.batch);
    json_str(js, "overlap", first == OVERLAP_BUCKETS ? "buckets" : "none");
    json_num(js, "bucket_mib", bucket_mib);
    json_int(js, "buckets", e->plan.count);
    json_str(js, "bucket_plan", plan);
    json_int(js, "grad_bytes", (long long)bytes);
    json_num(js, "forward_ms", p->forward_ms);
    json_num(js, "backward_ms", p->backward_ms);
    json_num(js, "update_ms", p->update_ms);
    json_num(js, "comm_ms", p->comm_ms);
    json_num(js, "comm_algbw_gbs", algbw);
    json_num(js, "comm_busbw_gbs", algbw * factor);
    json_num(js, "comm_one_ms", p->comm_one_ms);
    json_num(js, "comm_one_busbw_gbs", one_algbw * factor);
    json_num(js, "saved_ms", t_none - t_buckets);
    json_num(js, "comm_hidden_share", hidden);
    json_num(js, "buckets_samples_per_s", global_batch / t_buckets * 1e3);
    json_num(js, "none_samples_per_s", global_batch / t_none * 1e3);
    json_num(js, "timeout_s", e->dist->timeout_s);
}

// With several ranks the harness's CPU check would see one shard: rank 0 compares the
// averaged losses with the CPU trained on the whole batch. Returns 1 when within 1e-4.
static int cpu_check_whole_batch(trainer *t, const train_options *o, FILE *out)
{
    mlp_shape shape;
    mlp_shape_init(&shape, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    dataset data;
    dataset_init(&data, o->batch, o->in_dim, o->out_dim, o->prep_work, (uint64_t)o->seed);
    double *cpu = (double *)host_calloc((size_t)o->batches, sizeof(double), "the CPU reference's losses");
    mlp_cpu_reference(&shape, (float)o->lr, (uint64_t)o->seed, &data, o->batches, cpu);
    double worst = 0;
    for (int i = 0; i < o->batches; i++) {
        double rel = (t->run.losses[i] - cpu[i]) / cpu[i];
        if (rel < 0) rel = -rel;
        if (!(rel <= worst)) worst = rel;  // NaN-safe
    }
    free(cpu);
    dataset_free(&data);
    if (out)
        fprintf(out, "  CPU reference (the whole batch): largest relative difference %.2e (%s 1e-04)\n", worst,
                worst <= 1e-4 ? "within" : "NOT within");
    if (t->opt.json) json_num(&t->js, "cpu_check_max_rel", worst);
    return worst <= 1e-4;
}

// ----------------------------------------------------------------------------

static void setup(trainer *t, data_parallel *e, double bucket_mib)
{
    char why[256];
    plan_buckets(&t->model.shape, (size_t)(bucket_mib * 1048576.0), &e->plan);
    if (!plan_is_sound(&t->model.shape, &e->plan, why, sizeof why)) {
        fprintf(stderr, "%s: the bucket plan is wrong: %s (exercise 12-bucket-plan)\n", e->dist->name, why);
        exit(EXIT_FAILURE);
    }
    CUDA_CHECK(cudaStreamCreateWithPriority(&e->comm_stream, cudaStreamNonBlocking, t->dev.priority_greatest));
    trace_name_stream(e->comm_stream, "comm");
    e->d_sum = (float *)device_alloc(sizeof(float) * t->model.shape.nparams);
    CUDA_CHECK(cudaMemset(e->d_sum, 0, sizeof(float) * t->model.shape.nparams));
    // The update applies the mean gradient: lr x (sum / ranks) = (lr / ranks) x sum, the
    // division folded into the rate. With one rank, lr / 1 is lr: lesson 06's update, bit
    // for bit. (ncclAvg would divide in NCCL; NCCL 2.28.3 on one rank, out of place, left
    // the last count % 16 elements of a large average unwritten: notes/12, measured.)
    e->averaged = t->model;  // a copy that shares every buffer, but for its gradients and rate
    e->averaged.d_grads = e->d_sum;
    e->averaged.lr = t->model.lr / (float)e->dist->world;
    e->h_losses = (float *)pinned_alloc(sizeof(float) * (size_t)t->opt.batches);
    e->d_losses = (float *)device_alloc(sizeof(float) * (size_t)t->opt.batches);
    CUDA_CHECK(cudaMemset(e->d_losses, 0, sizeof(float) * (size_t)t->opt.batches));  // line_up sums its first float
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&e->copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&e->stepped[s], cudaEventDisableTiming));
    }
    for (int k = 0; k < LOSS_RING; k++) CUDA_CHECK(cudaEventCreateWithFlags(&e->loss_ready[k], cudaEventDisableTiming));
    for (int b = 0; b < MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&e->grads_ready[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&e->reduced[b], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&e->ref_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&e->losses_averaged, cudaEventDisableTiming));
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void teardown(data_parallel *e)
{
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(e->copied[s]));
        CUDA_CHECK(cudaEventDestroy(e->stepped[s]));
    }
    for (int k = 0; k < LOSS_RING; k++) CUDA_CHECK(cudaEventDestroy(e->loss_ready[k]));
    for (int b = 0; b < MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventDestroy(e->grads_ready[b]));
        CUDA_CHECK(cudaEventDestroy(e->reduced[b]));
    }
    CUDA_CHECK(cudaEventDestroy(e->ref_done));
    CUDA_CHECK(cudaEventDestroy(e->losses_averaged));
    device_free(e->d_sum);
    device_free(e->d_losses);
    pinned_free(e->h_losses);
    CUDA_CHECK(cudaStreamDestroy(e->comm_stream));
}

// Options that depend on each other or on the number of ranks.
static void check_options(const dist_env *d, const train_options *o, const data_parallel *e)
{
    if (o->batch % d->world != 0)
        usage_error(d->name, "--batch %d is not divisible by the %d ranks: every rank trains on an equal shard", o->batch,
                    d->world);
    if ((e->fail_rank >= 0) != (e->fail_at_batch >= 0))
        usage_error(d->name, "--fail-rank and --fail-at-batch go together: which rank stops, and at which batch");
    if (e->fail_rank >= d->world)
        usage_error(d->name, "--fail-rank %d: there are %d ranks (0 to %d)", e->fail_rank, d->world, d->world - 1);
    if (e->fail_at_batch >= o->batches)
        usage_error(d->name, "--fail-at-batch %d: the run has %d batches", e->fail_at_batch, o->batches);
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    train_options o;
    train_options_default(&o);
    o.batch = SHARD * d.world;
    data_parallel e = {.dist = &d, .overlap = OVERLAP_BUCKETS, .fail_rank = -1, .fail_at_batch = -1};
    int first = OVERLAP_BUCKETS;
    double bucket_mib = 25, timeout_s = DIST_TIMEOUT_S;
    const char *rendezvous = NULL;
    arg_spec specs[40];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_choice("overlap", &first, "buckets|none",
                            "the lesson's own variant (both run, round-robin): all-reduce each bucket under the "
                            "backward pass, or every bucket after it");
    specs[n++] = arg_double("bucket-mib", &bucket_mib, 0.001, 4096, "MIB", "gradients per all-reduce, about");
    specs[n++] = arg_string("rendezvous", &rendezvous, "DIR",
                            "the folder every rank sees, where rank 0 leaves NCCL's id (default: $RENDEZVOUS_DIR)");
    specs[n++] = arg_double("timeout-s", &timeout_s, 1, 3600, "S", "give up waiting for another rank after this long");
    specs[n++] = arg_int("fail-rank", &e.fail_rank, 0, 65535, "R", "with --fail-at-batch: this rank stops with an error");
    specs[n++] = arg_int("fail-at-batch", &e.fail_at_batch, 0, 1000000, "N", "with --fail-rank: ... at this batch");
    args_parse(argc, argv, d.name, "Train an MLP on every GPU, averaging gradients with NCCL under the backward pass.",
               specs, n);
    dist_configure(&d, rendezvous, timeout_s);
    check_options(&d, &o, &e);

    train_options shard = o;  // what this rank's trainer is built for: one shard of every batch
    shard.batch = o.batch / d.world;
    shard.json = o.json && d.rank == 0;  // rank 0 writes the JSON, with every rank's checksums in it
    shard.check_cpu = o.check_cpu && d.world == 1;  // several ranks: rank 0 checks the whole batch below
    char trace_path[1100];
    if (o.trace_path) {
        dist_rank_path(&d, o.trace_path, trace_path, sizeof trace_path);
        shard.trace_path = trace_path;
    }
    FILE *out = o.json ? stderr : stdout;  // rank 0 reports for every rank
    if (d.rank > 0) {
        out = NULL;
        FILE *quiet = fopen("/dev/null", "w");
        if (!quiet) {
            fprintf(stderr, "%s: cannot open /dev/null\n", d.name);
            return EXIT_FAILURE;
        }
        harness_report_to(quiet);
    }
    dist_select_device(&d);
    trainer t;
    trainer_init(&t, d.name, &shard, SLOTS, SLOTS, LOSS_RING);
    dist_connect(&d);
    setup(&t, &e, bucket_mib);

    part_times parts;
    profile_parts(&t, &e, &parts);
    data_parallel none = e;  // the same streams, buffers and events; every bucket after the backward pass
    none.overlap = OVERLAP_NONE;
    train_variant buckets_v = {"buckets", train_loop, &e}, none_v = {"none", train_loop, &none};
    train_variant variants[2] = {first == OVERLAP_BUCKETS ? buckets_v : none_v,
                                 first == OVERLAP_BUCKETS ? none_v : buckets_v};
    train_variant reference = {"reference", reference_loop, &e};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = harness_run_with(&t, variants, 2, &x);
    ok = ranks_agree(&t, &e, ok, out);
    if (x.step_ms[0] > 0) report(&t, &e, &parts, &x, (overlap_mode)first, o.batch, bucket_mib, out);
    teardown(&e);
    dist_finish(&d);
    if (o.check_cpu && d.world > 1 && d.rank == 0) ok = cpu_check_whole_batch(&t, &o, out) && ok;
    return harness_finish(&t, ok);
}
