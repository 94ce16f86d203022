// 13_pipeline_parallel: the MLP's layers cut into stages, one GPU each, and every batch
// cut into micro-batches that flow through the stages: GPipe and 1F1B.
//
// build: make build/solutions/13_pipeline_parallel      (where make finds NCCL: its first line says)
// run:   build/solutions/13_pipeline_parallel [--micro-batches 8] [--json]       one GPU: one stage
//        tools/launch -n 2 build/solutions/13_pipeline_parallel [--schedule gpipe]   two GPUs, two stages
//        build/solutions/13_pipeline_parallel --show-schedule --stages 4       every stage's order, no GPU
//
// One process per GPU, each a rank (common/dist.h, as in lesson 12) and a stage: stage s
// of p holds a contiguous range of the layers. Each batch of --batch samples is cut into
// --micro-batches M micro-batches. The first stage copies a micro-batch's features in and
// runs its layers; the activation it produces goes to the next stage (ncclSend, ncclRecv),
// and so on up to the last stage, which also copies in the targets and computes the
// micro-batch's share of the loss. Its error comes back down the same way. Every stage
// adds each micro-batch's gradients to its layers' gradients, in micro-batch order, and
// after the batch's last backward pass updates its layers.
//
// Two schedules run round-robin, every run checked bit for bit against the one-stage
// reference (the same micro-batched step on one GPU, which every rank computes itself):
//   1f1b   warm-up forwards, then one forward and one backward in turn, then the last
//          backwards (PipeDream-flush, Megatron-LM): a stage holds at most p micro-batches;
//   gpipe  every forward, then every backward: a stage holds all M micro-batches.
// Activations go forward on one communicator and one stream, errors back on another: on
// each, a stage receives from one neighbour and sends to the other in micro-batch order,
// so that every pair of neighbours issues its calls in the same order (notes/13).
// Every hand-over is ordered by events; the host waits only to stay two batches ahead.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"     // defines: arg_spec, arg_int, arg_double, arg_string, arg_choice, arg_flag, args_parse,
                             //          usage_error
#include "common/check.h"    // defines: CUDA_CHECK, EXERCISE_HELPER
#include "common/dist.h"     // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_connect,
                             //          dist_event_wait, NCCL_CHECK, dist_fail, dist_allgather, dist_finish,
                             //          dist_rank_path, dist_nccl_version, dist_launcher_name
#include "common/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_report_to,
                             //          harness_finish
#include "common/json.h"     // defines: json_int, json_num, json_str, json_bool
#include "common/kernels.h"  // defines: launch_spin
#include "common/memory.h"   // defines: device_alloc, pinned_alloc, host_calloc and their frees
#include "common/timing.h"   // defines: host_now_ms, stats_of
#include "common/trace.h"    // defines: trace_begin, trace_end, trace_name_stream
#include "common/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                             //          trainer_init, trainer_take_loss, test_delay, event_pending, HOST_SYNC,
                             //          SLOT_WAIT; and through model.h, mlp.h and data.h: mlp_forward_layer,
                             //          mlp_loss, mlp_backward_layer, mlp_update, dataset_prepare_shard, fnv1a

static const char *PROG = "13_pipeline_parallel";

#define HOST_SLOTS 2          // pinned batches, each cut into M micro-batch regions (lesson 08's two slots)
#define STEP_RING 3           // batch i's step event and partial losses live in slot i % 3: the host waits
                              // for batch i-2 at the top of batch i, so three batches are in flight at most
#define PART_REPS 5           // repetitions of each part timed alone
#define QUEUE_AHEAD_NS 2000000LL  // 2 ms of spinning before timed work: the host queues it all meanwhile
#define ALIGN_FLOATS 64       // every buffer in a slot starts on 256 bytes, as cudaMalloc's do: cuBLAS may
                              // choose its kernel by the alignment of its pointers, and so the bits

typedef enum { SCHEDULE_1F1B, SCHEDULE_GPIPE } schedule_kind;  // --schedule's words, in this order
static const char *const SCHEDULE_NAMES[] = {"1f1b", "gpipe"};

// What crosses between two stages, counted per micro-batch.
typedef enum { ACT_SENT, ACT_RECEIVED, ERROR_SENT, ERROR_RECEIVED, CROSSING_KINDS } crossing;

// Where stage `rank` of `stages` stands: its layers, and the layout of one activation slot:
// off[0] the stage's input (the features on the first stage), off[k] the output of its k-th
// layer, off[layers + 1] the targets (last stage only). In floats, for one micro-batch.
typedef struct {
    int rank, stages;
    int first_layer, last_layer, layers;
    int micro_batches, cols, batch;  // M, samples per micro-batch, samples per batch
    size_t off[MLP_MAX_LAYERS + 2];
    size_t slot_floats;
    int in_dim, out_dim;
} stage_shape;

// One micro-batch's activations on this stage, and the events that order their hand-overs.
typedef struct {
    float *d_act;
    cudaEvent_t copied;     // copy stream: the features (first stage) or targets (last) have landed
    cudaEvent_t received;   // forward link: the previous stage's activation has landed in the input
    cudaEvent_t forwarded;  // compute: the forward pass has written the stage's output
    cudaEvent_t sent;       // forward link: the send has read the output
    cudaEvent_t freed;      // compute: the backward pass that read the slot has finished
    int micro_batch;        // the micro-batch it holds, -1 when free
} act_slot;

// The slots of one schedule. It allocates a slot only when a forward needs one and every
// slot it has holds a micro-batch whose backward has not been issued yet: what it allocated
// is what the schedule needed at most, measured, not assumed.
typedef struct {
    act_slot *slots;
    int allocated, capacity;  // capacity M: a batch never has more micro-batches alive
    int in_use, peak;
} slot_pool;

// A link between neighbouring stages: a communicator and a stream of its own, one per
// direction. NCCL runs the calls of one communicator one after another on a GPU, whatever
// their streams; two communicators let activations go up while errors come down.
typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
} p2p_link;

typedef struct {
    p2p_link fwd, bwd;  // activations to the next stage, errors to the previous one
} link_pair;

typedef struct {
    dist_env *dist;
    stage_shape st, whole;              // this rank's stage; one stage of every layer (the reference)
    link_pair *ln;                          // NULL with one stage
    float *d_error_in[2];               // the error of the stage's output, from the next stage (ping-pong)
    float *d_error_out[2];              // the error of the stage's input, for the previous stage
    cudaEvent_t error_received[2], error_read[2], error_ready[2], error_sent[2];
    cudaEvent_t *host_copied;           // [HOST_SLOTS * M]: that pinned micro-batch region has been copied
    float *d_parts, *h_parts;           // [STEP_RING * M]: each micro-batch's share of the batch's loss
    cudaEvent_t step_done[STEP_RING];   // batch i's update (and its losses' copy) has finished
    cudaEvent_t links_idle[2];          // the last hand-overs of a run have finished (forward, backward)
    float *d_losses, *h_losses;         // the run's losses, broadcast from the last stage
    cudaEvent_t losses_landed;
    float *d_ref;                       // the reference's activations: every layer, one micro-batch
    int fail_rank, fail_at_batch;       // --fail-rank, --fail-at-batch (-1: never)
} pipeline;

// One schedule, the loop's context: its order of operations on this stage, its pool, its counts.
typedef struct {
    int backward, micro_batch;
} step_op;

typedef struct {
    pipeline *pp;
    schedule_kind kind;
    step_op *ops;        // 2M: this stage's forwards and backwards, in the order they are issued
    int nops;
    slot_pool pool;
    int *slot_of;        // [M]: the slot that holds micro-batch m
    long *crossed;       // [CROSSING_KINDS * M], this run
    int crossings_ok;    // in every run so far, each micro-batch crossed each boundary once each way
    char crossing_problem[160];
    long act_sent, error_sent;  // this stage's sends in the last run
} schedule_run;

typedef struct {
    double forward_ms, backward_ms, update_ms;  // one micro-batch through this stage, alone; the update
} part_times;

// What every rank tells rank 0 after the runs (dist_allgather: the same layout everywhere).
typedef struct {
    uint64_t ok;                                // this rank's own checks
    uint64_t layer_sums[MLP_MAX_LAYERS + 1];    // the checksum of each of its layers
    uint64_t peak_slots[2], crossings_ok[2];    // per schedule, by its kind (SCHEDULE_1F1B, SCHEDULE_GPIPE)
    uint64_t act_sent[2], error_sent[2];
    uint64_t slot_bytes;
    double forward_ms, backward_ms, update_ms;
} stage_report;

