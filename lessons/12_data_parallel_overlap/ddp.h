// STUDENT VERSION of solutions/12_data_parallel_overlap/ddp.h, made by `make lessons` (checksum 2684769447)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// ddp.h: lesson 12's library, its one face: what lessons 14, 15 and 16 may use, every name ddp_.
// Every rank holds the whole model and trains on its shard of each batch; the backward pass
// produces the gradients last layer first, grouped into buckets; each bucket's all-reduce runs on
// a communication stream as soon as its gradients are written; each bucket's update waits for it.
//
// The library (the Makefile's LIBRARY and STANDS_ON; built from 12's solution, never a student's):
//   the state and the step's machinery (ddp.cu, ddp_plan.cu): the shard, the losses averaged, the
//       plan's check and text, the checksums the ranks compare;
//   the step itself and the loop (train.cu): the backward pass that hands each bucket to the hooks
//       as soon as it is ready, the step, lesson 08's loop around it, the reference;
//   the exercises (buckets.cu): the plan, each bucket's all-reduce and the wait for it, which the
//       step calls through its hooks; the options and the setup (options.cu); the checks (checks.cu).
// What is lesson 12's alone (its meet.cu, stop.cu, report.cu, main.cu: data_parallel.h) is not
// here: the lessons after it meet and stop through common/dist, as 13 does.
//
// Above common/ (the trainer, the harness, the bootstrap of several ranks) and lesson 08's loss ring.
#ifndef DDP_H
#define DDP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "08_interval_sync/loss_ring.h"  // defines: loss_ring
#include "common/base/args.h"            // defines: arg_spec
#include "common/dist/dist.h"            // defines: dist_env, dist_fault, dist_options
#include "common/train/harness.h"        // defines: rank_outputs
#include "common/train/trainer.h"        // defines: trainer, train_options, event_wait_fn, HOST_SYNC, trainer_forward,
                                         //          mlp_loss, mlp_backward_error, mlp_backward_weights,
                                         //          mlp_weights_checksum, batch_targets, dataset_prepare_shard

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_SLOTS 2                     // host and device batch slots (lesson 08)
#define DDP_MAX_BUCKETS MLP_MAX_LAYERS  // at most one bucket per layer
#define DDP_SHARD 512                   // samples per rank and batch, by default: --batch is 512 x ranks
#define DDP_SYNC_INTERVAL 10            // batches between two reads of the losses (lesson 08)
#define DDP_LOSS_RING (DDP_SYNC_INTERVAL + 1)

// When a bucket counts as ready (12's --ready-after): once the weight gradients of its lowest
// layer are written, or once that layer's whole backward (its error for the layer below too) is.
typedef enum { DDP_READY_WEIGHTS, DDP_READY_LAYER } ddp_ready_point;

// Bucket b holds layers first_layer[b] to last_layer[b]; its gradients are floats
// [first[b], first[b] + floats[b]) of d_grads. Bucket 0 is the last layer's.
typedef struct {
    int count;
    int first_layer[DDP_MAX_BUCKETS], last_layer[DDP_MAX_BUCKETS];
    size_t first[DDP_MAX_BUCKETS], floats[DDP_MAX_BUCKETS];
} ddp_bucket_plan;

typedef struct ddp_state ddp_state;

// Where the step calls back into the lesson.
typedef struct {
    // Bucket b's gradients are queued on the compute stream: issue its all-reduce on dp->comm_stream
    // once they are written, and record dp->reduced[b] behind it (ddp_issue_bucket).
    void (*issue)(trainer *t, ddp_state *dp, long batch, int b);
    // Before bucket b's update on the compute stream: wait there for its all-reduce, whose sum the
    // update reads (ddp_wait_reduced).
    void (*wait)(trainer *t, ddp_state *dp, int b);
    // The buckets this rank issues at batch `batch`, in order, into order[]; returns how many.
    // NULL: the plan's, each as soon as it is ready. Any other order, or fewer, and every bucket is
    // issued after the backward pass (14's faults).
    int (*order)(const ddp_state *dp, long batch, int *order);
    // Each collective the step issues besides the buckets (the losses' all-reduce), once queued on
    // `stream`, before any wait (14's flight recorder). NULL: nothing.
    void (*issued)(ddp_state *dp, long batch, size_t count, cudaStream_t stream);
    void *ctx;  // the lesson's own state, for its hooks
} ddp_hooks;

