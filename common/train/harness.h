// harness.h: what runs, times, checks and reports a training lesson's loop. Not
// what the lessons teach: a lesson hands its loop over and reads the verdict.
//
// For every lesson the harness does the same, in this order:
//   1. a profile: each stage (host prep, copy, GPU step) alone, batch after batch;
//   2. the reference: the same training with the host waiting for every
//      operation before it issues the next, whose losses and weights every run
//      must match bit for bit;
//   3. the lesson's loop, and any variants of it (07: spinning and sleeping waits;
//      08: waiting one batch behind or not; 11: eager and graph), warm-up then
//      --reps rounds, one run of each variant per round, so that a slow moment
//      of a shared machine touches all of them alike;
//   4. the checks of every run, warm-up included: every loss taken exactly once,
//      losses and final weights identical to the reference;
//   5. the report: medians and spreads, the bound, the efficiency, --json.
#ifndef COMMON_HARNESS_H
#define COMMON_HARNESS_H

#include <stdio.h>

#include "common/train/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

// A lesson's loop over opt.batches batches. Returns 0, or -1 after writing why
// into t->error (lesson 10: a loader failed); the harness then stops the runs.
typedef int (*train_loop_fn)(trainer *t, void *ctx);

typedef struct {
    const char *name;  // "spin", "graph": JSON keys NAME_step_ms...; the timeline's phase of any but the first
    train_loop_fn loop;
    void *ctx;  // the lesson's state, passed to the loop
} train_variant;

#define HARNESS_MAX_VARIANTS 4

// Runs steps 1-5 for the variants (the first is the lesson's own loop) and prints
// the report. Returns 1 when every check of every run passed. With --json, keys
// of the first variant are unprefixed (step_ms, ...), every variant's are also
// written as NAME_step_ms, ...; a lesson may add keys after harness_run.
int harness_run(trainer *t, const train_variant *variants, int nvariants);

// Shorthand for a lesson with one loop.
int harness_run_loop(trainer *t, train_loop_fn loop, void *ctx);

// What a lesson may add to harness_run (lesson 12), and what it may read back.
typedef struct {
    // The run every run must match, instead of the harness's own (one GPU, the host
    // waiting for every batch): a loop the harness runs once in its place, with no
    // test delay. Lesson 12's ranks each train on a shard of the batch and average
    // their gradients: their reference is that, with the host waiting for every batch.
    const train_variant *reference;
    // The GPU's work of one step as the lesson's own loop issues it, timed alone for
    // the bound (lesson 11: a graph launch runs its kernels back to back, where a
    // step issued call by call leaves the GPU idle between kernels whenever the host
    // issues more slowly than the GPU runs). It issues batch 0's step, its copy
    // included, on `stream` and returns. NULL: the harness's own step.
    void (*profile_step)(trainer *t, cudaStream_t stream, void *ctx);
    void *profile_ctx;
    // Filled by harness_run_with: each variant's median step (ms per batch, in the
    // order given), and the GPU step alone (the profile's).
    double step_ms[HARNESS_MAX_VARIANTS];
    double gpu_ms;
} harness_extras;

// harness_run, with extras (NULL: none).
int harness_run_with(trainer *t, const train_variant *variants, int nvariants, harness_extras *x);

// Where one rank of a program of several (12 and later) writes, made of its trainer's options o
// (before trainer_init), which it leaves as they are. The program passes the parts on: json and
// trace_path into the options it builds its trainer with, human into the trainer (t.human).
typedef struct {
    int json;               // this rank writes the JSON: rank 0 alone, with every rank's figures in it
    char trace_path[1100];  // this rank's --trace file: "t.json" becomes "t.rank1.json", any other
                            // name gains ".rank1" (several ranks); "" when none
    FILE *report;           // where rank 0 reports for every rank (stderr under --json, else stdout); NULL above
    FILE *human;            // the harness's and the trace's report: report on rank 0, /dev/null above
} rank_outputs;
rank_outputs harness_rank_outputs(const char *name, int rank, int world,
                                  const train_options *o);  // `name`: its message

// The checksum of a run's losses, each as the float it was (the report's "losses" checksum;
// lessons 12 and 14 compare it across ranks).
uint64_t harness_loss_checksum(const double *losses, int n);

// Prints the trace report and the verdict, ends the JSON, frees the trainer;
// returns the exit code (0 when ok).
int harness_finish(trainer *t, int ok);

#ifdef __cplusplus
}
#endif
#endif
