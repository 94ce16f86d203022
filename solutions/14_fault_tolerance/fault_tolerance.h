// fault_tolerance.h: lesson 14's types, and what its files call in one another (the overview
// is in main.cu). recorder.cu: the flight recorder (its own header: recorder.h); train.cu: lesson
// 12's data-parallel step and loop, every NCCL call recorded, the faults injected, the fingerprint check;
// checkpoint.cu: the atomic write, and the blocking checkpoint; snapshot.cu: the checkpoint that
// costs one copy (a snapshot on a stream of its own, written by a thread); writer.cu: that thread;
// interval.cu: when a checkpoint is due (--checkpoint-every auto: from what the first one cost);
// resume.cu: where a restart starts; report.cu: the checks across ranks and the report; main.cu:
// setup, options, main.
#ifndef FAULT_TOLERANCE_H
#define FAULT_TOLERANCE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"        // defines: arg_spec, arg_int, arg_string, arg_choice, args_parse, usage_error,
                                     //          parse_int
#include "common/base/check.h"       // defines: CUDA_CHECK, check_message
#include "common/recovery/ckpt.h"    // defines: ckpt_header, ckpt_manifest, ckpt_read_rank, ckpt_complete,
                                     //          ckpt_header_text, ckpt_trailer_text, ckpt_file_bytes, ckpt_rank_file,
                                     //          ckpt_manifest_file, ckpt_manifest_text, CKPT_MAX_RANKS, ckpt_folder,
                                     //          CKPT_EVERY_FIELD, ckpt_header_differs, ckpt_prune, ckpt_run_differs,
                                     //          ckpt_run_init, ckpt_sum, ckpt_sum_start, ckpt_sum_add, ckpt_sum_end,
                                     //          CKPT_HEADER_BYTES, CKPT_TRAILER_BYTES
#include "common/dist/dist.h"        // defines: dist_env, dist_init, dist_connect, dist_event_wait, dist_polled_wait,
                                     //          NCCL_CHECK, dist_fail, dist_finish, dist_describe, DIST_HOW_TO_RUN,
                                     //          dist_describe_json, dist_fault_check, dist_fault_options,
                                     //          dist_gather_begin, dist_gather_end, dist_waiting_start,
                                     //          dist_waiting_over, dist_abort
#include "common/recovery/flight.h"  // defines: flight_entry, flight_ring, flight_op, flight_write, flight_describe,
                                     //          FLIGHT_MAX_SLOTS
#include "common/train/harness.h"    // defines: harness_finish, rank_outputs
#include "common/base/json.h"        // defines: json_int, json_num, json_str, json_bool, json_hex
#include "common/gpu/memory.h"       // defines: pinned_alloc, pinned_free, host_calloc, device_alloc, device_free
#include "common/base/timing.h"      // defines: host_now_ms, time_gpu_work, event_ms, host_sleep_ms
#include "common/train/trainer.h"    // defines: trainer, train_options, trainer_take_loss, test_delay, HOST_SYNC,
                                     //          HOST_WAIT, mlp_shape_init, fnv1a, FNV1A_START, trace_begin, trace_end,
                                     //          trace_name_stream, trace_name_thread, train_option_specs,
                                     //          train_options_default

#include "common/base/stderr_line.h"  // defines: stderr_line

#include "recorder.h"  // defines: flight_recorder, RING_SLOTS, recorder_init, recorder_record, recorder_write,
                       //          recorder_allgather, recorder_stop_hook, recorder_destroy

// lesson 12's library (its solution, linked: the Makefile's STANDS_ON), its one face: its step
// (ddp_setup, ddp_step, ddp_average_losses, ddp_teardown, ddp_prepare_shard), its loop's copy
// (ddp_copy_batch), its options, a rank's bring-up, its checksums, lesson 08's loss ring
// (loss_ring_queue, loss_ring_interval), and its exercises: the bucket plan, each bucket's
// all-reduce issued after its gradients, the wait for it before the update
#include "12_data_parallel_overlap/ddp.h"  // defines: ddp_plan_buckets, ddp_issue_bucket, ddp_wait_reduced,
                                           //          ddp_options, ddp_options_default, ddp_step_option_specs,
                                           //          ddp_options_check, ddp_bucket_bytes, ddp_init, ddp_shard_of,
                                           //          ddp_rank_open, ddp_copy_batch, DDP_SLOTS, DDP_SHARD,
                                           //          DDP_LOSS_RING, DDP_SYNC_INTERVAL, DDP_MAX_BUCKETS,
                                           //          ddp_checksums_of

