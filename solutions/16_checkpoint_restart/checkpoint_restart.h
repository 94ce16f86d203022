// checkpoint_restart.h: lesson 16's types, and what its files call in one another (the overview
// is in main.cu). train.cu: lesson 12's loop from the resume point, its checkpoints, and the faults
// around 12's step; checkpoint.cu: the atomic write, and the blocking checkpoint; snapshot.cu: the
// checkpoint that costs one copy (a snapshot on a stream of its own, written by a thread);
// writer.cu: that thread; interval.cu: when a checkpoint is due (--checkpoint-every auto: from what
// the first one cost); resume.cu: where a restart starts; report.cu: the checks across ranks and
// the report; main.cu: setup, options, main.
#ifndef CHECKPOINT_RESTART_H
#define CHECKPOINT_RESTART_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"      // defines: arg_spec, args_parse, usage_error
#include "common/base/check.h"     // defines: CUDA_CHECK, check_message
#include "common/recovery/ckpt.h"  // defines: ckpt_header, ckpt_manifest, ckpt_read_rank, ckpt_resumable,
                                   //          ckpt_write_parts, ckpt_file_bytes, ckpt_rank_file, ckpt_manifest_file,
                                   //          ckpt_manifest_text, CKPT_MAX_RANKS, ckpt_folder, ckpt_header_differs,
                                   //          ckpt_prune, ckpt_run_init, CKPT_HEADER_BYTES, ckpt_words,
                                   //          ckpt_sync_folder, ckpt_image_header, ckpt_word, ckpt_word_say,
                                   //          ckpt_word_read, ckpt_words_clear, ckpt_held, ckpt_agree, CKPT_HELD
#include "common/dist/dist.h"      // defines: dist_env, dist_init, dist_connect, dist_event_wait,
                                   //          dist_fail, dist_describe, DIST_HOW_TO_RUN,
                                   //          dist_describe_json, dist_fault_check, dist_fault_options, dist_fault_now,
                                   //          dist_fault_hold, dist_fault_kill, dist_launch_attempt, dist_allgather,
                                   //          dist_polled_wait, dist_waiting_start, dist_waiting_watch
#include "common/train/harness.h"  // defines: harness_finish, rank_outputs
#include "common/base/json.h"      // defines: json_int, json_bool, json_hex
#include "common/gpu/memory.h"     // defines: pinned_alloc, pinned_free, host_calloc, pinned_copy_gbs
#include "common/base/timing.h"    // defines: host_now_ms, event_ms, host_sleep_ms
#include "common/train/trainer.h"  // defines: trainer, train_options, trainer_take_loss, test_delay,
                                   //          HOST_SYNC, HOST_WAIT, mlp_shape_init,
                                   //          trace_begin, trace_end, trace_name_stream, trace_name_thread,
                                   //          train_option_specs, train_options_default

#include "common/recovery/ckpt_options.h"  // defines: ckpt_options, ckpt_option_specs, ckpt_options_check,
                                           //          CKPT_SNAPSHOT, CKPT_BLOCKING, BUSY_SKIP
#include "common/recovery/ckpt_report.h"   // defines: ckpt_cost, ckpt_figures, ckpt_plan, ckpt_verdict,
                                           //          ckpt_verdict_of, ckpt_report_text, ckpt_report_json
#include "common/base/stderr_line.h"       // defines: stderr_line

// lesson 12's library (its solution, linked: the Makefile's STANDS_ON), its one face: its step
// (ddp_setup, ddp_step, ddp_average_losses), its loop's copy (ddp_copy_batch), its options, a rank's
// bring-up and end, its check across ranks, lesson 08's loss ring (loss_ring_queue,
// loss_ring_interval), and its exercises: the bucket plan, each bucket's all-reduce issued after its
// gradients, the wait for it before the update
#include "12_data_parallel_overlap/ddp.h"  // defines: ddp_plan_buckets, ddp_issue_bucket, ddp_wait_reduced,
                                           //          ddp_options, ddp_options_default, ddp_step_option_specs,
                                           //          ddp_options_check, ddp_bucket_bytes, ddp_init, ddp_shard_of,
                                           //          ddp_rank_open, ddp_rank_close, ddp_copy_batch, DDP_SHARD,
                                           //          DDP_LOSS_RING, DDP_SYNC_INTERVAL, ddp_checksums_of,
                                           //          ddp_ranks_agree

