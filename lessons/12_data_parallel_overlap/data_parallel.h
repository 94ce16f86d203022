// STUDENT VERSION of solutions/12_data_parallel_overlap/data_parallel.h, made by `make lessons` (checksum 1425544396)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// data_parallel.h: lesson 12's types, and what its files call in one another (the overview
// is in main.cu). meet.cu: how the ranks meet; stop.cu: how they stop, all of them when one
// fails, and at the end; buckets.cu (buckets.h): the exercises, the plan and each bucket's
// all-reduce, which ddp.h's step (ddp.cu, ddp_plan.cu) calls back into; train.cu: lesson 08's
// loop, the reference; report.cu: each part alone, the checks across ranks, the report;
// options.cu: the step's options and setup; main.cu: main. Every file but main.cu is lesson 12's
// library, which lessons 14 and 15 link (the Makefile's LIBRARY and STANDS_ON).
#ifndef DATA_PARALLEL_H
#define DATA_PARALLEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"            // the exercises, and through it ddp.h (the step) and lesson 08's loss ring
#include "options.h"            // the step's options: dp_options, sm_sharing, dp_option_specs, dp_options_check
#include "common/base/args.h"   // defines: arg_spec, arg_double, arg_choice, args_parse, usage_error, arg_int
#include "common/base/check.h"  // defines: CUDA_CHECK, CUBLAS_CHECK
#include "common/dist/dist.h"   // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_meet_begin,
                                //          dist_write_id, dist_read_id, dist_watch, dist_wait_issued, dist_connected,
                                //          dist_option_specs, NCCL_CHECK, dist_fault_inject, dist_finish,
                                //          dist_describe, DIST_HOW_TO_RUN, dist_abort, dist_describe_json,
                                //          dist_fault_check, dist_fault_options, DIST_FAULT_WORDS, DIST_FAULT_HELP,
                                //          dist_gather_begin, dist_gather_end,
                                //          dist_say_stop, dist_stop_begin, dist_unwatch, dist_waiting_over,
                                //          dist_waiting_start, dist_split_ready
#include "common/train/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_finish,
                                   //          harness_rank_outputs, rank_outputs
#include "common/base/json.h"      // defines: json_int, json_num, json_str, json_bool
#include "common/gpu/kernels.h"    // defines: launch_spin
#include "common/gpu/memory.h"     // defines: host_calloc
#include "common/base/timing.h"    // defines: stats_of, event_ms, parts_ms
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_loss_slot, trainer_take_loss, test_delay,
                                   //          event_pending, SLOT_WAIT, mlp_forward, mlp_update, mlp_shape_init,
                                   //          mlp_cpu_reference, dataset_init, batch_features, dataset_free

#define SHARD 512         // samples per rank and batch, by default: --batch is 512 x ranks
#define SLOTS DDP_SLOTS   // host and device batch slots (lesson 08)
#define SYNC_INTERVAL 10  // batches between two reads of the losses (lesson 08)
#define LOSS_RING (SYNC_INTERVAL + 1)
#define PART_REPS 5               // repetitions of each part timed alone
#define QUEUE_AHEAD_NS 2000000LL  // 2 ms of spinning before timed work: the host queues it all meanwhile

typedef enum { OVERLAP_BUCKETS, OVERLAP_NONE } overlap_mode;

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

// buckets.cu: buckets.h (the exercises: the plan, each bucket's all-reduce and its wait)

// options.cu: options.h, and
// After trainer_init, before the ranks meet: --gemm-sms checked against the GPU, the plan
// (12-bucket-plan), the hooks through which ddp.h's step calls this lesson's other exercises
// (buckets.cu), then the step's streams, buffers and events, its host waits polled (stop.cu);
// cuBLAS sized for --gemm-sms. The gradients' communicator (meet.cu) is the caller's, after.
void dp_setup(trainer *t, data_parallel *dp, const dp_options *o);

// train.cu
// Batch i prepared into host slot i % SLOTS (once its last copy has run), copied into device slot
// i % SLOTS (once the step that read it has run: stepped[], recorded by the caller after the step),
// and the compute stream made to wait for it. Returns that device slot. Lesson 15 calls it too.
float *copy_batch(trainer *t, data_parallel *dp, long i);
int train_loop(trainer *t, void *ctx);
int reference_loop(trainer *t, void *ctx);

// report.cu
void profile_parts(trainer *t, data_parallel *dp, part_times *p);
int ranks_agree(trainer *t, data_parallel *dp, int ok, FILE *out);
void report(trainer *t, const data_parallel *dp, const part_times *p, const harness_extras *x, overlap_mode first,
            int global_batch, const dp_options *o, FILE *out);
int cpu_check_whole_batch(trainer *t, const train_options *o, FILE *out);

#endif