#define HELD_MAX 8            // complete checkpoints a rank tells the others it holds, the newest
#define FINGERPRINT_EVERY 10  // batches between two fingerprint checks, by default (a check before batch 0 too)
#define AUTO_FIRST 10         // --checkpoint-every auto: the first checkpoint after this many batches
#define AUTO_SPARE 1.5        // ... and the interval at least this many times the write's time
#define AUTO_MAX_COST 0.035   // ... and a checkpoint's cost, spread over it, at most this share of a step

// The faults --fault injects, on rank --fault-rank at batch --fault-at-batch, in the first
// attempt of a launch only (LAUNCH_ATTEMPT unset or 0): a restart runs clean.
typedef enum {
    FAULT_NONE,
    FAULT_KILL,          // SIGKILL of the rank once its step's first all-reduce is issued, held back
    FAULT_SKIP,          // the rank skips the step's first all-reduce
    FAULT_ORDER,         // the rank issues the step's buckets in the opposite order
    FAULT_TORN,          // the rank dies half way through writing its checkpoint (after that batch)
    FAULT_DISK_FULL,     // the rank's checkpoint write fails half way: no space left on the device
    FAULT_KILL_WRITING,  // snapshot: the writer stops half way through that checkpoint, and two batches
                         // later the rank is killed as FAULT_KILL kills it, its writer still mid-file
} fault_kind;            // --fault's words, in this order

// How a checkpoint is taken (--checkpoint-mode): the main thread copies the weights and writes the
// files while training waits (blocking), or a snapshot is copied on a stream of its own beside the
// next step and a thread writes it (snapshot).
typedef enum { CKPT_BLOCKING, CKPT_SNAPSHOT } ckpt_mode;  // --checkpoint-mode's words, in this order

// What a checkpoint that comes due while the one before is still being written does
// (--checkpoint-busy): the main thread waits for the writer, or the checkpoint is skipped.
typedef enum { BUSY_WAIT, BUSY_SKIP } ckpt_busy;  // --checkpoint-busy's words, in this order

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
    ddp_options dp;         // lesson 12's: --bucket-mib, --rendezvous, --timeout-s (ddp_step_option_specs)
    const char *ckpt_root;  // --checkpoint-dir: NULL when none (an empty one is none too)
    int ckpt_every;         // --checkpoint-every: 0 auto
    int ckpt_mode;          // --checkpoint-mode: a ckpt_mode
    int ckpt_busy;          // --checkpoint-busy: a ckpt_busy
    int write_delay_ms;     // --write-delay-ms: a test delay, before each rank's file is written
    int fingerprint_every;  // --fingerprint-every: 0 never
    int ring_slots;         // --ring-slots
    dist_fault fault;       // --fault (fault_kind's words), --fault-rank, --fault-at-batch: dist.h's parser
    int attempt;            // LAUNCH_ATTEMPT
} options;

// What a checkpoint costs, as --checkpoint-every auto measures it on the first one (interval.cu).
typedef struct {
    double step_ms;   // a batch, before the first checkpoint
    double stall_ms;  // the main thread held up by the checkpoint
    double copy_ms;   // the snapshot's copy (0: blocking, whose copy is in its stall)
    double write_ms;  // the writer: the rank's file, and rank 0's manifest and prune
} checkpoint_cost;