#define AUTO_FIRST 10        // --checkpoint-every auto: the first checkpoint after this many batches
#define AUTO_SPARE 1.5       // ... and the interval at least this many times the write's time
#define AUTO_MAX_COST 0.035  // ... and a checkpoint's cost, spread over it, at most this share of a step

// The faults --fault injects, on rank --fault-rank at batch --fault-at-batch, in the first
// attempt of a launch only (LAUNCH_ATTEMPT unset or 0): a restart runs clean.
typedef enum {
    FAULT_NONE,
    FAULT_KILL,          // SIGKILL of the rank once its step's first all-reduce is issued, held back
    FAULT_TORN,          // the rank dies half way through writing its checkpoint (after that batch)
    FAULT_DISK_FULL,     // the rank's checkpoint write fails half way: no space left on the device
    FAULT_KILL_WRITING,  // snapshot: the writer stops half way through that checkpoint, and two batches
                         // later the rank is killed as FAULT_KILL kills it, its writer still mid-file
} fault_kind;            // --fault's words, in this order

// What the command line says: the training options (of the whole batch), lesson 12's bucket
// size, the rendezvous, and lesson 16's own.
typedef struct {
    train_options train;
    ddp_options dp;     // lesson 12's: --bucket-mib, --rendezvous, --timeout-s (ddp_step_option_specs)
    ckpt_options ckpt;  // --checkpoint-dir, --checkpoint-every, --checkpoint-mode, --checkpoint-busy, --write-delay-ms
    dist_fault fault;   // --fault (fault_kind's words), --fault-rank, --fault-at-batch, LAUNCH_ATTEMPT
} options;

// The checkpoint writer (writer.cu): a thread that waits for a snapshot's copy, lays the rank's
// file out around it, writes it (write_atomically), says so to rank 0, and gives the image back;
// then, on rank 0, holding no image, it writes the manifest once every rank has, and prunes. One
// snapshot in flight at most: the pinned image. Every field below `lock` is read and written under it.
typedef struct checkpoint_writer {
    pthread_t thread;
    int started;
    int device;  // the rank's GPU: a new thread starts on device 0
    trainer *t;  // what the thread works on
    struct checkpoint_restart *cr;
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
// i+1's update waits for the copy's event on the device (exercise 16-snapshot).
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
    const char *root;           // --checkpoint-dir: NULL, no checkpoints
    int every;                  // --checkpoint-every, or the interval auto chose (0 until it has)
    int auto_every;             // --checkpoint-every auto
    long next_due;              // auto: the batch after which the next checkpoint is due
    long probe;                 // auto: the batch of the first checkpoint, which measures (-1: not yet)
    double probe_t0_ms;         // auto: when the first batch trained was issued
    double probe_step_ms;       // auto: the step before the first checkpoint
    ckpt_cost cost;             // auto: the figures the interval was chosen by, the ranks' worst
    double steady_t0_ms;        // when the steady state began: the loop's start, or auto's choice
    long steady_from;           // ... the first batch of it
    int mode;                   // a ckpt_mode
    int busy_rule;              // a ckpt_busy
    int write_delay_ms;         // --write-delay-ms
    ckpt_run run;               // every field that makes this run this run: another's checkpoint is refused
    long long held[CKPT_HELD];  // the newest complete checkpoints this rank finds, newest first
    int held_n;
    // rank 0's prune: the checkpoints known whole without reading them back (the start verified
    // them, or this run wrote them: every writer handed rank 0 its file's size and sum), oldest first
    long long known[CKPT_HELD];
    int known_n;
    long long resume_from;  // the checkpoint this run started from (-1: none)
    long start;             // the first batch this run trains
    // pinned: this rank's file as it will be written: header, weights, losses, trailer; the weights
    // land there from the GPU. Sized for the run's last checkpoint (the most losses).
    unsigned char *image;
    size_t image_bytes;
    cudaEvent_t params_copied;  // blocking: the weights have landed in the image
    ckpt_words words;           // snapshot: the writers' words to rank 0, in the rendezvous folder
    snapshot snap;
    checkpoint_writer writer;
    ckpt_figures fig;
} checkpointing;

