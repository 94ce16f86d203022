// STUDENT VERSION of solutions/12_data_parallel_overlap/data_parallel.h, made by `make lessons` (checksum 4000221141)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// data_parallel.h: lesson 12's own files, beside its library (ddp.h: the step, the loop, the
// exercises, the options and the checks, which lessons 14, 15 and 16 link). meet.cu: how the ranks
// meet; stop.cu: how they stop at a normal end; report.cu: each part alone and the report;
// main.cu: main. The overview is in main.cu.
#ifndef DATA_PARALLEL_H
#define DATA_PARALLEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"                // the library: the step, the loop, the exercises, the options, the checks
#include "common/base/args.h"   // defines: arg_spec, arg_double, arg_choice, args_parse, usage_error, arg_int
#include "common/base/check.h"  // defines: CUDA_CHECK, CUBLAS_CHECK
#include "common/dist/dist.h"   // defines: dist_env, dist_init, dist_describe, dist_meet_begin, dist_write_id,
                                //          dist_read_id, dist_watch, dist_wait_issued, dist_connected, NCCL_CHECK,
                                //          dist_finish, DIST_HOW_TO_RUN, dist_abort, dist_describe_json, dist_unwatch,
                                //          dist_event_wait
#include "common/train/harness.h"  // defines: train_variant, harness_extras, harness_run_with, harness_finish
#include "common/base/json.h"      // defines: json_int, json_num, json_str, json_bool
#include "common/gpu/kernels.h"    // defines: launch_spin
#include "common/base/timing.h"    // defines: stats_of, event_ms, parts_ms
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs

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

// stop.cu
void leave_ranks(dist_env *d);

// report.cu
void profile_parts(trainer *t, ddp_state *dp, part_times *p);
void report(trainer *t, const ddp_state *dp, const part_times *p, const harness_extras *x, overlap_mode first,
            int global_batch, const ddp_options *o, FILE *out);

#endif
