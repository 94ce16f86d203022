// STUDENT VERSION of solutions/13_pipeline_parallel/pipeline.h, made by `make lessons` (checksum 2267373377)
// No exercise in this file, read it as it stands; the TODOs are in stages.cu, train.cu.
// pipeline.h: lesson 13's types, and what its files call in one another (the overview is
// in main.cu). stages.cu: the stages, the schedules, the activation slots; links.cu: the
// communicators between neighbouring stages; train.cu: one micro-batch's forward and backward
// through a stage, the training loop, the reference; report.cu: each part alone, the checks
// across stages, the report; main.cu: setup, options, main.
#ifndef PIPELINE_H
#define PIPELINE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"      // defines: arg_spec, arg_int, arg_choice, arg_flag, args_parse, usage_error
#include "common/base/check.h"     // defines: CUDA_CHECK, CUBLAS_CHECK
#include "common/dist/dist.h"      // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_connect,
                                   //          dist_event_wait, NCCL_CHECK, dist_split_ready, dist_close, dist_fail,
                                   //          dist_fault_inject, dist_allgather, dist_finish, dist_option_specs,
                                   //          dist_describe, DIST_HOW_TO_RUN, dist_describe_json, dist_fault_check,
                                   //          dist_fault_options, DIST_FAULT_WORDS, DIST_FAULT_HELP
#include "common/train/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_finish,
                                   //          harness_rank_outputs, rank_outputs
#include "common/base/json.h"      // defines: json_int, json_num, json_str, json_bool
#include "common/gpu/kernels.h"    // defines: launch_spin
#include "common/gpu/memory.h"     // defines: device_alloc, device_free, pinned_alloc, pinned_free, host_calloc,
                                   //          device_bytes_in_use, host_alloc
#include "common/base/timing.h"    // defines: host_now_ms, stats_of, parts_ms
#include "common/trace/trace.h"    // defines: trace_begin, trace_end, trace_name_stream
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_take_loss, test_delay, event_pending, HOST_SYNC,
                                   //          SLOT_WAIT, mlp_forward_layer, mlp_loss, mlp_backward_layer, mlp_update,
                                   //          dataset_prepare_shard, fnv1a, FNV1A_START, MLP_MAX_LAYERS, mlp_shape_init

#include "common/base/stderr_line.h"  // defines: stderr_line

#define HOST_SLOTS 2  // pinned batches, each cut into M micro-batch regions (lesson 08's two slots)
// batch i's step event and partial losses live in slot i % 3: the host waits for batch i-2 at
// the top of batch i, so three batches are in flight at most
#define STEP_RING 3
#define PART_REPS 5               // repetitions of each part timed alone
#define QUEUE_AHEAD_NS 2000000LL  // 2 ms of spinning before timed work: the host queues it all meanwhile
// every buffer in a slot starts on 256 bytes, as cudaMalloc's do: cuBLAS may choose its kernel
// by the alignment of its pointers, and so the bits
#define ALIGN_FLOATS 64

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
    cudaEvent_t wanted;     // compute: everything before this micro-batch's forward is done (--post-recv late)
    int micro_batch;        // the micro-batch it holds, -1 when free
} act_slot;

