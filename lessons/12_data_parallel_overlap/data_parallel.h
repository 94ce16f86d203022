// STUDENT VERSION of solutions/12_data_parallel_overlap/data_parallel.h, made by `make lessons` (checksum 2182796135)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// data_parallel.h: lesson 12's types, and what its files call in one another (the overview
// is in main.cu). meet.cu: how the ranks meet; stop.cu: how they stop, all of them when one
// fails, and at the end; buckets.cu: the gradients grouped into buckets;
// train.cu: the rank's shard, the step with its all-reduces, the training loop, the reference;
// report.cu: each part alone, the checks across ranks, the report; main.cu: setup, options, main.
#ifndef DATA_PARALLEL_H
#define DATA_PARALLEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"     // defines: arg_spec, arg_double, arg_choice, args_parse, usage_error
#include "common/check.h"    // defines: CUDA_CHECK
#include "common/dist.h"     // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_meet_begin,
                             //          dist_write_id, dist_read_id, dist_watch, dist_wait_issued, dist_connected,
                             //          dist_option_specs, NCCL_CHECK, dist_fault_inject, dist_finish, dist_describe,
                             //          DIST_HOW_TO_RUN, dist_abort, dist_describe_json, dist_fault_check,
                             //          dist_fault_options, dist_gather_begin, dist_gather_end, dist_say_stop,
                             //          dist_stop_begin, dist_unwatch, dist_waiting_over, dist_waiting_start
#include "common/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_finish,
                             //          harness_loss_checksum, harness_rank_outputs
#include "common/json.h"     // defines: json_int, json_num, json_str, json_bool
#include "common/kernels.h"  // defines: launch_spin
#include "common/memory.h"   // defines: device_alloc, device_free, pinned_alloc, pinned_free, host_calloc
#include "common/timing.h"   // defines: host_now_ms, stats_of, event_ms, parts_ms
#include "common/trace.h"    // defines: trace_begin, trace_end, trace_name_stream
#include "common/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                             //          trainer_init, trainer_forward, trainer_loss_slot, trainer_take_loss,
                             //          test_delay, event_pending, HOST_SYNC, SLOT_WAIT, loss_ring, loss_ring_create,
                             //          loss_ring_wait_with, loss_ring_queue, loss_ring_interval, mlp_forward,
                             //          mlp_loss, mlp_backward_layer, mlp_update, mlp_weights_checksum, mlp_shape_init,
                             //          mlp_cpu_reference, dataset_prepare_shard, dataset_init, batch_features,
                             //          batch_targets, dataset_free, loss_ring_destroy

#define SHARD 512         // samples per rank and batch, by default: --batch is 512 x ranks
#define SLOTS 2           // host and device batch slots (lesson 08)
#define SYNC_INTERVAL 10  // batches between two reads of the losses (lesson 08)
#define LOSS_RING (SYNC_INTERVAL + 1)
#define MAX_BUCKETS MLP_MAX_LAYERS  // at most one bucket per layer
#define PART_REPS 5                 // repetitions of each part timed alone
#define QUEUE_AHEAD_NS 2000000LL    // 2 ms of spinning before timed work: the host queues it all meanwhile

typedef enum { OVERLAP_BUCKETS, OVERLAP_NONE } overlap_mode;
// When a bucket counts as ready (--ready-after): once the weight gradients of its lowest layer
// are written, or once that layer's whole backward (its error for the layer below too) is done.
typedef enum { READY_WEIGHTS, READY_LAYER } ready_point;

// What the gradients' communicator is told about the GPU it shares with the matrix products
// (--comm-ctas, --comm-policy): at most this many CTAs (thread blocks, each holding an SM) per
// NCCL kernel (0: NCCL chooses), and NCCL's CTA policy; and how many SMs cuBLAS sizes its
// products for (--gemm-sms; 0: every SM). meet.cu and setup apply them; notes/12 measures them.
typedef struct {
    int comm_ctas;
    int efficiency;  // NCCL_CTA_POLICY_EFFICIENCY: "minimal number of CTAs", NCCL's words
    int gemm_sms;
    int nonblocking;  // --grad-comm nonblocking: the gradients' communicator issues from a thread, as the parent
} sm_sharing;

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
    ready_point ready_after;  // --ready-after
    bucket_plan plan;
    ncclComm_t grads;                      // the gradients' all-reduces: blocking, CTAs capped (meet.cu)
    cudaStream_t comm_stream;              // the all-reduces (high priority: they start as soon as they may)
    float *d_sum;                          // the gradients summed over the ranks: what the all-reduce writes
    mlp_model averaged;                    // the model as the update sees it: gradients d_sum, rate lr / ranks
    cudaEvent_t copied[SLOTS];             // slot s's copy has finished (lesson 08)
    cudaEvent_t stepped[SLOTS];            // the step that read device slot s has finished (lesson 08)
    loss_ring losses;                      // lesson 08's loss ring, its waits polled (dist_event_wait)
    cudaEvent_t grads_ready[MAX_BUCKETS];  // bucket b's gradients are written (compute stream)
    cudaEvent_t reduced[MAX_BUCKETS];      // bucket b's all-reduce has finished (communication stream)
    cudaEvent_t ref_done;                  // the reference's batch has finished
    cudaEvent_t losses_averaged;           // the run's losses are averaged and back on the host
    cudaEvent_t lined_up;                  // every rank has reached line_up's one-float all-reduce (report.cu)
    float *h_losses, *d_losses;            // the run's losses, on their way through the all-reduce
    dist_fault fault;                      // --fail-rank, --fail-at-batch, --fail-how
} data_parallel;

typedef struct {
    double forward_ms, backward_ms, update_ms;  // the compute stream alone, one step
    double comm_ms;                             // every bucket's all-reduce, back to back, nothing else running
    double comm_one_ms;                         // the whole gradient in one all-reduce
    double backward_beside_ms;                  // the backward pass with every bucket's all-reduce beside it
} part_times;

// meet.cu
void meet_ranks(dist_env *d);
ncclComm_t open_gradient_comm(dist_env *d, const sm_sharing *sharing);

// stop.cu
void stop_all(dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
cudaError_t wait_polled(void *dist, cudaEvent_t event);
void leave_ranks(dist_env *d);

// buckets.cu
void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p);
int plan_is_sound(const mlp_shape *s, const bucket_plan *p, char *why, size_t size);
void plan_text(const bucket_plan *p, char *out, size_t size);

// train.cu
void prepare_shard(trainer *t, const data_parallel *dp, long i, float *h_batch);
void allreduce_gradients(trainer *t, data_parallel *dp, size_t first, size_t floats, cudaStream_t stream);
void backward_pass(trainer *t, data_parallel *dp, long i, float *d_batch, cudaStream_t stream, int issue_buckets);
int train_loop(trainer *t, void *ctx);
int reference_loop(trainer *t, void *ctx);

// report.cu
void profile_parts(trainer *t, data_parallel *dp, part_times *p);
int ranks_agree(trainer *t, data_parallel *dp, int ok, FILE *out);
void report(trainer *t, const data_parallel *dp, const part_times *p, const harness_extras *x, overlap_mode first,
            int global_batch, double bucket_mib, const sm_sharing *sharing, FILE *out);
int cpu_check_whole_batch(trainer *t, const train_options *o, FILE *out);

#endif