struct ddp_state {
    dist_env *dist;
    ddp_hooks hooks;
    int overlap;                     // 1: each bucket issued as soon as it is ready; 0: all after the backward pass
    ddp_ready_point ready_after;     // DDP_READY_WEIGHTS by default
    ddp_bucket_plan plan;            // the lesson's (12-bucket-plan)
    ncclComm_t grads;                // the gradients' communicator (12: split from the parent; 14: the parent)
    dist_fault fault;                // --fault error|hang, --fault-rank, --fault-at-batch
    cudaStream_t comm_stream;        // the all-reduces (high priority: they start as soon as they may)
    float *d_sum;                    // the gradients summed over the ranks: what the all-reduce writes
    mlp_model averaged;              // the model as the update sees it: gradients d_sum, rate lr / ranks
    cudaEvent_t copied[DDP_SLOTS];   // slot s's copy has finished (lesson 08)
    cudaEvent_t stepped[DDP_SLOTS];  // the step that read device slot s has finished (lesson 08)
    event_wait_fn wait;              // the lesson's polled host wait (its ctx: dist)
    loss_ring losses;                // lesson 08's loss ring, its waits `wait`
    cudaEvent_t grads_ready[DDP_MAX_BUCKETS];  // bucket b's gradients are written (compute stream)
    cudaEvent_t reduced[DDP_MAX_BUCKETS];      // bucket b's all-reduce has finished (communication stream)
    cudaEvent_t losses_averaged;               // the run's losses are averaged and back on the host
    float *h_losses, *d_losses;                // the run's losses, on their way through the all-reduce
};

// After the lesson has filled dist, hooks, grads and plan: checks the plan (a wrong one: one line
// naming what is wrong, exit code 1), then the communication stream, the buffers, the events and
// lesson 08's loss ring, whose host waits go through `wait` (the lesson's polled wait).
void ddp_setup(trainer *t, ddp_state *dp, event_wait_fn wait);
void ddp_teardown(ddp_state *dp);

// Host work: this rank's samples [rank * shard, (rank + 1) * shard) of batch i, the same bits as
// those columns of lesson 06's whole batch (a prep range on the timeline).
void ddp_prepare_shard(trainer *t, const ddp_state *dp, long i, float *h_batch);

// The loss of batch i into its ring slot, then every layer's gradients, last layer first, on
// `stream` (mlp_backward without its update). With issue, each bucket is handed to hooks.issue as
// soon as its gradients are queued: right after its lowest layer's weight gradients
// (DDP_READY_WEIGHTS), so that its all-reduce runs beside that layer's error product and everything
// below, or after that whole layer (DDP_READY_LAYER).
void ddp_backward(trainer *t, ddp_state *dp, long i, float *d_batch, cudaStream_t stream, int issue);

// Batch i's step: forward and backward on the compute stream, the buckets' all-reduces on the
// communication stream (each as soon as it is ready, or all after the backward pass), then each
// bucket's update, after hooks.wait.
void ddp_step(trainer *t, ddp_state *dp, long i, float *d_batch);

// Each rank took its own shard's losses; batch i's loss is their mean over the ranks (the shards
// are equal): one all-reduce of the whole run's losses on the parent communicator, at its end.
void ddp_average_losses(trainer *t, ddp_state *dp);

// Every parameter in exactly one bucket, the buckets in the order the backward pass finishes the
// layers. 1, or 0 with what is wrong in `why`.
int ddp_plan_is_sound(const mlp_shape *s, const ddp_bucket_plan *p, char *why, size_t size);
// "4-3|2|1": the layers of each bucket, in the order they are issued.
void ddp_plan_text(const ddp_bucket_plan *p, char *out, size_t size);

// What each rank tells the others after the runs: its final weights' and losses' checksums, and
// one flag (12: its own checks passed; 14: it took every loss once).
typedef struct {
    uint64_t weights, losses, flag;
} ddp_checksums;
ddp_checksums ddp_checksums_of(trainer *t, int flag);
// Over every rank's, in rank order: 1 when every rank's weights and losses are rank 0's; *flags 1
// when every flag is 1; `sums` every rank's weights checksum, comma-separated.
int ddp_checksums_agree(const ddp_checksums *all, int world, int *flags, char *sums, size_t size);

// ----------------------------------------------------------------------------
// the options (options.cu)

// What the gradients' communicator is told about the GPU it shares with the matrix products
// (--comm-ctas, --comm-policy): at most this many CTAs (thread blocks, each holding an SM) per
// NCCL kernel (0: NCCL chooses), and NCCL's CTA policy; and how many SMs cuBLAS sizes its
// products for (--gemm-sms; 0: every SM). ddp_open_gradient_comm and ddp_step_setup apply them; notes/12 measures them.
typedef struct {
    int comm_ctas;
    int efficiency;  // NCCL_CTA_POLICY_EFFICIENCY: "minimal number of CTAs", NCCL's words
    int gemm_sms;
    int nonblocking;  // --grad-comm nonblocking: the gradients' communicator issues from a thread, as the parent
} ddp_sharing;

// The step's options, lesson 12's and 15's (options.cu): --bucket-mib, --ready-after, --comm-ctas,
// --comm-policy, --gemm-sms, the bootstrap's --rendezvous and --timeout-s, the test faults --fault-*.
typedef struct {
    double bucket_mib;
    int ready_after;      // ddp_ready_point
    ddp_sharing sharing;  // (12 adds --grad-comm)
    dist_options dist;
    dist_fault fault;
} ddp_options;

