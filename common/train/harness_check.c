// harness_check.c: step 4 of the harness (harness.h): every run checked against
// the reference, loss by loss and bit for bit, and with --check-cpu against the CPU.
#include "common/train/harness_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu/memory.h"  // host_alloc

uint64_t harness_loss_checksum(const double *losses, int n)
{
    uint64_t h = FNV1A_START;
    for (int i = 0; i < n; i++) {
        float f = (float)losses[i];
        h = fnv1a(&f, sizeof f, h);
    }
    return h;
}

// Describes the first wrong loss of the run into buf; returns how many are wrong.
static long compare_losses(const trainer *t, const reference *ref, char *buf, size_t size)
{
    long bad = 0;
    for (int i = 0; i < t->opt.batches; i++) {
        float got = (float)t->run.losses[i], want = (float)ref->losses[i];
        if (t->run.taken[i] == 1 && memcmp(&got, &want, sizeof got) == 0) continue;
        if (bad++ > 0) continue;
        if (t->run.taken[i] == 0)
            snprintf(buf, size, "batch %d: loss never taken from the ring", i);
        else if (t->run.taken[i] > 1)
            snprintf(buf, size, "batch %d: loss taken %d times", i, t->run.taken[i]);
        else if (isnan(got))
            snprintf(buf, size, "batch %d: loss read before its copy landed (still poisoned)", i);
        else
            snprintf(buf, size, "batch %d: loss %.9g, the synchronous run gives %.9g: the losses diverge", i, got,
                     want);
    }
    return bad;
}

void harness_check_run(trainer *t, const reference *ref, const char *name, int k, verdict *vd)
{
    int n = t->opt.batches;
    char problem[160] = "";
    long bad = compare_losses(t, ref, problem, sizeof problem);
    uint64_t lsum = harness_loss_checksum(t->run.losses, n);
    uint64_t wsum = mlp_weights_checksum(&t->model, t->compute_stream);
    for (int i = 0; i < n; i++) vd->once = vd->once && t->run.taken[i] == 1;
    if (vd->runs == 0) {
        vd->first_losses = lsum;
        vd->first_weights = wsum;
        memcpy(vd->lesson_losses, t->run.losses, sizeof(double) * (size_t)n);
    } else if (lsum != vd->first_losses || wsum != vd->first_weights) {
        vd->identical = 0;
    }
    if (!bad && wsum != ref->weights_sum)
        snprintf(problem, sizeof problem, "the losses match but the final weights differ");
    vd->runs++;
    if (!problem[0]) return;
    vd->match = 0;
    if (vd->bad_runs++ == 0)
        snprintf(vd->first_problem, sizeof vd->first_problem, "%s, %s run %d: %s (%ld of %d losses wrong)", name,
                 k < 0 ? "warm-up" : "timed", k < 0 ? k + t->opt.warmup + 1 : k + 1, problem, bad, n);
}

// The lesson's own losses (not the reference run's) against the CPU in double
// precision. Returns the largest relative difference (NaN if any loss is NaN).
double harness_cpu_check(trainer *t, const double *losses)
{
    const train_options *o = &t->opt;
    double *cpu = (double *)host_alloc(sizeof(double) * (size_t)o->batches, "the CPU reference's losses");
    mlp_cpu_reference(&t->model.shape, (float)o->lr, (uint64_t)o->seed, &t->data, o->batches, cpu);
    double worst = 0;
    for (int i = 0; i < o->batches; i++) {
        double rel = fabs(losses[i] - cpu[i]) / fabs(cpu[i]);
        if (!(rel <= worst)) worst = rel;  // NaN-safe: a NaN makes it NaN
    }
    free(cpu);
    fprintf(harness_human(t), "  CPU reference: largest relative difference %.2e (%s %.0e)\n", worst,
            worst <= CPU_CHECK_TOLERANCE ? "within" : "NOT within", CPU_CHECK_TOLERANCE);
    return worst;
}
