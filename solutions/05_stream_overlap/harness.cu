// harness.cu: how lesson 05 times and checks its runs. Not what the lesson
// teaches: the parts hand their work over as gpu_work_fn's and read the result.
#include <stdlib.h>  // free

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/memory.h"   // defines: host_alloc
#include "common/base/timing.h"  // defines: stats, stats_of, time_gpu_work
#include "common/trace/trace.h"  // defines: trace_begin, trace_end, TL_RANGE_PHASE
#include "overlap.h"             // defines: variant, workload, options, poison, compare_bits

// Times n variants round-robin, one repetition of each per round: a slow moment
// of the machine (its PCIe link can be shared) then touches all of them alike,
// not one series. out[k] summarises variant k's --reps repetitions.
void time_round_robin(const variant *v, int n, const options *o, stats *out)
{
    double *samples = (double *)host_alloc(sizeof(double) * (size_t)n * (size_t)o->reps, "timings");
    for (int r = -o->warmup; r < o->reps; r++)
        for (int k = 0; k < n; k++) {
            stats one = time_gpu_work(v[k].fn, v[k].ctx, v[k].streams, v[k].nstreams, 0, 1);
            if (r >= 0) samples[(size_t)k * o->reps + r] = one.median;
        }
    for (int k = 0; k < n; k++) out[k] = stats_of(samples + (size_t)k * o->reps, o->reps);
    free(samples);
}

// Runs `fn` once on poisoned outputs and compares with the sequential result.
// This is also the run a trace shows, as a phase named `what` (a string literal).
long check_variant(const char *what, gpu_work_fn fn, workload *w, FILE *out)
{
    poison(w);
    trace_range phase = trace_begin(TL_RANGE_PHASE, what, -1);
    fn(w);
    CUDA_CHECK(cudaDeviceSynchronize());
    trace_end(&phase);
    return compare_bits(what, w->h_ref, w->h_out, w->n, out);
}