// Lesson 16's state: lesson 12's step, and what this lesson adds to it.
typedef struct checkpoint_restart {
    dist_env *dist;
    ddp_state dp;      // lesson 12's step (its ddp.h), its hooks 12's own (buckets.cu) with this lesson's around
    dist_fault fault;  // --fault, and the launch's attempt
    checkpointing ckpt;
    long long calls;  // the NCCL calls this rank issued: a restart issues those of the batches it trains
} checkpoint_restart;

// 1 when fault `kind` fires now: this rank, this batch, the launch's first attempt.
static inline int fault_now(const checkpoint_restart *cr, int kind, long batch)
{
    return dist_fault_now(cr->dist, &cr->fault, kind, batch);
}

// interval.cu
int auto_interval(const ckpt_cost *c, int most);                 // CheckFreq's rule: the interval, in batches
int checkpoint_due(trainer *t, checkpoint_restart *cr, long i);  // a checkpoint after batch i; auto chooses when

// train.cu
void step_hooks(checkpoint_restart *cr);  // lesson 12's step calls back into this lesson: the snapshot, the faults
void gather(checkpoint_restart *cr, const void *mine, void *all, size_t bytes);  // every rank's, counted
double train_loop(trainer *t, checkpoint_restart *cr);                           // the run: its time, in ms

// checkpoint.cu
int write_atomically(checkpoint_restart *cr, const char *path, unsigned char *data, size_t size, uint64_t *sum,
                     long batch);
void image_loss(const trainer *t, checkpoint_restart *cr, long k, double loss);  // batch k's loss into the image
int write_rank_file(checkpoint_restart *cr, long batch, long long *size, uint64_t *sum);
int commit_checkpoint(checkpoint_restart *cr, long batch, const long long *sizes, const uint64_t *sums, char *why,
                      size_t why_size);
void checkpoint_save(trainer *t, checkpoint_restart *cr, long batch, long *next_loss);

// snapshot.cu
void checkpoints_setup(trainer *t, checkpoint_restart *cr);  // the image, the snapshot's stream, the writer thread
void checkpoints_teardown(trainer *t, checkpoint_restart *cr);
void snapshot_due(trainer *t, checkpoint_restart *cr, long batch, long next_loss);  // a checkpoint after `batch`
void snapshot_copy(trainer *t, checkpoint_restart *cr);        // before the next update (exercise 16-snapshot)
void snapshot_hand_over(checkpoint_restart *cr);               // the copy is queued: the writer takes it from here
void writer_check(checkpoint_restart *cr);                     // the main thread stops the run when the writer failed
void checkpoints_drain(trainer *t, checkpoint_restart *cr);    // the end: the last checkpoint written, the writer gone
void checkpoints_settle(checkpoint_restart *cr, int own_too);  // a fault waits for the checkpoints begun before it

// writer.cu
#define WORD_POLL_NS 200000    // how often rank 0's writer looks for the others' words, and a wait asks its writer
void nap(long ns);             // a short sleep between two polls
void *writer_main(void *arg);  // the checkpoint writer thread (arg: its checkpoint_writer)
void say_word(checkpoint_restart *cr, long batch, const char *what, long long size, uint64_t sum,
              int err);                             // to rank 0
void writer_mid_file(checkpoint_restart *cr);       // --fault kill-writing: the writer stops here
void wait_writer_mid_file(checkpoint_restart *cr);  // ... and the main thread waits until it has

// resume.cu
void find_checkpoints(checkpoint_restart *cr, int batches);  // before any GPU work: another run's is refused
long long agree_on_checkpoint(checkpoint_restart *cr);       // once connected: the newest every rank holds
long restore(trainer *t, checkpoint_restart *cr, long long batch);

// report.cu
int report(trainer *t, checkpoint_restart *cr, double loop_ms, FILE *out);

#endif
