// STUDENT VERSION of solutions/14_fault_tolerance/fault_tolerance.h, made by `make lessons` (checksum 2095223909)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, recorder.cu, resume.cu.
// fault_tolerance.h: lesson 14's types, and what its files call in one another (the overview
// is in main.cu). recorder.cu: the flight recorder; train.cu: lesson 12's data-parallel step
// and loop, every NCCL call recorded, the faults injected, the fingerprint check;
// checkpoint.cu: the atomic checkpoint; resume.cu: where a restart starts; report.cu: the
// checks across ranks and the report; main.cu: setup, options, main.
#ifndef FAULT_TOLERANCE_H
#define FAULT_TOLERANCE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"        // defines: arg_spec, arg_int, arg_string, args_parse, usage_error
#include "common/base/check.h"       // defines: CUDA_CHECK
#include "common/recovery/ckpt.h"    // defines: ckpt_header, ckpt_manifest, ckpt_encode, ckpt_read_rank, ckpt_complete,
                                     //          ckpt_rank_file, ckpt_manifest_file, ckpt_manifest_text, CKPT_MAX_RANKS,
                                     //          ckpt_folder, CKPT_EVERY_FIELD, ckpt_header_differs, ckpt_prune,
                                     //          ckpt_run_differs, ckpt_run_init
#include "common/dist/dist.h"        // defines: dist_env, dist_init, dist_select_device, dist_connect,
                                     //          dist_event_wait, dist_polled_wait, NCCL_CHECK, dist_fail, dist_finish,
                                     //          dist_describe, DIST_HOW_TO_RUN, dist_describe_json, dist_fault_check,
                                     //          dist_fault_options, dist_gather_begin, dist_gather_end
#include "common/recovery/flight.h"  // defines: flight_entry, flight_ring, flight_op, flight_write, flight_describe,
                                     //          FLIGHT_MAX_SLOTS
#include "common/train/harness.h"    // defines: harness_finish, harness_rank_outputs, rank_outputs
#include "common/base/json.h"        // defines: json_int, json_num, json_str, json_bool, json_hex
#include "common/gpu/memory.h"       // defines: pinned_alloc, pinned_free, host_calloc
#include "common/base/timing.h"      // defines: host_now_ms
#include "common/train/trainer.h"    // defines: trainer, train_options, trainer_init, trainer_take_loss, test_delay,
                                     //          event_pending, HOST_SYNC, SLOT_WAIT, mlp_shape_init, fnv1a,
                                     //          FNV1A_START, trace_begin, trace_end, train_option_specs,
                                     //          train_options_default

// lesson 12's library (its solution, linked: the Makefile's STANDS_ON): its step (ddp.h: DDP_MAX_BUCKETS,
// ddp_average_losses, ddp_checksums_agree, ddp_checksums_of, ddp_prepare_shard, ddp_setup, ddp_step,
// ddp_teardown), lesson 08's loss ring (loss_ring_queue, loss_ring_interval), and its exercises: the
// bucket plan, each bucket's all-reduce issued after its gradients, the wait for it before the update
#include "12_data_parallel_overlap/buckets.h"  // defines: plan_buckets, issue_bucket, wait_reduced
#include "12_data_parallel_overlap/options.h"  // defines: dp_options, dp_options_default, dp_step_option_specs,
                                               //          dp_options_check, dp_bucket_bytes

#define SHARD 512         // samples per rank and batch, by default (lesson 12)
#define SLOTS DDP_SLOTS   // host and device batch slots (lesson 08)
#define SYNC_INTERVAL 10  // batches between two reads of the losses (lesson 08)
#define LOSS_RING (SYNC_INTERVAL + 1)
#define RING_SLOTS 256  // the flight recorder keeps this many calls, by default
#define HELD_MAX 8      // complete checkpoints a rank tells the others it holds, the newest

// The faults --fault injects, on rank --fault-rank at batch --fault-at-batch, in the first
// attempt of a launch only (LAUNCH_ATTEMPT unset or 0): a restart runs clean.
typedef enum {
    FAULT_NONE,
    FAULT_KILL,       // SIGKILL of the rank once its step's first all-reduce is issued, held back
    FAULT_SKIP,       // the rank skips the step's first all-reduce
    FAULT_ORDER,      // the rank issues the step's buckets in the opposite order
    FAULT_TORN,       // the rank dies half way through writing its checkpoint (after that batch)
    FAULT_DISK_FULL,  // the rank's checkpoint write fails half way: no space left on the device
} fault_kind;         // --fault's words, in this order

// --fault, --fault-rank, --fault-at-batch, and the launch attempt they need: what strikes, where, when.
typedef struct {
    int kind;      // a fault_kind
    int rank;      // -1: none
    int at_batch;  // -1: none
    int attempt;   // LAUNCH_ATTEMPT: 0 the first run, 1 the first restart, ...
} fault_plan;

