// ckpt_report.h: what a run's checkpoints cost, as lesson 16 counts it while it trains, and what
// its report says of it: the stall, the copy, the writer's rate, how often one came due while
// another was written, the interval and what a failure loses at it (text and JSON). Not the
// lesson's idea: its figures. Host-only C.
#ifndef COMMON_CKPT_REPORT_H
#define COMMON_CKPT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "common/base/json.h"  // json_writer

#ifdef __cplusplus
extern "C" {
#endif

// What a checkpoint costs, as --checkpoint-every auto measures it on the first one.
typedef struct {
    double step_ms;   // a batch, before the first checkpoint
    double stall_ms;  // the main thread held up by the checkpoint
    double copy_ms;   // the snapshot's copy (0: blocking, whose copy is in its stall)
    double write_ms;  // the writer: the rank's file, and rank 0's manifest and prune
} ckpt_cost;

// What the checkpoints cost, counted as the run goes: the main thread's time they held it up (the
// stall), the writer's time per rank file, the copy's, how often one came due while another was written.
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
} ckpt_figures;

// How the run takes its checkpoints, beside what they cost.
typedef struct {
    int on;                  // --checkpoint-dir given
    int snapshot;            // --checkpoint-mode snapshot (else blocking)
    int busy_skip;           // --checkpoint-busy skip (else wait)
    int every;               // the interval (auto: the one it chose, 0 until it has)
    int auto_every;          // --checkpoint-every auto
    long probe;              // auto: the batch of the first checkpoint, which measured
    double spare, max_cost;  // auto's rule: the write within 1/spare of the interval, its cost at most max_cost
    ckpt_cost cost;          // auto: the figures it chose by, the ranks' worst
    size_t weights_bytes;    // one rank's weights: the copy alone's size
} ckpt_plan;

// The report's figures, per checkpoint and per batch.
typedef struct {
    double step_ms;         // per batch trained, the checkpoints' stalls apart
    double loop_step_ms;    // per batch trained, everything in
    double steady_step_ms;  // per batch in the steady state (after auto chose its interval), the end's wait apart
    double stall_ms;        // the main thread held up, per checkpoint due
    double copy_bound_ms;   // the weights' copy alone at the pinned rate measured in this run
    double write_ms;        // per rank file written
    double write_mbs;       // the writer's rate: bytes over time, from the landed copy to the file renamed
    double copy_ms;         // the snapshot's copy beside the training, per snapshot
    double ms_per_gb, share;
    long loss_batches;  // a failure loses at most this many batches: the interval, and a write's
} ckpt_verdict;

// From the figures and the loop: `trained` batches in loop_ms, the steady state `steady` batches in
// steady_ms.
ckpt_verdict ckpt_verdict_of(const ckpt_plan *p, const ckpt_figures *f, double loop_ms, long trained, double steady_ms,
                             long steady);
// The report's lines on the checkpoints (none when none came due), each ending with `not_perf`
// where it is a timing; and the JSON's keys (checkpoint_*, step_ms, loop_step_ms, steady_step_ms).
void ckpt_report_text(const ckpt_plan *p, const ckpt_figures *f, const ckpt_verdict *v, const char *not_perf,
                      FILE *out);
void ckpt_report_json(const ckpt_plan *p, const ckpt_figures *f, const ckpt_verdict *v, json_writer *js);

#ifdef __cplusplus
}
#endif
#endif
