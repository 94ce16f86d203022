// STUDENT VERSION of solutions/12_data_parallel_overlap/ddp.h, made by `make lessons` (checksum 2664890599)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// ddp.h: lesson 12's data-parallel step, for 12 and the lessons that link its library (14, 15). Every rank
// holds the whole model and trains on its shard of each batch; the backward pass produces the
// gradients last layer first, grouped into buckets; each bucket's all-reduce runs on a
// communication stream as soon as its gradients are written; each bucket's update waits for it.
//
// What this file holds is the machinery: the state (streams, buffers, events), the shard, the
// backward pass and the step, the losses averaged at the end, the plan's check and its text, the
// checksums the ranks compare. What lesson 12 teaches (its exercises) it does not: the step calls
// back into the lesson through its hooks where a bucket's gradients are ready (issue: 12-ready,
// 12-allreduce) and before a bucket's update (wait: 12-update-wait), and the lesson makes the
// plan (12-bucket-plan). Lessons 14 and 15 link lesson 12's library, built from its solution (the
// Makefile's LIBRARY and STANDS_ON); 14 adds its recording and its faults around the hooks: its
// hooks call 12's.
//
// Above common/ (the trainer, the harness, the bootstrap of several ranks) and lesson 08's loss ring.
#ifndef DDP_H
#define DDP_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "08_interval_sync/loss_ring.h"  // defines: loss_ring
#include "common/dist/dist.h"            // defines: dist_env, dist_fault
#include "common/train/trainer.h"        // defines: trainer, event_wait_fn, HOST_SYNC, trainer_forward, mlp_loss,
                                         //          mlp_backward_error, mlp_backward_weights, mlp_weights_checksum,
                                         //          batch_targets, dataset_prepare_shard

#ifdef __cplusplus
extern "C" {
#endif

#define DDP_SLOTS 2                     // host and device batch slots (lesson 08)
#define DDP_MAX_BUCKETS MLP_MAX_LAYERS  // at most one bucket per layer

// When a bucket counts as ready (12's --ready-after): once the weight gradients of its lowest
// layer are written, or once that layer's whole backward (its error for the layer below too) is.
typedef enum { READY_WEIGHTS, READY_LAYER } ready_point;

// Bucket b holds layers first_layer[b] to last_layer[b]; its gradients are floats
// [first[b], first[b] + floats[b]) of d_grads. Bucket 0 is the last layer's.
typedef struct {
    int count;
    int first_layer[DDP_MAX_BUCKETS], last_layer[DDP_MAX_BUCKETS];
    size_t first[DDP_MAX_BUCKETS], floats[DDP_MAX_BUCKETS];
} bucket_plan;

typedef struct data_parallel data_parallel;

// Where the step calls back into the lesson.
typedef struct {
    // Bucket b's gradients are queued on the compute stream: issue its all-reduce on dp->comm_stream
    // once they are written, and record dp->reduced[b] behind it (12's issue_bucket).
    void (*issue)(trainer *t, data_parallel *dp, long batch, int b);
    // Before bucket b's update on the compute stream: wait there for its all-reduce, whose sum the
    // update reads (12's wait_reduced).
    void (*wait)(trainer *t, data_parallel *dp, int b);
    // The buckets this rank issues at batch `batch`, in order, into order[]; returns how many.
    // NULL: the plan's, each as soon as it is ready. Any other order, or fewer, and every bucket is
    // issued after the backward pass (14's faults).
    int (*order)(const data_parallel *dp, long batch, int *order);
    // Each collective the step issues besides the buckets (the losses' all-reduce), once queued on
    // `stream`, before any wait (14's flight recorder). NULL: nothing.
    void (*issued)(data_parallel *dp, long batch, size_t count, cudaStream_t stream);
    void *ctx;  // the lesson's own state, for its hooks
} ddp_hooks;

struct data_parallel {
    dist_env *dist;
    ddp_hooks hooks;
    int overlap;                     // 1: each bucket issued as soon as it is ready; 0: all after the backward pass
    ready_point ready_after;         // READY_WEIGHTS by default
    bucket_plan plan;                // the lesson's (12-bucket-plan)
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
void ddp_setup(trainer *t, data_parallel *dp, event_wait_fn wait);
void ddp_teardown(data_parallel *dp);

// Host work: this rank's samples [rank * shard, (rank + 1) * shard) of batch i, the same bits as
// those columns of lesson 06's whole batch (a prep range on the timeline).
void ddp_prepare_shard(trainer *t, const data_parallel *dp, long i, float *h_batch);

// The loss of batch i into its ring slot, then every layer's gradients, last layer first, on
// `stream` (mlp_backward without its update). With issue, each bucket is handed to hooks.issue as
// soon as its gradients are queued: right after its lowest layer's weight gradients
// (READY_WEIGHTS), so that its all-reduce runs beside that layer's error product and everything
// below, or after that whole layer (READY_LAYER).
void ddp_backward(trainer *t, data_parallel *dp, long i, float *d_batch, cudaStream_t stream, int issue);

// Batch i's step: forward and backward on the compute stream, the buckets' all-reduces on the
// communication stream (each as soon as it is ready, or all after the backward pass), then each
// bucket's update, after hooks.wait.
void ddp_step(trainer *t, data_parallel *dp, long i, float *d_batch);

// Each rank took its own shard's losses; batch i's loss is their mean over the ranks (the shards
// are equal): one all-reduce of the whole run's losses on the parent communicator, at its end.
void ddp_average_losses(trainer *t, data_parallel *dp);

// Every parameter in exactly one bucket, the buckets in the order the backward pass finishes the
// layers. 1, or 0 with what is wrong in `why`.
int ddp_plan_is_sound(const mlp_shape *s, const bucket_plan *p, char *why, size_t size);
// "4-3|2|1": the layers of each bucket, in the order they are issued.
void ddp_plan_text(const bucket_plan *p, char *out, size_t size);

// What each rank tells the others after the runs: its final weights' and losses' checksums, and
// one flag (12: its own checks passed; 14: it took every loss once).
typedef struct {
    uint64_t weights, losses, flag;
} ddp_checksums;
ddp_checksums ddp_checksums_of(trainer *t, int flag);
// Over every rank's, in rank order: 1 when every rank's weights and losses are rank 0's; *flags 1
// when every flag is 1; `sums` every rank's weights checksum, comma-separated.
int ddp_checksums_agree(const ddp_checksums *all, int world, int *flags, char *sums, size_t size);

#ifdef __cplusplus
}
#endif
#endif