// What the command line says: the training options (of the whole batch), lesson 12's bucket
// size, the rendezvous, and lesson 14's own.
typedef struct {
    train_options train;
    dp_options dp;          // lesson 12's: --bucket-mib, --rendezvous, --timeout-s (dp_step_option_specs)
    const char *ckpt_root;  // --checkpoint-dir: NULL when none (an empty one is none too)
    int ckpt_every;         // --checkpoint-every
    int fingerprint_every;  // --fingerprint-every: 0 never
    int ring_slots;         // --ring-slots
    dist_fault fault;       // --fault (fault_kind's words), --fault-rank, --fault-at-batch: dist.h's parser
    int attempt;            // LAUNCH_ATTEMPT
} options;

// Every communication call of this rank, the last `slots` of them kept: what it was, and an
// event recorded behind it on its stream, asked when the ring is written whether it has fired.
typedef struct {
    dist_env *dist;
    int slots;
    flight_entry *ring;     // entry of call `seq` at ring[seq % slots]
    cudaEvent_t *done;      // its completion event, at done[seq % slots]
    long long calls;        // calls recorded so far: the next one's seq
    long long collectives;  // collectives recorded so far: the next one's index (what NCCL pairs by)
    uint64_t hash;          // FNV-1a of what every call was (op, count, bytes, part, batch): the fingerprint
    char path[1200];        // flight.RUN.rankR beside the rendezvous ("" where there is none)
    int written;            // the ring was written (the stop hook, or the end of the run)
    // The stop hook may copy the ring on the watchdog thread while the main thread, back from the
    // NCCL call it was in, records the next call: each says what it does before it looks at what
    // the other does (recorder.cu), so the copy never reads a slot being filled.
    int filling;  // the main thread is filling a slot
    int frozen;   // the ring is being written: nothing more is recorded
} flight_recorder;

// The checkpoints this run reads and writes (checkpoint.cu, resume.cu).
typedef struct {
    const char *root;          // --checkpoint-dir: NULL, no checkpoints
    int every;                 // --checkpoint-every
    ckpt_run run;              // every field that makes this run this run: another's checkpoint is refused
    long long held[HELD_MAX];  // the newest complete checkpoints this rank finds, newest first
    int held_n;
    long long resume_from;      // the checkpoint this run started from (-1: none)
    long start;                 // the first batch this run trains
    long written;               // checkpoints written by this run
    double ms;                  // their time, all together (host, every rank's own)
    size_t bytes;               // one rank's file
    float *h_params;            // pinned: the weights on their way to a checkpoint
    cudaEvent_t params_copied;  // the weights have landed in h_params
} checkpointing;

// Lesson 14's state: lesson 12's step, and what this lesson adds to it.
typedef struct {
    dist_env *dist;
    data_parallel dp;  // lesson 12's step (its ddp.h), its hooks 12's own (buckets.cu) with this lesson's around
    flight_recorder rec;
    fault_plan fault;
    checkpointing ckpt;
    int fingerprint_every;  // --fingerprint-every: 0 never
    long fingerprint_checks;
} fault_tolerance;

// 1 when fault `kind` fires now: this rank, this batch, the launch's first attempt.
static inline int fault_now(const fault_tolerance *ft, int kind, long batch)
{
    const fault_plan *p = &ft->fault;
    return p->kind == kind && ft->dist->rank == p->rank && batch == p->at_batch && p->attempt == 0;
}

// recorder.cu
void recorder_init(flight_recorder *r, dist_env *d, int slots);
void recorder_destroy(flight_recorder *r);
void recorder_record(flight_recorder *r, flight_op op, long batch, int part, size_t count, size_t elem_bytes, int peer,
                     cudaStream_t stream, const char *stream_name);
void recorder_write(flight_recorder *r, const char *why);
void recorder_allgather(flight_recorder *r, dist_env *d, long batch, const void *mine, void *all, size_t bytes,
                        cudaStream_t stream, const char *stream_name);
void recorder_stop_hook(void *ctx);  // dist_env's on_stop: the ring is written on any stop

// train.cu
void step_hooks(fault_tolerance *ft);  // lesson 12's step calls back into this lesson: the recorder, the faults
int train_loop(trainer *t, fault_tolerance *ft);

// checkpoint.cu
int write_atomically(fault_tolerance *ft, const char *path, const void *data, size_t size, long batch);
void checkpoint_save(trainer *t, fault_tolerance *ft, long batch, long *next_loss);

// resume.cu
void find_checkpoints(fault_tolerance *ft, int batches);  // before any GPU work: another run's is refused
long long agree_on_checkpoint(fault_tolerance *ft);       // once connected: the newest every rank holds
long restore(trainer *t, fault_tolerance *ft, long long batch);

// report.cu
int report(trainer *t, fault_tolerance *ft, double loop_ms, FILE *out);

#endif
