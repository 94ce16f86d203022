// STUDENT VERSION of solutions/14_fault_tolerance/fault_tolerance.h, made by `make lessons` (checksum 3488042225)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, recorder.cu, resume.cu.
// fault_tolerance.h: lesson 14's types, and what its files call in one another (the overview
// is in main.cu). recorder.cu: the flight recorder; train.cu: lesson 12's data-parallel step
// and loop, every NCCL call recorded, the faults injected, the fingerprint check;
// checkpoint.cu: the atomic checkpoint; resume.cu: where a restart starts; main.cu: setup,
// options, the report, main.
#ifndef FAULT_TOLERANCE_H
#define FAULT_TOLERANCE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"     // defines: arg_spec, arg_int, arg_string, arg_choice, args_parse, usage_error
#include "common/check.h"    // defines: CUDA_CHECK
#include "common/ckpt.h"     // defines: ckpt_header, ckpt_manifest, ckpt_run, ckpt_run_init, ckpt_run_differs,
                             //          ckpt_header_differs, ckpt_encode, ckpt_read_rank, ckpt_latest, ckpt_prune,
                             //          ckpt_rank_file, ckpt_manifest_file, ckpt_manifest_text
#include "common/dist.h"     // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_connect,
                             //          dist_event_wait, dist_polled_wait, NCCL_CHECK, dist_fail,
                             //          dist_allgather_then, dist_finish, dist_describe, dist_rank_outputs,
                             //          DIST_HOW_TO_RUN
#include "common/flight.h"   // defines: flight_entry, flight_ring, flight_op, flight_write, flight_diverge
#include "common/harness.h"  // defines: harness_finish, harness_loss_checksum
#include "common/json.h"     // defines: json_int, json_num, json_str, json_bool
#include "common/memory.h"   // defines: device_alloc, pinned_alloc, host_calloc and their frees
#include "common/timing.h"   // defines: host_now_ms
#include "common/trainer.h"  // defines: trainer, train_options, trainer_init, trainer_forward, trainer_loss_slot,
                             //          trainer_take_loss, test_delay, event_pending, HOST_SYNC, SLOT_WAIT,
                             //          loss_ring, loss_ring_create, loss_ring_wait_with, loss_ring_queue,
                             //          loss_ring_interval; and
                             //          through model.h, mlp.h and data.h: mlp_loss, mlp_backward_layer,
                             //          mlp_update, mlp_weights_checksum, mlp_shape_init, dataset_prepare_shard,
                             //          fnv1a

#define SHARD 512         // samples per rank and batch, by default (lesson 12)
#define SLOTS 2           // host and device batch slots (lesson 08)
#define SYNC_INTERVAL 10  // batches between two reads of the losses (lesson 08)
#define LOSS_RING (SYNC_INTERVAL + 1)
#define MAX_BUCKETS MLP_MAX_LAYERS  // at most one bucket per layer
#define RING_SLOTS 256              // the flight recorder keeps this many calls, by default

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

typedef struct {
    int kind, rank, at_batch;
} fault_plan;

// Bucket b holds layers first_layer[b] to last_layer[b]: floats [first[b], first[b] + floats[b])
// of the gradients. Bucket 0 is the last layer's (lesson 12).
typedef struct {
    int count;
    int first_layer[MAX_BUCKETS], last_layer[MAX_BUCKETS];
    size_t first[MAX_BUCKETS], floats[MAX_BUCKETS];
} bucket_plan;

// Every communication call of this rank, the last `slots` of them kept: what it was, and an
// event recorded behind it on its stream, asked when the ring is written whether it has fired.
typedef struct {
    dist_env *dist;
    int slots;
    flight_entry *ring;     // entry of call `seq` at ring[seq % slots]
    cudaEvent_t *done;      // its completion event, at done[seq % slots]
    long long calls;        // calls recorded so far: the next one's seq
    long long collectives;  // collectives recorded so far: the next one's index (what NCCL pairs by)
    uint64_t hash;          // FNV-1a of every call's op, count and part: the fingerprint
    char path[1200];        // flight.RUN.rankR beside the rendezvous ("" where there is none)
    int written;            // the ring was written (the stop hook, or the end of the run)
} flight_recorder;

typedef struct {
    dist_env *dist;
    bucket_plan plan;
    cudaStream_t comm_stream;
    float *d_sum;                               // the gradients summed over the ranks
    mlp_model averaged;                         // the model as the update sees it: gradients d_sum, rate lr / ranks
    cudaEvent_t copied[SLOTS], stepped[SLOTS];  // lesson 08's
    loss_ring losses;                           // lesson 08's loss ring, its waits polled (dist_event_wait)
    cudaEvent_t grads_ready[MAX_BUCKETS], reduced[MAX_BUCKETS];  // lesson 12's
    cudaEvent_t params_copied;                                   // the weights have landed in h_params (a checkpoint)
    cudaEvent_t losses_averaged;
    float *h_losses, *d_losses;  // the run's losses, on their way through the all-reduce
    float *h_params;             // pinned: the weights on their way to a checkpoint
    flight_recorder rec;
    fault_plan fault;
    int attempt;            // LAUNCH_ATTEMPT: 0 the first run, 1 the first restart, ...
    int fingerprint_every;  // --fingerprint-every: 0 never
    long fingerprint_checks;
    const char *ckpt_root;  // --checkpoint-dir ("" or NULL: no checkpoints)
    int ckpt_every;         // --checkpoint-every
    long long resume_from;  // the checkpoint this run started from (-1: none)
    long start;             // the first batch this run trains
    long checkpoints;       // written by this run
    double ckpt_ms;         // their time, all together (host, every rank's own)
    size_t ckpt_bytes;      // one rank's file
    ckpt_run run;           // every field that makes this run this run: another's checkpoint is refused
} fault_tolerance;

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
void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p);
int train_loop(trainer *t, fault_tolerance *f);
int fault_now(const fault_tolerance *f, int kind, long batch);

// checkpoint.cu
int write_atomically(fault_tolerance *f, const char *path, const void *data, size_t size, long batch);
void checkpoint_save(trainer *t, fault_tolerance *f, long batch, long *next_loss);

// resume.cu
long long find_checkpoint(const fault_tolerance *f, int batches);
long restore(trainer *t, fault_tolerance *f, long long batch);

#endif