// ----------------------------------------------------------------------------
// the stages

static int stage_is_first(const stage_shape *st) { return st->rank == 0; }
static int stage_is_last(const stage_shape *st) { return st->rank == st->stages - 1; }

static size_t aligned(size_t floats) { return (floats + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

// Stage s of p holds layers 1 + s*L/p to (s+1)*L/p: contiguous, in order, one layer at least.
static void stage_shape_init(stage_shape *st, const mlp_shape *s, int rank, int stages, int micro_batches)
{
    memset(st, 0, sizeof *st);
    st->rank = rank;
    st->stages = stages;
    st->first_layer = 1 + rank * s->layers / stages;
    st->last_layer = (rank + 1) * s->layers / stages;
    st->layers = st->last_layer - st->first_layer + 1;
    st->micro_batches = micro_batches;
    st->batch = s->batch;
    st->cols = s->batch / micro_batches;
    st->in_dim = s->dims[0];
    st->out_dim = s->dims[s->layers];
    size_t at = aligned((size_t)s->dims[st->first_layer - 1] * st->cols);
    for (int k = 1; k <= st->layers; k++) {
        st->off[k] = at;
        at += aligned((size_t)s->dims[st->first_layer + k - 1] * st->cols);
    }
    st->off[st->layers + 1] = at;
    if (stage_is_last(st)) at += aligned((size_t)st->out_dim * st->cols);
    st->slot_floats = at;
}

static float *layer_input(const stage_shape *st, float *act, int l) { return act + st->off[l - st->first_layer]; }
static float *layer_output(const stage_shape *st, float *act, int l) { return act + st->off[l - st->first_layer + 1]; }
static float *stage_targets(const stage_shape *st, float *act) { return act + st->off[st->layers + 1]; }
// What crosses from the stage below (its input) and to the stage above (its output), in floats.
static size_t input_floats(const mlp_shape *s, const stage_shape *st)
{
    return (size_t)s->dims[st->first_layer - 1] * st->cols;
}
static size_t output_floats(const mlp_shape *s, const stage_shape *st)
{
    return (size_t)s->dims[st->last_layer] * st->cols;
}

// The stage's layers, bottom to top, on the micro-batch whose activations are at `act`.
static void stage_forward(mlp_model *model, const stage_shape *st, float *act, cudaStream_t stream)
{
    for (int l = st->first_layer; l <= st->last_layer; l++)
        mlp_forward_layer(model, l, layer_input(st, act, l), layer_output(st, act, l), st->cols, stream);
}

// The micro-batch's backward pass through the stage's layers, top to bottom, as mlp_backward
// does. The last stage starts from the loss (the micro-batch's share of the batch's loss into
// *loss: the mean is over the whole batch); the others from `error_in`, the error of their
// output that the next stage sent. The bottom layer's error goes to `error_out`, but on the
// first stage: layer 1 has no layer below. With `accumulate` the layers' gradients are added
// to what d_grads holds, else they replace it.
static void stage_backward(mlp_model *model, const stage_shape *st, float *act, const float *error_in,
                           float *error_out, float *loss, int accumulate, cudaStream_t stream)
{
    const float *delta = error_in;
    int scratch = 0;  // which of the model's two error buffers the next layer writes
    if (stage_is_last(st)) {
        mlp_loss(model, layer_output(st, act, st->last_layer), stage_targets(st, act), model->d_delta[0], loss,
                 st->cols, st->batch, stream);
        delta = model->d_delta[0];
        scratch = 1;
    }
    for (int l = st->last_layer; l >= st->first_layer; l--) {
        float *prev = l > st->first_layer ? model->d_delta[scratch] : stage_is_first(st) ? NULL : error_out;
        mlp_backward_layer(model, l, layer_input(st, act, l), delta, prev, st->cols, accumulate, stream);
        delta = prev;
        scratch ^= 1;
    }
}

// The batch's loss: its micro-batches' shares, summed on the host in micro-batch order (the
// run and the reference add the same floats in the same order: the same bits).
static float batch_loss(const float *parts, int micro_batches)
{
    float sum = 0.0f;
    for (int m = 0; m < micro_batches; m++) sum += parts[m];
    return sum;
}

// ----------------------------------------------------------------------------
// the schedules: the order in which a stage issues its forwards (F) and backwards (B)

static void push_op(step_op *ops, int *n, int backward, int m)
{
    ops[*n].backward = backward;
    ops[*n].micro_batch = m;
    (*n)++;
}

// GPipe: every forward, then every backward, each in micro-batch order.
static int schedule_gpipe(const stage_shape *st, step_op *ops)
{
    int n = 0;
    for (int m = 0; m < st->micro_batches; m++) push_op(ops, &n, 0, m);
    for (int m = 0; m < st->micro_batches; m++) push_op(ops, &n, 1, m);
    return n;
}

// 1F1B: stage s of p first runs min(p - s - 1, M) warm-up forwards (the first stage most,
// the last none), then one forward and one backward in turn, then the backwards left. A
// stage then holds at most p - s micro-batches: every backward frees one before the next
// forward needs one.
static int schedule_1f1b(const stage_shape *st, step_op *ops)
{
    int n = 0;
    // BEGIN SOLUTION(13-one-f-one-b): fill ops[] in 1F1B order with push_op (0: forward, 1: backward): w = min(p - s - 1, M) warm-up forwards, then for each further micro-batch its forward followed by the oldest backward not yet issued, then the last w backwards; p = st->stages, s = st->rank, M = st->micro_batches
    int M = st->micro_batches, warmup = st->stages - st->rank - 1;
    if (warmup > M) warmup = M;
    for (int m = 0; m < warmup; m++) push_op(ops, &n, 0, m);
    for (int m = warmup; m < M; m++) {
        push_op(ops, &n, 0, m);
        push_op(ops, &n, 1, m - warmup);
    }
    for (int m = M - warmup; m < M; m++) push_op(ops, &n, 1, m);
    //| (void)st, (void)ops;
    // END SOLUTION
    return n;
}

static int schedule_build(schedule_kind kind, const stage_shape *st, step_op *ops)
{
    return kind == SCHEDULE_1F1B ? schedule_1f1b(st, ops) : schedule_gpipe(st, ops);
}

// Every micro-batch's forward and backward exactly once, the forwards in micro-batch order,
// the backwards too (the gradients are summed in that order: the reference's), each
// backward after its forward. The program checks each stage's order before training.
static int schedule_is_sound(const stage_shape *st, const step_op *ops, int n, char *why, size_t size)
{
    int M = st->micro_batches, next_forward = 0, next_backward = 0;
    if (n != 2 * M) {
        snprintf(why, size, "%d operations for %d micro-batches: each needs one forward and one backward", n, M);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        int m = ops[k].micro_batch;
        if (!ops[k].backward) {
            if (m != next_forward) {
                snprintf(why, size, "operation %d is the forward of micro-batch %d where %d comes next", k, m,
                         next_forward);
                return 0;
            }
            next_forward++;
        } else if (m != next_backward || m >= next_forward) {
            snprintf(why, size, "operation %d is the backward of micro-batch %d: the backwards go in micro-batch "
                     "order (%d comes next), each after its forward", k, m, next_backward);
            return 0;
        }
        else {
            next_backward++;
        }
    }
    return 1;
}

// "F0 F1 B0 F2 B1 B2": one stage's order, for --show-schedule and the report.
static void schedule_text(const step_op *ops, int n, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (int k = 0; k < n && at < size; k++)
        at += (size_t)snprintf(out + at, size - at, "%s%c%d", k ? " " : "", ops[k].backward ? 'B' : 'F',
                               ops[k].micro_batch);
}

// ----------------------------------------------------------------------------
// the activation slots

static void slot_create(act_slot *slot, size_t floats)
{
    slot->d_act = (float *)device_alloc(sizeof(float) * floats);
    cudaEvent_t *events[5] = {&slot->copied, &slot->received, &slot->forwarded, &slot->sent, &slot->freed};
    for (int k = 0; k < 5; k++) CUDA_CHECK(cudaEventCreateWithFlags(events[k], cudaEventDisableTiming));
    slot->micro_batch = -1;
}

static void slot_destroy(act_slot *slot)
{
    cudaEvent_t events[5] = {slot->copied, slot->received, slot->forwarded, slot->sent, slot->freed};
    for (int k = 0; k < 5; k++) CUDA_CHECK(cudaEventDestroy(events[k]));
    device_free(slot->d_act);
}

// A slot for micro-batch m: the first free one, or a new one when none is free. A new slot is
// allocated only in a schedule's first run; by then this stage has issued forwards alone since
// its last backward, whose hand-overs need nothing more from this host (notes/13).
static act_slot *pool_take(schedule_run *v, int m)
{
    slot_pool *p = &v->pool;
    const stage_shape *st = &v->pp->st;
    int k = 0;
    while (k < p->allocated && p->slots[k].micro_batch >= 0) k++;
    if (k == p->allocated) {
        if (p->allocated == p->capacity)
            dist_fail(v->pp->dist, "stage %d (%s): micro-batch %d finds no free activation slot although all %d "
                      "micro-batches of a batch already have one: a slot is never given back (exercise 13-slot-return)",
                      st->rank, SCHEDULE_NAMES[v->kind], m, p->capacity);
        slot_create(&p->slots[k], st->slot_floats);
        p->allocated++;
    }
    p->slots[k].micro_batch = m;
    v->slot_of[m] = k;
    if (++p->in_use > p->peak) p->peak = p->in_use;
    return &p->slots[k];
}

// Micro-batch m's slot is free again (its backward has been issued, and its freed event recorded).
EXERCISE_HELPER static void pool_return(schedule_run *v, int m)
{
    v->pool.slots[v->slot_of[m]].micro_batch = -1;
    v->pool.in_use--;
}

// ----------------------------------------------------------------------------
// the links

// One hand-over between two stages: the NCCL call, checked, then counted per micro-batch and
// kind, so that each run can check that every micro-batch crossed once each way.
#define HAND_OVER(v, kind, m, call)                                              \
    do {                                                                         \
        NCCL_CHECK((v)->pp->dist, call);                                         \
        (v)->crossed[(int)(kind) * (v)->pp->st.micro_batches + (m)]++;            \
    } while (0)

// Runs when the process exits (on_exit hands it the links, no global needed): a rank that
// stops early (dist_fail, dist_abort, a failed check) aborts its link communicators too, so
// that no NCCL kernel of theirs waits on for a rank that is gone. dist_abort and dist_fail
// abort the one communicator they know, lesson 12's. After links_close there is nothing left.
static void abort_links_at_exit(int status, void *arg)
{
    link_pair *ln = (link_pair *)arg;
    p2p_link *both[2] = {&ln->fwd, &ln->bwd};
    for (int k = 0; k < 2; k++)
        if (both[k]->comm) ncclCommAbort(both[k]->comm);  // its answer does not matter: the process ends
    free(ln);
    (void)status;
}

// Two communicators split from lesson 12's (every rank in both, in the same order), each
// with a stream. Blocking ones: once connected, ncclSend and ncclRecv only queue work, and a
// non-blocking communicator would issue each call from a thread of its own (tens of
// microseconds, four calls per micro-batch). The host's waits stay polled (dist_event_wait):
// a failed rank is still noticed, and ncclCommAbort frees the GPU.
static link_pair *links_open(dist_env *d, const device_info *dev)
{
    link_pair *ln = (link_pair *)host_calloc(1, sizeof(link_pair), "the links");
    p2p_link *both[2] = {&ln->fwd, &ln->bwd};
    for (int k = 0; k < 2; k++) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.splitShare = 0;  // resources of its own: shared ones would order its calls after the other's
        // the split is a call on the non-blocking parent: NCCL_CHECK polls it until the new one exists
        NCCL_CHECK(d, ncclCommSplit(d->comm, 0, d->rank, &both[k]->comm, &config));
        // the hand-overs start as soon as they may, ahead of the compute stream's queued blocks
        CUDA_CHECK(cudaStreamCreateWithPriority(&both[k]->stream, cudaStreamNonBlocking, dev->priority_greatest));
    }
    trace_name_stream(ln->fwd.stream, "fwd");
    trace_name_stream(ln->bwd.stream, "bwd");
    if (on_exit(abort_links_at_exit, ln) != 0) dist_fail(d, "cannot register the links' abort at exit");
    return ln;
}

// NCCL connects two ranks on their first send and receive, and on a blocking communicator
// that call waits for the peer. One activation up the whole pipeline, then one error down it,
// connects every link in an order without a cycle: stage s waits only for stage s - 1 going
// up, for stage s + 1 coming down.
static void links_connect(pipeline *pp, const mlp_shape *s)
{
    const stage_shape *st = &pp->st;
    dist_env *d = pp->dist;
    link_pair *ln = pp->ln;
    float *buf = (float *)device_alloc(sizeof(float) * st->slot_floats);
    CUDA_CHECK(cudaMemset(buf, 0, sizeof(float) * st->slot_floats));
    if (!stage_is_first(st))
        NCCL_CHECK(d, ncclRecv(buf, input_floats(s, st), ncclFloat, st->rank - 1, ln->fwd.comm, ln->fwd.stream));
    if (!stage_is_last(st))
        NCCL_CHECK(d, ncclSend(buf, output_floats(s, st), ncclFloat, st->rank + 1, ln->fwd.comm, ln->fwd.stream));
    if (!stage_is_last(st))
        NCCL_CHECK(d, ncclRecv(buf, output_floats(s, st), ncclFloat, st->rank + 1, ln->bwd.comm, ln->bwd.stream));
    if (!stage_is_first(st))
        NCCL_CHECK(d, ncclSend(buf, input_floats(s, st), ncclFloat, st->rank - 1, ln->bwd.comm, ln->bwd.stream));
    for (int k = 0; k < 2; k++) {
        CUDA_CHECK(cudaEventRecord(pp->links_idle[k], k ? ln->bwd.stream : ln->fwd.stream));
        CUDA_CHECK(dist_event_wait(d, pp->links_idle[k]));
    }
    device_free(buf);
}

// ncclCommFinalize then ncclCommDestroy of both links: a normal end. Before dist_finish.
static void links_close(pipeline *pp)
{
    p2p_link *both[2] = {&pp->ln->fwd, &pp->ln->bwd};
    for (int k = 0; k < 2; k++) {
        NCCL_CHECK(pp->dist, ncclCommFinalize(both[k]->comm));
        NCCL_CHECK(pp->dist, ncclCommDestroy(both[k]->comm));
        both[k]->comm = NULL;  // nothing left for the handler at exit
        CUDA_CHECK(cudaStreamDestroy(both[k]->stream));
    }
}

// ----------------------------------------------------------------------------
// the data

// Host work: samples [m * cols, (m + 1) * cols) of batch i, features then targets, the same
// bits as those columns of lesson 06's whole batch (a prep range on the timeline).
static void prepare_micro_batch(trainer *t, const stage_shape *st, long i, int m, float *h)
{
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, m * st->cols, st->cols, h);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;  // only the main thread prepares here: no lock needed
    t->run.main_prep_ms += ms;
}

