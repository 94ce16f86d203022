// harness_internal.h: what the harness's own files share (harness.h is what
// lessons see): harness.c runs and times (steps 1-3), harness_check.c checks
// (step 4), harness_report.c reports (step 5). Each uses only those below it:
// harness.c, then harness_check.c, then harness_report.c.
#ifndef COMMON_HARNESS_INTERNAL_H
#define COMMON_HARNESS_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "common/train/harness.h"
#include "common/base/timing.h"  // stats

#define PROFILE_BATCHES 10
#define CPU_CHECK_TOLERANCE 1e-4  // relative, per batch loss

typedef struct {
    double prep_ms, h2d_ms, gpu_ms;  // each stage alone, per batch (medians)
} stage_times;

typedef struct {
    double *losses;
    uint64_t loss_sum, weights_sum;
} reference;

typedef struct {  // one run, per batch
    double step_ms, cpu_ms, prep_ms, blocked_ms, busy_ms, issue_ms;
} run_sample;

typedef struct {  // one variant, traced or (with --trace-overhead) not
    const train_variant *v;
    int untraced;
    char name[64];
    run_sample *samples;
    stats step, cpu, prep, blocked, busy, issue;
    double host_ms, bound_ms;
    long syncs, slot_waits;  // of its last run
} variant_result;

typedef struct {  // the verdict over every run
    long runs, bad_runs;
    int once, match, identical;
    uint64_t first_losses, first_weights;
    char first_problem[400];
    double *lesson_losses;  // the first checked run's losses, for --check-cpu
} verdict;

// ---- harness_check.c (stands on harness_report.c)

// Checks the run just ended against the reference, into the verdict; `k` is its
// round (negative: a warm-up).
void harness_check_run(trainer *t, const reference *ref, const char *name, int k, verdict *vd);
// The lesson's own losses against the CPU in double precision (--check-cpu):
// the largest relative difference (NaN if any loss is NaN), also reported.
double harness_cpu_check(trainer *t, const double *losses);

// ---- harness_report.c (the bottom: it uses no other file of the harness)

// Where the human-readable report goes: t->human, else stdout (stderr with --json).
FILE *harness_human(const trainer *t);
// The medians and spreads of a variant's runs, and its bound.
void harness_summarise(trainer *t, variant_result *r, const stage_times *st);
void harness_print_header(trainer *t);
void harness_print_results(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd);
void harness_write_json(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd,
                        double cpu_rel);

#endif