void ddp_options_default(ddp_options *o);
// What every lesson on this step takes (14 too): --bucket-mib, --rendezvous, --timeout-s,
// appended to specs[*n]; ddp_bucket_bytes is --bucket-mib in bytes, said once.
void ddp_step_option_specs(ddp_options *o, arg_spec *specs, int *n);
size_t ddp_bucket_bytes(const ddp_options *o);
// The step's options (12's and 15's), appended to specs[*n]: ddp_step_option_specs's, then
// --ready-after, --comm-ctas, --comm-policy, --gemm-sms, --fault error|hang (dist.h).
void ddp_option_specs(ddp_options *o, arg_spec *specs, int *n);
// After args_parse: the bootstrap configured, then what depends on the ranks (the batch divisible,
// the faults) and on NCCL's version; a usage error (exit code 2) names what is wrong.
void ddp_options_check(dist_env *d, const ddp_options *o, const train_options *train);

// After trainer_init, before the ranks meet: --gemm-sms checked against the GPU, the plan
// (12-bucket-plan), the hooks through which the step calls lesson 12's other exercises
// (buckets.cu), then ddp_setup, its host waits polled (dist_polled_wait); cuBLAS sized for
// --gemm-sms. The gradients' communicator is the caller's, after the ranks have met.
void ddp_step_setup(trainer *t, ddp_state *dp, const ddp_options *o);
// The gradients' communicator, split from the parent (every rank in it, in the same order), told
// `sharing` (its CTAs, its policy), blocking unless sharing->nonblocking: once connected, an
// all-reduce only queues its kernel. Watched as the parent is (common/dist).
ncclComm_t ddp_open_gradient_comm(dist_env *d, const ddp_sharing *sharing);

// ----------------------------------------------------------------------------
// a rank's bring-up and end, the same in every lesson on this step

// The step's state, empty, on `d`, each bucket to be issued as soon as it is ready.
void ddp_init(ddp_state *dp, dist_env *d);
// This rank's trainer options, one shard of every batch of `whole` (its CPU check only on one
// rank: with several, rank 0 checks the whole batch, ddp_cpu_check_whole_batch), and where its
// outputs go (*outs, which shard's trace path points into): rank 0 reports for every rank. No GPU touched.
void ddp_shard_of(const dist_env *d, const train_options *whole, train_options *shard, rank_outputs *outs);
// This rank's GPU chosen, its trainer built for the shard: DDP_SLOTS batch slots, `loss_slots` losses.
void ddp_rank_open(dist_env *d, trainer *t, const train_options *shard, const rank_outputs *outs, int loss_slots);
// A normal end: the step's state freed, then every communicator finalized and destroyed, the parent
// last (dist_finish).
void ddp_rank_close(ddp_state *dp);

// ----------------------------------------------------------------------------
// the exercises (buckets.cu), the step's hooks

// The layers grouped into buckets in the order the backward pass finishes them (12-bucket-plan).
void ddp_plan_buckets(const mlp_shape *s, size_t bytes, ddp_bucket_plan *p);
// Floats [first, first + floats) of the gradients summed over the ranks into dp->d_sum, on
// `stream` (12-allreduce).
void ddp_allreduce_gradients(trainer *t, ddp_state *dp, size_t first, size_t floats, cudaStream_t stream);
// hooks.issue: bucket b's all-reduce on the communication stream, after its gradients (12-ready).
void ddp_issue_bucket(trainer *t, ddp_state *dp, long batch, int b);
// hooks.wait: the compute stream waits for bucket b's all-reduce before its update (12-update-wait).
void ddp_wait_reduced(trainer *t, ddp_state *dp, int b);

// ----------------------------------------------------------------------------
// the loop (train.cu) and the checks (checks.cu)

// Batch i prepared into host slot i % DDP_SLOTS (once its last copy has run), copied into device
// slot i % DDP_SLOTS (once the step that read it has run: stepped[], recorded by the caller after
// the step), and the compute stream made to wait for it. `first`: the run's first batch (0, or the
// batch after a checkpoint): the slots' waits begin DDP_SLOTS batches after it. Returns the slot.
float *ddp_copy_batch(trainer *t, ddp_state *dp, long i, long first);
// Lesson 08's loop on this rank's shard, each batch's step ddp_step; then the losses averaged.
// ctx: the data_parallel. The harness's variant (common/train/harness.h).
int ddp_train_loop(trainer *t, void *ctx);
// What every run must match: the same training with the host waiting for every batch, everything
// on the compute stream, the same buckets in the same order.
int ddp_reference_loop(trainer *t, void *ctx);
// Every rank's weights and losses against rank 0's, bit for bit, and every rank's own checks (ok):
// rank 0 says so on `out` and in the JSON. Returns 1 when both hold. A collective.
int ddp_ranks_agree(trainer *t, ddp_state *dp, int ok, FILE *out);
// With several ranks: rank 0's averaged losses against the CPU trained on the whole batch.
int ddp_cpu_check_whole_batch(trainer *t, const train_options *o, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