// What a checkpoint cost (report.cu): the main thread's time it was held up (its stall), the
// writer's time per rank file, the copy's, and how often one came due while another was written.
typedef struct {
    long due;               // checkpoints that came due
    long written;           // this rank's files written whole (rank 0: checkpoints completed, manifest last)
    long busy_waits;        // came due while the one before was being written: the main thread waited
    long busy_skips;        // ... and was skipped (--checkpoint-busy skip)
    long abandoned;         // rank 0: written, but another rank skipped it: no manifest
    double stall_ms;        // the main thread, held up by checkpoints, all together
    double busy_wait_ms;    // of which waiting for the writer
    double end_wait_ms;     // the wait at the end of the run for the last checkpoint's write
    double auto_wait_ms;    // --checkpoint-every auto: the wait, once, for the first checkpoint to be complete
    double write_ms;        // the rank files' writes (header, losses, checksum, write, fsync, rename), together
    double last_write_ms;   // the last one's
    double commit_ms;       // rank 0's second stage (the others' words, the manifest, the prune), together
    double last_commit_ms;  // the last one's
    double bytes_written;   // their bytes, together
    double copy_ms;         // the snapshots' copies (event-timed on their stream), together
    int copies;             // snapshots copied
    double d2h_pinned_gbs;  // the weights' copy into pinned memory, alone, measured at the start
    size_t bytes;           // one rank's file
} checkpoint_figures;

// The checkpoint writer (writer.cu): a thread that waits for a snapshot's copy, lays the rank's
// file out around it, writes it (write_atomically), says so to rank 0, and gives the image back;
// then, on rank 0, holding no image, it writes the manifest once every rank has, and prunes. One
// snapshot in flight at most: the pinned image. Every field below `lock` is read and written under it.
typedef struct checkpoint_writer {
    pthread_t thread;
    int started;
    int device;  // the rank's GPU: a new thread starts on device 0
    trainer *t;  // what the thread works on
    struct fault_tolerance *ft;
    pthread_mutex_t lock;
    pthread_cond_t wake;  // a job, or quit
    int busy;             // the image is in use: from the due point until this rank's file is written
    int committing;       // rank 0: the manifest and the prune of the checkpoint before are not done yet
    int job;              // the snapshot's copy is issued: the writer may wait for it
    int quit;
    int mid_file;     // --fault kill-writing: the writer has stopped half way through its file
    long batch;       // the checkpoint in flight
    long next_loss;   // its losses before this one came with the image, the rest with the ring's copy
    char error[600];  // why the writer failed ("" none): the main thread stops the run with it
} checkpoint_writer;

// The snapshot (snapshot.cu): batch i's state copied device to host on a stream of its own, after
// an event recorded behind batch i's update, while batch i+1's forward and backward run; batch
// i+1's update waits for the copy's event on the device (exercise 14-snapshot).
typedef struct {
    cudaStream_t stream;  // "snapshot" on the timeline
    cudaEvent_t updated;  // recorded behind the update of the batch the snapshot is of (compute stream)
    cudaEvent_t held;     // the test delays: the copies held back behind the next step's backward pass
    cudaEvent_t began;    // the copies begin (timing)
    cudaEvent_t copied;   // the copies are done (timing too)
    float *h_ring;        // pinned: the loss ring's slots, copied beside the weights
    int due;              // a snapshot is due before the next update
    long batch;           // the batch it is of
    long next_loss;       // the first loss the host has not taken yet: the ring holds it and those after
    long last_complete;   // the newest checkpoint this rank has finished (-1: none; under the writer's lock)
} snapshot;

// The checkpoints this run reads and writes (checkpoint.cu, snapshot.cu, writer.cu, resume.cu).
typedef struct {
    const char *root;          // --checkpoint-dir: NULL, no checkpoints
    int every;                 // --checkpoint-every, or the interval auto chose (0 until it has)
    int auto_every;            // --checkpoint-every auto
    long next_due;             // auto: the batch after which the next checkpoint is due
    long probe;                // auto: the batch of the first checkpoint, which measures (-1: not yet)
    double probe_t0_ms;        // auto: when the first batch trained was issued
    double probe_step_ms;      // auto: the step before the first checkpoint
    checkpoint_cost cost;      // auto: the figures the interval was chosen by, the ranks' worst
    double steady_t0_ms;       // when the steady state began: the loop's start, or auto's choice
    long steady_from;          // ... the first batch of it
    int mode;                  // a ckpt_mode
    int busy_rule;             // a ckpt_busy
    int write_delay_ms;        // --write-delay-ms
    ckpt_run run;              // every field that makes this run this run: another's checkpoint is refused
    long long held[HELD_MAX];  // the newest complete checkpoints this rank finds, newest first
    int held_n;
    // rank 0's prune: the checkpoints known whole without reading them back (the start verified
    // them, or this run wrote them: every writer handed rank 0 its file's size and sum), oldest first
    long long known[HELD_MAX];
    int known_n;
    long long resume_from;  // the checkpoint this run started from (-1: none)
    long start;             // the first batch this run trains
    // pinned: this rank's file as it will be written: header, weights, losses, trailer; the weights
    // land there from the GPU. Sized for the run's last checkpoint (the most losses).
    unsigned char *image;
    size_t image_bytes;
    cudaEvent_t params_copied;  // blocking: the weights have landed in the image
    snapshot snap;
    checkpoint_writer writer;
    checkpoint_figures fig;
} checkpointing;

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
    fault_plan fault;
    checkpointing ckpt;
    int fingerprint_every;  // --fingerprint-every: 0 never
    long fingerprint_checks;
    double fingerprint_ms;  // the main thread's time in the checks, all together
    fingerprint_exchange fp;
} fault_tolerance;

