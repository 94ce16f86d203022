// STUDENT VERSION of solutions/14_fault_tolerance/fault_tolerance.h, made by `make lessons` (checksum 3167489672)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// fault_tolerance.h: lesson 14's types, and what its files call in one another (the overview
// is in main.cu). recorder.cu: the flight recorder (its own header: recorder.h); train.cu: lesson
// 12's data-parallel step and loop, every NCCL call recorded, the faults injected, the fingerprint
// check; report.cu: the checks across ranks and the report; main.cu: setup, options, main.
#ifndef FAULT_TOLERANCE_H
#define FAULT_TOLERANCE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"        // defines: arg_spec, arg_int, args_parse
#include "common/base/check.h"       // defines: CUDA_CHECK
#include "common/dist/dist.h"        // defines: dist_env, dist_init, dist_connect, dist_event_wait, dist_polled_wait,
                                     //          NCCL_CHECK, dist_fail, dist_describe, DIST_HOW_TO_RUN,
                                     //          dist_describe_json, dist_fault_check,
                                     //          dist_fault_options, dist_fault_now, dist_fault_hold, dist_fault_kill,
                                     //          dist_launch_attempt, dist_hang, dist_gather_begin, dist_gather_end
#include "common/recovery/flight.h"  // defines: flight_entry, flight_ring, flight_op, flight_write, flight_describe,
                                     //          FLIGHT_MAX_SLOTS
#include "common/train/harness.h"    // defines: harness_finish, rank_outputs
#include "common/base/json.h"        // defines: json_int, json_num, json_str, json_bool, json_hex
#include "common/gpu/memory.h"       // defines: pinned_alloc, pinned_free, host_calloc, device_alloc, device_free
#include "common/base/timing.h"      // defines: host_now_ms
#include "common/train/trainer.h"    // defines: trainer, train_options, fnv1a, FNV1A_START, trace_begin, trace_end,
                                     //          train_option_specs, train_options_default

#include "common/base/stderr_line.h"  // defines: stderr_line

#include "recorder.h"  // defines: flight_recorder, RING_SLOTS, recorder_init, recorder_record, recorder_write,
                       //          recorder_allgather, recorder_stop_hook, recorder_destroy

// lesson 12's library (its solution, linked: the Makefile's STANDS_ON), its one face: its step
// (ddp_setup, ddp_step, ddp_average_losses, ddp_prepare_shard), its loop's copy
// (ddp_copy_batch), its options, a rank's bring-up, its checksums, lesson 08's loss ring
// (loss_ring_queue, loss_ring_interval), and its exercises: the bucket plan, each bucket's
// all-reduce issued after its gradients, the wait for it before the update
#include "12_data_parallel_overlap/ddp.h"  // defines: ddp_plan_buckets, ddp_issue_bucket, ddp_wait_reduced,
                                           //          ddp_options, ddp_options_default, ddp_step_option_specs,
                                           //          ddp_options_check, ddp_bucket_bytes, ddp_init, ddp_shard_of,
                                           //          ddp_rank_open, ddp_rank_close, ddp_copy_batch, DDP_SLOTS,
                                           //          DDP_SHARD, DDP_LOSS_RING, DDP_SYNC_INTERVAL,
                                           //          DDP_MAX_BUCKETS, ddp_checksums_of, ddp_checksums_agree

#define FINGERPRINT_EVERY 10  // batches between two fingerprint checks, by default (a check before batch 0 too)

// The faults --fault injects, on rank --fault-rank at batch --fault-at-batch, in the first
// attempt of a launch only (LAUNCH_ATTEMPT unset or 0): a restart runs clean.
typedef enum {
    FAULT_NONE,
    FAULT_KILL,   // SIGKILL of the rank once its step's first all-reduce is issued, held back
    FAULT_SKIP,   // the rank skips the step's first all-reduce
    FAULT_ORDER,  // the rank issues the step's buckets in the opposite order
    FAULT_HANG,   // the rank stops answering at the top of the batch, before its fingerprint check
} fault_kind;     // --fault's words, in this order

// What the command line says: the training options (of the whole batch), lesson 12's bucket
// size, the rendezvous, and lesson 14's own.
typedef struct {
    train_options train;
    ddp_options dp;         // lesson 12's: --bucket-mib, --rendezvous, --timeout-s (ddp_step_option_specs)
    int fingerprint_every;  // --fingerprint-every: 0 never
    int ring_slots;         // --ring-slots
    dist_fault fault;       // --fault (fault_kind's words), --fault-rank, --fault-at-batch, LAUNCH_ATTEMPT
} options;

// The fingerprint check's exchange, made once: a check allocates nothing (cudaFree and
// cudaFreeHost would wait for the whole device) and waits for its own all-gather alone.
typedef struct {
    unsigned char *d_all, *h_all;  // every rank's fingerprint, on the device and pinned
    size_t bytes;                  // one rank's
    cudaEvent_t landed;
} fingerprint_exchange;

// Lesson 14's state: lesson 12's step, and what this lesson adds to it.
typedef struct fault_tolerance {
    dist_env *dist;
    ddp_state dp;  // lesson 12's step (its ddp.h), its hooks 12's own (buckets.cu) with this lesson's around
    flight_recorder rec;
    dist_fault fault;       // --fault, and the launch's attempt
    int fingerprint_every;  // --fingerprint-every: 0 never
    long fingerprint_checks;
    double fingerprint_ms;  // the main thread's time in the checks, all together
    fingerprint_exchange fp;
} fault_tolerance;

// 1 when fault `kind` fires now: this rank, this batch, the launch's first attempt.
static inline int fault_now(const fault_tolerance *ft, int kind, long batch)
{
    return dist_fault_now(ft->dist, &ft->fault, kind, batch);
}

// train.cu
void step_hooks(fault_tolerance *ft);  // lesson 12's step calls back into this lesson: the recorder, the faults
void fingerprint_setup(fault_tolerance *ft);
void fingerprint_teardown(fault_tolerance *ft);
int train_loop(trainer *t, fault_tolerance *ft);

// report.cu
int report(trainer *t, fault_tolerance *ft, double loop_ms, FILE *out);

#endif