// What this stage needs of micro-batch m from the host, into its slot on the copy stream:
// the features on the first stage, the targets on the last (both with one stage). Each
// pinned region is refilled only once its last copy has left it (lesson 08).
static void copy_in(trainer *t, pipeline *pp, act_slot *slot, long i, int m)
{
    const stage_shape *st = &pp->st;
    int region = (int)(i % HOST_SLOTS) * st->micro_batches + m;
    float *h = t->h_batch[i % HOST_SLOTS] + (size_t)m * st->cols * (st->in_dim + st->out_dim);
    cudaEvent_t left = pp->host_copied[region];
    if (event_pending(left)) SLOT_WAIT(t, dist_event_wait(pp->dist, left));
    prepare_micro_batch(t, st, i, m, h);
    // the slot is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, slot->freed, 0));
    test_delay(t, DELAY_COPY, t->copy_stream);
    if (stage_is_first(st))
        CUDA_CHECK(cudaMemcpyAsync(layer_input(st, slot->d_act, st->first_layer), h,
                                   sizeof(float) * st->cols * st->in_dim, cudaMemcpyHostToDevice, t->copy_stream));
    if (stage_is_last(st))
        CUDA_CHECK(cudaMemcpyAsync(stage_targets(st, slot->d_act), h + (size_t)st->cols * st->in_dim,
                                   sizeof(float) * st->cols * st->out_dim, cudaMemcpyHostToDevice, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(slot->copied, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(left, t->copy_stream));
}

// ----------------------------------------------------------------------------
// one micro-batch: its forward (F) and its backward (B) on this stage

// The activation of micro-batch m from the previous stage, into the slot's input.
static void receive_activation(trainer *t, schedule_run *v, act_slot *slot, int m)
{
    const stage_shape *st = &v->pp->st;
    p2p_link *up = &v->pp->ln->fwd;
    // the slot is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(up->stream, slot->freed, 0));
    test_delay(t, DELAY_COPY, up->stream);  // the test hook holds the hand-overs back with the copies
    HAND_OVER(v, ACT_RECEIVED, m, ncclRecv(layer_input(st, slot->d_act, st->first_layer),
                                           input_floats(&t->model.shape, st), ncclFloat, st->rank - 1, up->comm,
                                           up->stream));
    CUDA_CHECK(cudaEventRecord(slot->received, up->stream));
}

// The stage's output for micro-batch m, to the next stage.
static void send_activation(trainer *t, schedule_run *v, act_slot *slot, int m)
{
    const stage_shape *st = &v->pp->st;
    p2p_link *up = &v->pp->ln->fwd;
    // BEGIN SOLUTION(13-send-after-forward): the send must not read the stage's output before the forward pass has written it: mark that point on the compute stream with the slot's forwarded event, and make the forward link's stream (up->stream), not the host, wait for it
    CUDA_CHECK(cudaEventRecord(slot->forwarded, t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(up->stream, slot->forwarded, 0));
    // END SOLUTION
    test_delay(t, DELAY_COPY, up->stream);
    HAND_OVER(v, ACT_SENT, m, ncclSend(layer_output(st, slot->d_act, st->last_layer),
                                       output_floats(&t->model.shape, st), ncclFloat, st->rank + 1, up->comm,
                                       up->stream));
    CUDA_CHECK(cudaEventRecord(slot->sent, up->stream));
}

static void forward_micro_batch(trainer *t, schedule_run *v, long i, int m)
{
    pipeline *pp = v->pp;
    const stage_shape *st = &pp->st;
    cudaStream_t compute = t->compute_stream;
    act_slot *slot = pool_take(v, m);
    if (stage_is_first(st) || stage_is_last(st)) copy_in(t, pp, slot, i, m);
    if (!stage_is_first(st)) receive_activation(t, v, slot, m);
    if (stage_is_first(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, slot->copied, 0));
    // BEGIN SOLUTION(13-recv-wait): on every stage but the first, the forward pass reads the activation that the forward link receives into the slot: make the compute stream wait for the slot's received event (recorded on that link's stream after the ncclRecv)
    if (!stage_is_first(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, slot->received, 0));
    // END SOLUTION
    // the output is rewritten: the send of the slot's last micro-batch must have read it
    if (!stage_is_last(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, slot->sent, 0));
    test_delay(t, DELAY_COMPUTE, compute);
    stage_forward(&t->model, st, slot->d_act, compute);
    if (!stage_is_last(st)) send_activation(t, v, slot, m);
}

// The error of micro-batch m's output, from the next stage, into error buffer k.
static void receive_error(trainer *t, schedule_run *v, int k, int m)
{
    pipeline *pp = v->pp;
    p2p_link *down = &pp->ln->bwd;
    // the buffer is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(down->stream, pp->error_read[k], 0));
    test_delay(t, DELAY_COPY, down->stream);
    HAND_OVER(v, ERROR_RECEIVED, m, ncclRecv(pp->d_error_in[k], output_floats(&t->model.shape, &pp->st), ncclFloat,
                                             pp->st.rank + 1, down->comm, down->stream));
    CUDA_CHECK(cudaEventRecord(pp->error_received[k], down->stream));
}

// The error of micro-batch m's input, to the previous stage: the mirror of send_activation.
static void send_error(trainer *t, schedule_run *v, int k, int m)
{
    pipeline *pp = v->pp;
    p2p_link *down = &pp->ln->bwd;
    CUDA_CHECK(cudaEventRecord(pp->error_ready[k], t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(down->stream, pp->error_ready[k], 0));
    test_delay(t, DELAY_COPY, down->stream);
    HAND_OVER(v, ERROR_SENT, m, ncclSend(pp->d_error_out[k], input_floats(&t->model.shape, &pp->st), ncclFloat,
                                         pp->st.rank - 1, down->comm, down->stream));
    CUDA_CHECK(cudaEventRecord(pp->error_sent[k], down->stream));
}

static void backward_micro_batch(trainer *t, schedule_run *v, long i, int m)
{
    pipeline *pp = v->pp;
    const stage_shape *st = &pp->st;
    cudaStream_t compute = t->compute_stream;
    act_slot *slot = &v->pool.slots[v->slot_of[m]];
    int k = m % 2;  // the error buffers, ping-pong: micro-batch m+1's may arrive while m's is read
    if (!stage_is_last(st)) {
        receive_error(t, v, k, m);
        CUDA_CHECK(cudaStreamWaitEvent(compute, pp->error_received[k], 0));
    } else {
        CUDA_CHECK(cudaStreamWaitEvent(compute, slot->copied, 0));  // the targets, for the loss
    }
    // the error for the previous stage is rewritten: its last send must have read it
    if (!stage_is_first(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, pp->error_sent[k], 0));
    test_delay(t, DELAY_COMPUTE, compute);
    // BEGIN SOLUTION(13-accumulate): d_grads must end the batch holding the sum of every micro-batch's gradients, summed in micro-batch order: say whether this backward pass replaces what d_grads holds (it still holds the previous batch's) or adds to it
    int accumulate = m > 0;
    //| int accumulate = 0;
    // END SOLUTION
    stage_backward(&t->model, st, slot->d_act, pp->d_error_in[k], pp->d_error_out[k],
                   &pp->d_parts[(i % STEP_RING) * st->micro_batches + m], accumulate, compute);
    if (!stage_is_last(st)) CUDA_CHECK(cudaEventRecord(pp->error_read[k], compute));
    // BEGIN SOLUTION(13-slot-return): the slot's activations have been read once this backward pass is done: record the slot's freed event on the compute stream (whatever refills the slot waits for it), then give the slot back to the pool (pool_return) for a later forward
    CUDA_CHECK(cudaEventRecord(slot->freed, compute));
    pool_return(v, m);
    // END SOLUTION
    if (!stage_is_first(st)) send_error(t, v, k, m);
}

// ----------------------------------------------------------------------------
// the training loop

// After the batch's last backward pass: the update of this stage's layers (W_l then b_l, the
// layers in increasing order: one range), the partial losses' copy on the last stage, and the
// event the host waits for. After the last batch the compute stream also waits for the links'
// last hand-overs, so that the event covers every stream of this rank.
static void finish_step(trainer *t, pipeline *pp, long i)
{
    const stage_shape *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t compute = t->compute_stream;
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    mlp_update(&t->model, first, end - first, compute);
    if (stage_is_last(st)) {
        size_t at = (size_t)(i % STEP_RING) * st->micro_batches;
        CUDA_CHECK(cudaMemcpyAsync(pp->h_parts + at, pp->d_parts + at, sizeof(float) * st->micro_batches,
                                   cudaMemcpyDeviceToHost, compute));
    }
    if (i == t->opt.batches - 1 && pp->ln) {
        cudaStream_t streams[2] = {pp->ln->fwd.stream, pp->ln->bwd.stream};
        for (int k = 0; k < 2; k++) {
            CUDA_CHECK(cudaEventRecord(pp->links_idle[k], streams[k]));
            CUDA_CHECK(cudaStreamWaitEvent(compute, pp->links_idle[k], 0));
        }
    }
    CUDA_CHECK(cudaEventRecord(pp->step_done[i % STEP_RING], compute));
}

// The host waits (polled: it gives up when another rank failed) for batch j's step; the last
// stage then takes batch j's loss, its micro-batches' shares summed.
static void step_wait(trainer *t, pipeline *pp, long j)
{
    HOST_SYNC(t, dist_event_wait(pp->dist, pp->step_done[j % STEP_RING]));
    if (!stage_is_last(&pp->st)) return;
    t->h_loss[j % t->loss_slots] = batch_loss(pp->h_parts + (size_t)(j % STEP_RING) * pp->st.micro_batches,
                                              pp->st.micro_batches);
    trainer_take_loss(t, j);
}

// The losses live on the last stage; every rank's checks need them: one broadcast of the
// run's losses at its end (a collective costs tens of microseconds: not one per batch).
static void broadcast_losses(trainer *t, pipeline *pp)
{
    int n = t->opt.batches, last = pp->st.stages - 1;
    cudaStream_t s = t->compute_stream;
    for (int i = 0; i < n; i++) pp->h_losses[i] = stage_is_last(&pp->st) ? (float)t->run.losses[i] : 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(pp->d_losses, pp->h_losses, sizeof(float) * n, cudaMemcpyHostToDevice, s));
    NCCL_CHECK(pp->dist, ncclBroadcast(pp->d_losses, pp->d_losses, (size_t)n, ncclFloat, last, pp->dist->comm, s));
    CUDA_CHECK(cudaMemcpyAsync(pp->h_losses, pp->d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaEventRecord(pp->losses_landed, s));
    HOST_SYNC(t, dist_event_wait(pp->dist, pp->losses_landed));
    if (stage_is_last(&pp->st)) return;
    for (int i = 0; i < n; i++) {
        t->h_loss[i % t->loss_slots] = pp->h_losses[i];
        trainer_take_loss(t, i);
    }
}

// Each micro-batch crosses each boundary once each way per batch: a stage sends (and the
// next receives) every activation but on the last stage, every error but on the first.
static void check_crossings(trainer *t, schedule_run *v)
{
    const stage_shape *st = &v->pp->st;
    static const char *const what[CROSSING_KINDS] = {"activations sent", "activations received", "errors sent",
                                                     "errors received"};
    long n = t->opt.batches;
    long want[CROSSING_KINDS] = {stage_is_last(st) ? 0 : n, stage_is_first(st) ? 0 : n, stage_is_first(st) ? 0 : n,
                                 stage_is_last(st) ? 0 : n};
    v->act_sent = v->error_sent = 0;
    for (int kind = 0; kind < CROSSING_KINDS; kind++)
        for (int m = 0; m < st->micro_batches; m++) {
            long got = v->crossed[kind * st->micro_batches + m];
            if (kind == ACT_SENT) v->act_sent += got;
            if (kind == ERROR_SENT) v->error_sent += got;
            if (got != want[kind] && v->crossings_ok) {
                v->crossings_ok = 0;
                snprintf(v->crossing_problem, sizeof v->crossing_problem,
                         "stage %d (%s): micro-batch %d: %ld %s in a run of %ld batches, expected %ld", st->rank,
                         SCHEDULE_NAMES[v->kind], m, got, what[kind], n, want[kind]);
            }
        }
}

static int train_loop(trainer *t, void *ctx)
{
    schedule_run *v = (schedule_run *)ctx;
    pipeline *pp = v->pp;
    const stage_shape *st = &pp->st;
    long n = t->opt.batches;
    size_t parts = (size_t)STEP_RING * st->micro_batches;
    // poisoned: a share of the loss read before its copy lands is NaN, and the loss with it
    memset(pp->h_parts, 0xFF, sizeof(float) * parts);
    CUDA_CHECK(cudaMemsetAsync(pp->d_parts, 0xFF, sizeof(float) * parts, t->compute_stream));
    memset(v->crossed, 0, sizeof(long) * CROSSING_KINDS * (size_t)st->micro_batches);
    for (long i = 0; i < n; i++) {
        if (pp->dist->rank == pp->fail_rank && i == pp->fail_at_batch)
            dist_fail(pp->dist, "stopping at batch %ld as asked (--fail-rank %d --fail-at-batch %d)", i, pp->fail_rank,
                      pp->fail_at_batch);
        if (i >= 2) step_wait(t, pp, i - 2);  // two batches ahead at most: events and buffers stay in their rings
        for (int k = 0; k < v->nops; k++) {
            const step_op *op = &v->ops[k];
            if (op->backward)
                backward_micro_batch(t, v, i, op->micro_batch);
            else
                forward_micro_batch(t, v, i, op->micro_batch);
        }
        finish_step(t, pp, i);
    }
    for (long j = n >= 2 ? n - 2 : 0; j < n; j++) step_wait(t, pp, j);
    if (st->stages > 1) broadcast_losses(t, pp);
    check_crossings(t, v);
    return 0;
}

// ----------------------------------------------------------------------------
// the reference

// What every run must match, computed on every rank: the one-stage run, every layer on this
// GPU, micro-batch after micro-batch (forward, then backward), the gradients summed in
// micro-batch order, the host waiting for every batch. The same layer operations on the same
// bits as the pipeline, whatever the stage count or the schedule: the same bits. A pipelined
// run trains only this stage's layers, so at the end the others get their initial values
// back: the harness's checksum of the whole model then compares this stage's layers.
static int reference_loop(trainer *t, void *ctx)
{
    pipeline *pp = (pipeline *)ctx;
    const stage_shape *w = &pp->whole, *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t stream = t->compute_stream;
    int M = w->micro_batches;
    for (long i = 0; i < t->opt.batches; i++) {
        for (int m = 0; m < M; m++) {
            float *h = t->h_batch[0] + (size_t)m * w->cols * (w->in_dim + w->out_dim);
            dataset_prepare_shard(&t->data, i, m * w->cols, w->cols, h);
            CUDA_CHECK(cudaMemcpyAsync(layer_input(w, pp->d_ref, 1), h, sizeof(float) * w->cols * w->in_dim,
                                       cudaMemcpyHostToDevice, stream));
            CUDA_CHECK(cudaMemcpyAsync(stage_targets(w, pp->d_ref), h + (size_t)w->cols * w->in_dim,
                                       sizeof(float) * w->cols * w->out_dim, cudaMemcpyHostToDevice, stream));
            stage_forward(&t->model, w, pp->d_ref, stream);
            stage_backward(&t->model, w, pp->d_ref, NULL, NULL, &pp->d_parts[m], m > 0, stream);
        }
        mlp_update(&t->model, 0, s->nparams, stream);
        CUDA_CHECK(cudaMemcpyAsync(pp->h_parts, pp->d_parts, sizeof(float) * M, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaEventRecord(pp->step_done[0], stream));
        CUDA_CHECK(dist_event_wait(pp->dist, pp->step_done[0]));  // also: the pinned regions may be refilled
        t->h_loss[i % t->loss_slots] = batch_loss(pp->h_parts, M);
        trainer_take_loss(t, i);
    }
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    if (first > 0)
        CUDA_CHECK(cudaMemcpyAsync(t->model.d_params, t->model.d_params_init, sizeof(float) * first,
                                   cudaMemcpyDeviceToDevice, stream));
    if (end < s->nparams)
        CUDA_CHECK(cudaMemcpyAsync(t->model.d_params + end, t->model.d_params_init + end,
                                   sizeof(float) * (s->nparams - end), cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaEventRecord(pp->step_done[0], stream));
    CUDA_CHECK(dist_event_wait(pp->dist, pp->step_done[0]));
    return 0;
}

// ----------------------------------------------------------------------------
// each part alone: what the prediction is made of

static double between_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// One micro-batch's forward and backward through this stage, and the stage's update, each
// timed with events, median of 5 after a warm-up. Before each, the stream spins for 2 ms, long
// enough for the host to queue what follows: the time is the GPU's, not the host's issuing.
// No hand-over is timed: the prediction leaves them out (notes/13).
static void profile_parts(trainer *t, pipeline *pp, part_times *p)
{
    const stage_shape *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t c = t->compute_stream;
    double fwd[PART_REPS], bwd[PART_REPS], upd[PART_REPS];
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    float *act = (float *)device_alloc(sizeof(float) * st->slot_floats);
    CUDA_CHECK(cudaMemsetAsync(act, 0, sizeof(float) * st->slot_floats, c));
    CUDA_CHECK(cudaMemsetAsync(pp->d_error_in[0], 0, sizeof(float) * output_floats(s, st), c));
    CUDA_CHECK(cudaMemsetAsync(t->model.d_grads, 0, sizeof(float) * s->nparams, c));  // the backward adds to them
    cudaEvent_t ev[4];
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventCreate(&ev[k]));
    for (int k = -1; k < PART_REPS; k++) {  // k = -1 is a warm-up
        launch_spin(1, 32, QUEUE_AHEAD_NS, c);
        CUDA_CHECK(cudaEventRecord(ev[0], c));
        stage_forward(&t->model, st, act, c);
        CUDA_CHECK(cudaEventRecord(ev[1], c));
        stage_backward(&t->model, st, act, pp->d_error_in[0], pp->d_error_out[0], pp->d_parts, 1, c);
        CUDA_CHECK(cudaEventRecord(ev[2], c));
        mlp_update(&t->model, first, end - first, c);
        CUDA_CHECK(cudaEventRecord(ev[3], c));
        CUDA_CHECK(dist_event_wait(pp->dist, ev[3]));
        if (k >= 0) {
            fwd[k] = between_ms(ev[0], ev[1]);
            bwd[k] = between_ms(ev[1], ev[2]);
            upd[k] = between_ms(ev[2], ev[3]);
        }
    }
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventDestroy(ev[k]));
    device_free(act);
    p->forward_ms = stats_of(fwd, PART_REPS).median;
    p->backward_ms = stats_of(bwd, PART_REPS).median;
    p->update_ms = stats_of(upd, PART_REPS).median;
}

// ----------------------------------------------------------------------------
// the checks across stages, and the report

// FNV-1a of each layer's parameters (W_l then b_l, one range): the stage's own layers are
// this rank's to report; the test compares them with a one-stage run's.
static void layer_checksums(trainer *t, uint64_t *sums)
{
    const mlp_shape *s = &t->model.shape;
    size_t bytes = sizeof(float) * s->nparams;
    float *h = (float *)host_alloc(bytes, "a copy of the weights");
    CUDA_CHECK(cudaMemcpyAsync(h, t->model.d_params, bytes, cudaMemcpyDeviceToHost, t->compute_stream));
    CUDA_CHECK(cudaStreamSynchronize(t->compute_stream));  // nothing of NCCL's is queued any more
    for (int l = 1; l <= s->layers; l++) {
        size_t end = s->b_off[l] + (size_t)s->dims[l];
        sums[l] = fnv1a(h + s->w_off[l], sizeof(float) * (end - s->w_off[l]), FNV1A_START);
    }
    free(h);
}

typedef enum { PEAK_SLOTS, PEAK_BYTES, FORWARD_MS, BACKWARD_MS, UPDATE_MS } stage_figure;

// "a,b,c": one figure per stage (the peaks of schedule `which`).
static void per_stage(const stage_report *all, int stages, schedule_kind which, stage_figure f, char *out,
                      size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (int r = 0; r < stages && at < size; r++) {
        const stage_report *x = &all[r];
        double v = f == PEAK_SLOTS ? (double)x->peak_slots[which]
                 : f == PEAK_BYTES ? (double)x->peak_slots[which] * x->slot_bytes
                 : f == FORWARD_MS ? x->forward_ms : f == BACKWARD_MS ? x->backward_ms : x->update_ms;
        at += (size_t)snprintf(out + at, size - at, f <= PEAK_BYTES ? "%s%.0f" : "%s%.4f", r ? "," : "", v);
    }
}

// What rank 0 makes of every stage's report.
typedef struct {
    int verified, once;                  // every rank's checks passed; every crossing counted once
    long act, error, expected;           // the lesson's own schedule's last run: sends up, sends down
    double max_f, max_b, max_u;          // the slowest stage's parts alone
    double predicted, ideal, bubble;     // the model of the step
    char layers[128], sums[(MLP_MAX_LAYERS + 1) * 18];
} pipeline_figures;

static void figures_of(const trainer *t, const stage_report *all, int p, int M, schedule_kind first,
                       pipeline_figures *g)
{
    const mlp_shape *s = &t->model.shape;
    double sum_fb = 0, max_fb = 0;
    memset(g, 0, sizeof *g);
    g->verified = g->once = 1;
    for (int r = 0; r < p; r++) {
        const stage_report *a = &all[r];
        g->verified = g->verified && a->ok == 1;
        g->once = g->once && a->crossings_ok[0] == 1 && a->crossings_ok[1] == 1;
        g->act += (long)a->act_sent[first];
        g->error += (long)a->error_sent[first];
        double fb = a->forward_ms + a->backward_ms;
        sum_fb += fb;
        if (fb > max_fb) max_fb = fb;
        if (a->forward_ms > g->max_f) g->max_f = a->forward_ms;
        if (a->backward_ms > g->max_b) g->max_b = a->backward_ms;
        if (a->update_ms > g->max_u) g->max_u = a->update_ms;
    }
    g->expected = (long)(p - 1) * M * t->opt.batches;
    g->once = g->once && g->act == g->expected && g->error == g->expected;
    // the step's critical path (GPipe's model): the first micro-batch goes up and down every
    // stage, each of the other M - 1 waits for the slowest stage; then the update. Hand-overs
    // are left out. With equal stages: (M + p - 1)(t_f + t_b) + t_u.
    g->predicted = sum_fb + (M - 1) * max_fb + g->max_u;
    g->ideal = M * max_fb + g->max_u;
    g->bubble = (double)(p - 1) / (M + p - 1);
    size_t at = 0;
    for (int r = 0; r < p; r++) {
        stage_shape other;
        stage_shape_init(&other, s, r, p, M);
        at += (size_t)snprintf(g->layers + at, sizeof g->layers - at, "%s%d", r ? "|" : "", other.first_layer);
        if (other.last_layer > other.first_layer)
            at += (size_t)snprintf(g->layers + at, sizeof g->layers - at, "-%d", other.last_layer);
    }
    at = 0;
    for (int l = 1; l <= s->layers; l++) {  // layer l's checksum from the stage that trains it
        int owner = 0;
        while (owner + 1 < p && 1 + (owner + 1) * s->layers / p <= l) owner++;
        at += (size_t)snprintf(g->sums + at, sizeof g->sums - at, "%s%016llx", l > 1 ? "," : "",
                               (unsigned long long)all[owner].layer_sums[l]);
    }
}

static void print_report(FILE *out, const dist_env *d, const stage_shape *st, const stage_report *all,
                         schedule_run *runs[2], const harness_extras *x, schedule_kind first, const pipeline_figures *g)
{
    int p = st->stages;
    char version[32], slots[256];
    dist_nccl_version(version, sizeof version);
    fprintf(out, "pipeline: %d stage%s (layers %s; launcher: %s, NCCL %s), %d micro-batches of %d samples, %s first\n",
            p, p == 1 ? "" : "s", g->layers, dist_launcher_name(d->launcher), version, st->micro_batches, st->cols,
            SCHEDULE_NAMES[first]);
    for (int r = 0; r < p; r++)
        fprintf(out, "  stage %d alone, per micro-batch (median of %d): forward %.3f ms, backward %.3f ms; "
                     "update %.3f ms\n", r, PART_REPS, all[r].forward_ms, all[r].backward_ms, all[r].update_ms);
    fprintf(out, "  predicted step (critical path, no hand-over time): %.3f ms; without a bubble: %.3f ms; "
                 "bubble (p-1)/(m+p-1) = %.1f%% of the step\n", g->predicted, g->ideal, 100 * g->bubble);
    for (int k = 0; k < 2; k++) {
        schedule_kind which = runs[k]->kind;
        per_stage(all, p, which, PEAK_SLOTS, slots, sizeof slots);
        fprintf(out, "  %-5s step %.3f ms (%.2f x predicted; bubble from the step %.1f%%); activation slots per "
                     "stage: %s\n", SCHEDULE_NAMES[which], x->step_ms[k], x->step_ms[k] / g->predicted,
                100 * (1 - g->ideal / x->step_ms[k]), slots);
    }
    fprintf(out, "  crossings per run: %ld activations, %ld errors (%ld each expected): %s\n", g->act, g->error,
            g->expected, g->once ? "every micro-batch once each way" : "NOT once each way");
    fprintf(out, "  every stage's own checks passed: %s\n", g->verified ? "yes" : "NO");
}

static void write_report(json_writer *js, const dist_env *d, const stage_shape *st, const stage_report *all,
                         schedule_run *runs[2], const harness_extras *x, schedule_kind first,
                         const pipeline_figures *g)
{
    int p = st->stages;
    char version[32], list[512], key[64];
    dist_nccl_version(version, sizeof version);
    json_int(js, "world_size", d->world);
    json_str(js, "launcher", dist_launcher_name(d->launcher));
    json_str(js, "nccl_version", version);
    json_int(js, "stages", p);
    json_str(js, "stage_layers", g->layers);
    json_int(js, "micro_batches", st->micro_batches);
    json_int(js, "micro_batch", st->cols);
    json_str(js, "schedule", SCHEDULE_NAMES[first]);
    per_stage(all, p, first, FORWARD_MS, list, sizeof list);
    json_str(js, "stage_forward_ms", list);
    per_stage(all, p, first, BACKWARD_MS, list, sizeof list);
    json_str(js, "stage_backward_ms", list);
    per_stage(all, p, first, UPDATE_MS, list, sizeof list);
    json_str(js, "stage_update_ms", list);
    json_num(js, "forward_ms", g->max_f);
    json_num(js, "backward_ms", g->max_b);
    json_num(js, "update_ms", g->max_u);
    json_num(js, "predicted_step_ms", g->predicted);
    json_num(js, "ideal_step_ms", g->ideal);
    json_num(js, "bubble_model", g->bubble);
    for (int k = 0; k < 2; k++) {
        schedule_kind which = runs[k]->kind;
        const char *name = SCHEDULE_NAMES[which];
        uint64_t most = 0, most_bytes = 0;
        for (int r = 0; r < p; r++) {
            if (all[r].peak_slots[which] > most) most = all[r].peak_slots[which];
            if (all[r].peak_slots[which] * all[r].slot_bytes > most_bytes)
                most_bytes = all[r].peak_slots[which] * all[r].slot_bytes;
        }
#define KEY(what) (snprintf(key, sizeof key, "%s_%s", name, what), key)
        json_num(js, KEY("step_over_predicted"), x->step_ms[k] / g->predicted);
        json_num(js, KEY("bubble_from_step"), 1 - g->ideal / x->step_ms[k]);
        json_int(js, KEY("peak_slots"), (long long)most);
        json_int(js, KEY("peak_act_bytes"), (long long)most_bytes);
        per_stage(all, p, which, PEAK_SLOTS, list, sizeof list);
        json_str(js, KEY("peak_slots_per_stage"), list);
        per_stage(all, p, which, PEAK_BYTES, list, sizeof list);
        json_str(js, KEY("peak_act_bytes_per_stage"), list);
#undef KEY
    }
    json_int(js, "act_crossings", g->act);
    json_int(js, "error_crossings", g->error);
    json_int(js, "expected_crossings", g->expected);
    json_bool(js, "crossings_once", g->once);
    json_str(js, "layer_checksums", g->sums);
    json_bool(js, "ranks_verified", g->verified);
    json_num(js, "timeout_s", d->timeout_s);
}

// Every rank's report (its checks, its layers' checksums, its schedules' peaks and crossings,
// its parts alone) gathered to rank 0, which prints and writes the figures the lesson is
// about. Every rank calls it (a collective). Returns 1 when every rank's checks passed and
// every micro-batch crossed once each way.
static int stages_agree(trainer *t, pipeline *pp, schedule_run *runs[2], const part_times *parts,
                        const harness_extras *x, schedule_kind first, int ok, FILE *out)
{
    dist_env *d = pp->dist;
    const stage_shape *st = &pp->st;
    stage_report mine;
    memset(&mine, 0, sizeof mine);
    mine.ok = (uint64_t)ok;
    layer_checksums(t, mine.layer_sums);
    for (int k = 0; k < 2; k++) {
        const schedule_run *v = runs[k];
        mine.peak_slots[v->kind] = (uint64_t)v->pool.allocated;
        mine.crossings_ok[v->kind] = (uint64_t)v->crossings_ok;
        mine.act_sent[v->kind] = (uint64_t)v->act_sent;
        mine.error_sent[v->kind] = (uint64_t)v->error_sent;
        if (!v->crossings_ok) fprintf(out ? out : stderr, "%s: crossings: %s\n", d->name, v->crossing_problem);
    }
    mine.slot_bytes = sizeof(float) * st->slot_floats;
    mine.forward_ms = parts->forward_ms;
    mine.backward_ms = parts->backward_ms;
    mine.update_ms = parts->update_ms;
    stage_report *all = (stage_report *)host_calloc((size_t)d->world, sizeof(stage_report), "every stage's report");
    dist_allgather(d, &mine, all, sizeof mine, t->compute_stream);
    pipeline_figures g;
    figures_of(t, all, st->stages, st->micro_batches, first, &g);
    if (out) print_report(out, d, st, all, runs, x, first, &g);
    if (t->opt.json) write_report(&t->js, d, st, all, runs, x, first, &g);
    free(all);
    return g.verified && g.once;
}

// ----------------------------------------------------------------------------

static void setup(trainer *t, pipeline *pp, int stages, int micro_batches)
{
    const mlp_shape *s = &t->model.shape;
    stage_shape_init(&pp->st, s, pp->dist->rank, stages, micro_batches);
    stage_shape_init(&pp->whole, s, 0, 1, micro_batches);
    const stage_shape *st = &pp->st;
    int M = micro_batches;
    for (int k = 0; k < 2; k++) {
        pp->d_error_in[k] = (float *)device_alloc(sizeof(float) * aligned(output_floats(s, st)));
        pp->d_error_out[k] = (float *)device_alloc(sizeof(float) * aligned(input_floats(s, st)));
        cudaEvent_t *ev[4] = {&pp->error_received[k], &pp->error_read[k], &pp->error_ready[k], &pp->error_sent[k]};
        for (int e = 0; e < 4; e++) CUDA_CHECK(cudaEventCreateWithFlags(ev[e], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&pp->links_idle[k], cudaEventDisableTiming));
    }
    pp->host_copied =
        (cudaEvent_t *)host_calloc((size_t)HOST_SLOTS * M, sizeof(cudaEvent_t), "the host regions' events");
    for (int r = 0; r < HOST_SLOTS * M; r++)
        CUDA_CHECK(cudaEventCreateWithFlags(&pp->host_copied[r], cudaEventDisableTiming));
    pp->d_parts = (float *)device_alloc(sizeof(float) * STEP_RING * M);
    pp->h_parts = (float *)pinned_alloc(sizeof(float) * STEP_RING * M);
    for (int k = 0; k < STEP_RING; k++) CUDA_CHECK(cudaEventCreateWithFlags(&pp->step_done[k], cudaEventDisableTiming));
    pp->d_losses = (float *)device_alloc(sizeof(float) * (size_t)t->opt.batches);
    pp->h_losses = (float *)pinned_alloc(sizeof(float) * (size_t)t->opt.batches);
    CUDA_CHECK(cudaEventCreateWithFlags(&pp->losses_landed, cudaEventDisableTiming));
    pp->d_ref = (float *)device_alloc(sizeof(float) * pp->whole.slot_floats);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (stages > 1) {
        pp->ln = links_open(pp->dist, &t->dev);
        links_connect(pp, s);
    }
}

static void teardown(pipeline *pp)
{
    for (int k = 0; k < 2; k++) {
        device_free(pp->d_error_in[k]);
        device_free(pp->d_error_out[k]);
        cudaEvent_t ev[5] = {pp->error_received[k], pp->error_read[k], pp->error_ready[k], pp->error_sent[k],
                             pp->links_idle[k]};
        for (int e = 0; e < 5; e++) CUDA_CHECK(cudaEventDestroy(ev[e]));
    }
    for (int r = 0; r < HOST_SLOTS * pp->st.micro_batches; r++) CUDA_CHECK(cudaEventDestroy(pp->host_copied[r]));
    free(pp->host_copied);
    device_free(pp->d_parts);
    pinned_free(pp->h_parts);
    for (int k = 0; k < STEP_RING; k++) CUDA_CHECK(cudaEventDestroy(pp->step_done[k]));
    device_free(pp->d_losses);
    pinned_free(pp->h_losses);
    CUDA_CHECK(cudaEventDestroy(pp->losses_landed));
    device_free(pp->d_ref);
    if (pp->ln) links_close(pp);
}

// A schedule's order on this stage (checked), its pool and its counters.
static void schedule_create(schedule_run *v, pipeline *pp, schedule_kind kind)
{
    int M = pp->st.micro_batches;
    char why[200];
    memset(v, 0, sizeof *v);
    v->pp = pp;
    v->kind = kind;
    v->ops = (step_op *)host_calloc((size_t)2 * M, sizeof(step_op), "the schedule");
    v->nops = schedule_build(kind, &pp->st, v->ops);
    if (!schedule_is_sound(&pp->st, v->ops, v->nops, why, sizeof why))
        dist_fail(pp->dist, "stage %d: the %s schedule is wrong: %s%s", pp->st.rank, SCHEDULE_NAMES[kind], why,
                  kind == SCHEDULE_1F1B ? " (exercise 13-one-f-one-b)" : "");
    v->pool.capacity = M;
    v->pool.slots = (act_slot *)host_calloc((size_t)M, sizeof(act_slot), "the activation slots");
    v->slot_of = (int *)host_calloc((size_t)M, sizeof(int), "the activation slots");
    v->crossed = (long *)host_calloc((size_t)CROSSING_KINDS * M, sizeof(long), "the crossings");
    v->crossings_ok = 1;
}

static void schedule_destroy(schedule_run *v)
{
    for (int k = 0; k < v->pool.allocated; k++) slot_destroy(&v->pool.slots[k]);
    free(v->pool.slots);
    free(v->ops);
    free(v->slot_of);
    free(v->crossed);
}

// --show-schedule: every stage's order of forwards and backwards, and nothing else (no GPU).
static int show_schedule(const train_options *o, schedule_kind kind, int stages, int micro_batches)
{
    mlp_shape s;
    mlp_shape_init(&s, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    step_op *ops = (step_op *)host_calloc((size_t)2 * micro_batches, sizeof(step_op), "the schedule");
    size_t size = (size_t)micro_batches * 16 + 16;
    char *text = (char *)host_alloc(size, "the schedule"), why[200];
    int ok = 1;
    printf("%s: the %s schedule of %d stage%s and %d micro-batches (Fm: micro-batch m's forward, Bm: its backward)\n",
           PROG, SCHEDULE_NAMES[kind], stages, stages == 1 ? "" : "s", micro_batches);
    for (int r = 0; r < stages; r++) {
        stage_shape st;
        stage_shape_init(&st, &s, r, stages, micro_batches);
        int n = schedule_build(kind, &st, ops);
        schedule_text(ops, n, text, size);
        printf("stage %d: %s\n", r, text);
        if (!schedule_is_sound(&st, ops, n, why, sizeof why)) {
            fprintf(stderr, "%s: stage %d: the %s schedule is wrong: %s%s\n", PROG, r, SCHEDULE_NAMES[kind], why,
                    kind == SCHEDULE_1F1B ? " (exercise 13-one-f-one-b)" : "");
            ok = 0;
        }
    }
    free(ops);
    free(text);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

// Options that depend on each other, on the model or on the number of ranks.
static void check_options(const dist_env *d, const train_options *o, const pipeline *pp, int stages,
                          int micro_batches, int showing)
{
    int layers = o->hidden_layers + 1;
    if (stages > layers)
        usage_error(d->name, "--stages %d: the model has %d weight layers (--layers %d hidden, and the output layer); "
                    "every stage needs one at least", stages, layers, o->hidden_layers);
    if (!showing && stages != d->world)
        usage_error(d->name, "--stages %d: this run has %d rank%s; every stage is a rank on a GPU of its own "
                    "(tools/launch -n %d ...)", stages, d->world, d->world == 1 ? "" : "s", stages);
    if (o->batch % micro_batches != 0)
        usage_error(d->name, "--batch %d is not divisible by --micro-batches %d: every micro-batch holds as many "
                    "samples", o->batch, micro_batches);
    if ((pp->fail_rank >= 0) != (pp->fail_at_batch >= 0))
        usage_error(d->name, "--fail-rank and --fail-at-batch go together: which rank stops, and at which batch");
    if (pp->fail_rank >= d->world)
        usage_error(d->name, "--fail-rank %d: there are %d ranks (0 to %d)", pp->fail_rank, d->world, d->world - 1);
    if (pp->fail_at_batch >= o->batches)
        usage_error(d->name, "--fail-at-batch %d: the run has %d batches", pp->fail_at_batch, o->batches);
}

int main(int argc, char **argv)
{
    // NCCL's kernels wait for their peers on the GPU; a stream that shared a hardware queue
    // with a waiting one would wait too, and could close a cycle. Enough queues for every
    // stream here (ours and NCCL's), unless the user chose: before the first CUDA call.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    train_options o;
    train_options_default(&o);
    pipeline pp;
    memset(&pp, 0, sizeof pp);
    pp.dist = &d;
    pp.fail_rank = pp.fail_at_batch = -1;
    int first = SCHEDULE_1F1B, stages = d.world, micro_batches = 8, showing = 0;
    double timeout_s = DIST_TIMEOUT_S;
    const char *rendezvous = NULL;
    arg_spec specs[40];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("stages", &stages, 1, MLP_MAX_LAYERS, "P",
                         "pipeline stages, one per rank (default: the number of ranks); 1 is the one-stage reference");
    specs[n++] =
        arg_int("micro-batches", &micro_batches, 1, 65536, "M", "micro-batches per batch (must divide --batch)");
    specs[n++] = arg_choice("schedule", &first, "1f1b|gpipe",
                            "the lesson's own schedule (both run, round-robin): one forward one backward, or all "
                            "forwards then all backwards");
    specs[n++] = arg_flag("show-schedule", &showing, "print every stage's order of forwards and backwards and stop "
                                                      "(no GPU; with --stages)");
    specs[n++] = arg_string("rendezvous", &rendezvous, "DIR",
                            "the folder every rank sees, where rank 0 leaves NCCL's id (default: $RENDEZVOUS_DIR)");
    specs[n++] = arg_double("timeout-s", &timeout_s, 1, 3600, "S", "give up waiting for another rank after this long");
    specs[n++] =
        arg_int("fail-rank", &pp.fail_rank, 0, 65535, "R", "with --fail-at-batch: this rank stops with an error");
    specs[n++] = arg_int("fail-at-batch", &pp.fail_at_batch, 0, 1000000, "N", "with --fail-rank: ... at this batch");
    args_parse(argc, argv, d.name,
               "Train an MLP cut into pipeline stages, one GPU each, on micro-batches (GPipe, 1F1B).", specs, n);
    check_options(&d, &o, &pp, stages, micro_batches, showing);
    if (showing) return show_schedule(&o, (schedule_kind)first, stages, micro_batches);
    dist_configure(&d, rendezvous, timeout_s);

    train_options mine = o;
    mine.json = o.json && d.rank == 0;  // rank 0 writes the JSON, with every stage's figures in it
    char trace_path[1100];
    if (o.trace_path) {
        dist_rank_path(&d, o.trace_path, trace_path, sizeof trace_path);
        mine.trace_path = trace_path;
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
    trainer_init(&t, d.name, &mine, HOST_SLOTS, 1, STEP_RING);
    dist_connect(&d);
    setup(&t, &pp, stages, micro_batches);

    part_times parts;
    profile_parts(&t, &pp, &parts);
    schedule_run own, other;
    schedule_create(&own, &pp, (schedule_kind)first);
    schedule_create(&other, &pp, first == SCHEDULE_1F1B ? SCHEDULE_GPIPE : SCHEDULE_1F1B);
    train_variant variants[2] = {{SCHEDULE_NAMES[own.kind], train_loop, &own},
                                 {SCHEDULE_NAMES[other.kind], train_loop, &other}};
    train_variant reference = {"reference", reference_loop, &pp};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = harness_run_with(&t, variants, 2, &x);
    schedule_run *runs[2] = {&own, &other};
    ok = stages_agree(&t, &pp, runs, &parts, &x, (schedule_kind)first, ok, out) && ok;  // every rank: a collective
    schedule_destroy(&own);
    schedule_destroy(&other);
    teardown(&pp);
    dist_finish(&d);
    return harness_finish(&t, ok);
}