// 1 when fault `kind` fires now: this rank, this batch, the launch's first attempt.
static inline int fault_now(const fault_tolerance *ft, int kind, long batch)
{
    const fault_plan *p = &ft->fault;
    return p->kind == kind && ft->dist->rank == p->rank && batch == p->at_batch && p->attempt == 0;
}

// interval.cu
int auto_interval(const checkpoint_cost *c, int most);        // CheckFreq's rule: the interval, in batches
int checkpoint_due(trainer *t, fault_tolerance *ft, long i);  // a checkpoint after batch i; auto chooses when

// train.cu
void step_hooks(fault_tolerance *ft);  // lesson 12's step calls back into this lesson: the recorder, the faults
void fingerprint_setup(fault_tolerance *ft);
void fingerprint_teardown(fault_tolerance *ft);
int train_loop(trainer *t, fault_tolerance *ft);

// checkpoint.cu
int write_atomically(fault_tolerance *ft, const char *path, unsigned char *data, size_t size, uint64_t *sum,
                     long batch);
void image_loss(const trainer *t, fault_tolerance *ft, long k, double loss);  // batch k's loss into the image
int write_rank_file(fault_tolerance *ft, long batch, long long *size, uint64_t *sum);
int commit_checkpoint(fault_tolerance *ft, long batch, const long long *sizes, const uint64_t *sums, char *why,
                      size_t why_size);
void checkpoint_save(trainer *t, fault_tolerance *ft, long batch, long *next_loss);

// snapshot.cu
void checkpoints_setup(trainer *t, fault_tolerance *ft);  // the image, the snapshot's stream, the writer thread
void checkpoints_teardown(trainer *t, fault_tolerance *ft);
void snapshot_due(trainer *t, fault_tolerance *ft, long batch, long next_loss);  // a checkpoint after `batch`
void snapshot_copy(trainer *t, fault_tolerance *ft);        // before the next update (exercise 14-snapshot)
void snapshot_hand_over(fault_tolerance *ft);               // the copy is queued: the writer takes it from here
void writer_check(fault_tolerance *ft);                     // the main thread stops the run when the writer failed
void checkpoints_drain(trainer *t, fault_tolerance *ft);    // the end: the last checkpoint written, the writer gone
void checkpoints_settle(fault_tolerance *ft, int own_too);  // a fault waits for the checkpoints begun before it

// writer.cu
#define WORD_POLL_NS 200000    // how often rank 0's writer looks for the others' words, and a wait asks its writer
void nap(long ns);             // a short sleep between two polls
void *writer_main(void *arg);  // the checkpoint writer thread (arg: its checkpoint_writer)
void say_word(fault_tolerance *ft, long batch, const char *what, long long size, uint64_t sum, int err);  // to rank 0
void clear_words(fault_tolerance *ft, long batch);  // rank 0: the words of checkpoint `batch` removed
void writer_mid_file(fault_tolerance *ft);          // --fault kill-writing: the writer stops here
void wait_writer_mid_file(fault_tolerance *ft);     // ... and the main thread waits until it has

// resume.cu
void find_checkpoints(fault_tolerance *ft, int batches);  // before any GPU work: another run's is refused
long long agree_on_checkpoint(fault_tolerance *ft);       // once connected: the newest every rank holds
long restore(trainer *t, fault_tolerance *ft, long long batch);

// report.cu
int report(trainer *t, fault_tolerance *ft, double loop_ms, FILE *out);

#endif