// The slots of one schedule. It allocates a slot only when a forward needs one and every
// slot it has holds a micro-batch whose backward has not been issued yet: what it allocated
// is what the schedule needed at most, measured, not assumed.
typedef struct {
    act_slot *slots;
    int allocated, capacity;  // capacity M: a batch never has more micro-batches alive
    int in_use, peak;
    size_t device_bytes;  // what the course's allocator handed out for the slots (memory.h)
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

// When a stage's receives start on the GPU (--post-recv): as soon as their buffer is free, or
// only once the compute stream has finished what comes before the work that reads them.
typedef enum { POST_RECV_EARLY, POST_RECV_LATE } recv_posting;

// How a stage posts its hand-overs (--p2p-group): each send and receive on its own, activations
// and errors on a communicator each; or Megatron-LM's way, one communicator for both directions,
// each send posted in one ncclGroupStart/End with the receive that follows it in the stage's order
// (send the activation and receive the error of a backward; send the error and receive the next
// forward's activation): one NCCL kernel moves both (links.cu).
typedef enum { P2P_APART, P2P_PAIRS } p2p_grouping;

// How the stage shares its SMs between NCCL's kernels and the products (--link-ctas,
// --gemm-sms; 0: NCCL's choice, every SM). links.cu and setup apply them; notes/13 measures them.
typedef struct {
    int link_ctas;
    int gemm_sms;
} sm_sharing;

typedef struct {
    dist_env *dist;
    recv_posting post_recv;  // --post-recv
    sm_sharing sharing;      // --link-ctas, --gemm-sms
    stage_shape st, whole;   // this rank's stage; one stage of every layer (the reference)
    link_pair *ln;           // NULL with one stage
    float *d_error_in[2];    // the error of the stage's output, from the next stage (ping-pong)
    float *d_error_out[2];   // the error of the stage's input, for the previous stage
    cudaEvent_t error_received[2], error_read[2], error_ready[2], error_sent[2];
    cudaEvent_t error_wanted[2];       // compute: everything before the backward that reads buffer k is done
    cudaEvent_t *host_copied;          // [HOST_SLOTS * M]: that pinned micro-batch region has been copied
    float *d_parts, *h_parts;          // [STEP_RING * M]: each micro-batch's share of the batch's loss
    cudaEvent_t step_done[STEP_RING];  // batch i's update (and its losses' copy) has finished
    cudaEvent_t links_idle[2];         // the last hand-overs of a run have finished (forward, backward)
    float *d_losses, *h_losses;        // the run's losses, broadcast from the last stage
    cudaEvent_t losses_landed;
    float *d_ref;            // the reference's activations: every layer, one micro-batch
    dist_fault fault;        // --fault error|hang, --fault-rank, --fault-at-batch
    p2p_grouping grouping;   // --p2p-group
    int group_open;          // P2P_PAIRS: a send is posted in a group not ended yet
    cudaEvent_t sent_event;  // ... and the event to record behind it once the group has ended
    cudaStream_t sent_stream;
} pipeline;

// One schedule, the loop's context: its order of operations on this stage, its pool, its counts.
typedef struct {
    int backward, micro_batch;
} step_op;

typedef struct {
    pipeline *pp;
    schedule_kind kind;
    step_op *ops;  // 2M: this stage's forwards and backwards, in the order they are issued
    int nops;
    slot_pool pool;
    int *slot_of;      // [M]: the slot that holds micro-batch m
    long *crossed;     // [CROSSING_KINDS * M], this run
    int crossings_ok;  // in every run so far, each micro-batch crossed each boundary once each way
    char crossing_problem[160];
    long act_sent, error_sent;  // this stage's sends in the last run
    long pairs;                 // P2P_PAIRS: the sends posted in one group with a receive, last run
} schedule_run;

typedef struct {
    double forward_ms, backward_ms, update_ms;  // one micro-batch through this stage, alone; the update
} part_times;

// What every rank tells rank 0 after the runs (dist_allgather: the same layout everywhere).
typedef struct {
    uint64_t ok;                              // this rank's own checks
    uint64_t layer_sums[MLP_MAX_LAYERS + 1];  // the checksum of each of its layers
    uint64_t peak_slots[2], crossings_ok[2];  // per schedule, by its kind (SCHEDULE_1F1B, SCHEDULE_GPIPE)
    uint64_t act_sent[2], error_sent[2];
    uint64_t slot_bytes;
    uint64_t act_device_bytes[2];  // per schedule: device memory its slots took, measured
    uint64_t p2p_pairs[2];         // per schedule: sends grouped with a receive (--p2p-group pairs), last run
    double forward_ms, backward_ms, update_ms;
} stage_report;

// ----------------------------------------------------------------------------
// small helpers of the stage layout (stages.cu has the rest)

static inline int stage_is_first(const stage_shape *st) { return st->rank == 0; }
static inline int stage_is_last(const stage_shape *st) { return st->rank == st->stages - 1; }

static inline size_t aligned(size_t floats) { return (floats + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }
static inline float *layer_input(const stage_shape *st, float *act, int l)
{
    return act + st->off[l - st->first_layer];
}
static inline float *layer_output(const stage_shape *st, float *act, int l)
{
    return act + st->off[l - st->first_layer + 1];
}
static inline float *stage_targets(const stage_shape *st, float *act) { return act + st->off[st->layers + 1]; }
// What crosses from the stage below (its input) and to the stage above (its output), in floats.
static inline size_t input_floats(const mlp_shape *s, const stage_shape *st)
{
    return (size_t)s->dims[st->first_layer - 1] * st->cols;
}
static inline size_t output_floats(const mlp_shape *s, const stage_shape *st)
{
    return (size_t)s->dims[st->last_layer] * st->cols;
}

// the links (links.cu)

// One hand-over between two stages: the NCCL call, checked, then counted per micro-batch and
// kind, so that each run can check that every micro-batch crossed once each way. Under
// --p2p-group pairs a send opens a group and the receive after it ends it (links.cu).
#define HAND_OVER(sched, kind, m, call)                                        \
    do {                                                                       \
        hand_over_begin((sched), (kind));                                      \
        NCCL_CHECK((sched)->pp->dist, call);                                   \
        hand_over_end((sched), (kind));                                        \
        (sched)->crossed[(int)(kind) * (sched)->pp->st.micro_batches + (m)]++; \
    } while (0)

// stages.cu: the stages, the schedules, the activation slots
void stage_shape_init(stage_shape *st, const mlp_shape *s, int rank, int stages, int micro_batches);
void stage_forward(mlp_model *model, const stage_shape *st, float *act, cudaStream_t stream);
void stage_backward(mlp_model *model, const stage_shape *st, float *act, const float *error_in, float *error_out,
                    float *loss, int accumulate, cudaStream_t stream);
float batch_loss(const float *parts, int micro_batches);
int schedule_build(schedule_kind kind, const stage_shape *st, step_op *ops);
int schedule_is_sound(const stage_shape *st, const step_op *ops, int n, char *why, size_t size);
void schedule_text(const step_op *ops, int n, char *out, size_t size);
void slot_destroy(act_slot *slot);
act_slot *pool_take(schedule_run *sched, int m);
void pool_return(schedule_run *sched, int m);

// links.cu
link_pair *links_open(dist_env *d, const device_info *dev, int link_ctas, p2p_grouping grouping);
// Around each hand-over's NCCL call (HAND_OVER): nothing apart; under --p2p-group pairs a send
// ends any group still open and opens one, and a receive ends the open group it joined.
void hand_over_begin(schedule_run *sched, crossing kind);
void hand_over_end(schedule_run *sched, crossing kind);
// After a send: record `event` on `stream` behind it; inside an open group, once the group has
// ended (an event recorded before ncclGroupEnd would come before the send's kernel).
void hand_over_record(pipeline *pp, cudaEvent_t event, cudaStream_t stream);
// Ends the open group, if any, and records what waits for it: before work that does not begin
// with a receive, before a hidden synchronisation (an allocation), at the end of the batch.
void links_group_close(pipeline *pp);
void links_connect(pipeline *pp, const mlp_shape *s);
void links_close(pipeline *pp);

// train.cu
int train_loop(trainer *t, void *ctx);
int reference_loop(trainer *t, void *ctx);

// report.cu
void profile_parts(trainer *t, pipeline *pp, part_times *p);
int stages_agree(trainer *t, pipeline *pp, schedule_run *runs[2], const part_times *parts, const harness_extras *x,
                 schedule_kind first, int ok, FILE *out);

#endif
