// timing.h: the one place the course measures time.
//
// Device work is timed with CUDA events; host work with a monotonic clock.
// Every measurement is warmed up, repeated, and summarised by its median with
// the spread (min, max) kept beside it.
#ifndef COMMON_TIMING_H
#define COMMON_TIMING_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

double host_now_ms(void);     // monotonic wall clock, milliseconds
double process_cpu_ms(void);  // CPU time used by every thread of this process, milliseconds
long long host_now_ns(void);  // the same monotonic clock, nanoseconds: time limits kept in one integer
double wall_clock_s(void);    // the calendar's clock, seconds: what files in a shared folder are dated by
void host_sleep_ms(int ms);   // a nap between two polls

typedef struct {
    double median, min, max, mean;
    int n;
} stats;

// Summarises n samples (the array is left as it was).
stats stats_of(const double *samples, int n);

// Milliseconds from event a to event b (cudaEventElapsedTime), both recorded and b
// completed: the caller waits for it first (cudaEventSynchronize) where it may not be.
double event_ms(cudaEvent_t a, cudaEvent_t b);

// Repetition `rep` of a run of parts timed back to back between n events (all completed): part
// j took event_ms(ev[j], ev[j + 1]), written into samples[j][rep].
void parts_ms(const cudaEvent_t *ev, int n, double *const *samples, int rep);

// A piece of device work to time: it issues its work on any of the streams it
// was given and returns without synchronising.
typedef void (*gpu_work_fn)(void *ctx);

// Times `work` with events, fork-join style: a start event on streams[0] that
// every other stream waits on, and a stop event after streams[0] has waited on
// each other stream's last work. Runs `warmup` untimed repetitions first, then
// `reps` timed ones; each sample is in milliseconds.
stats time_gpu_work(gpu_work_fn work, void *ctx, cudaStream_t *streams, int nstreams, int warmup, int reps);

#ifdef __cplusplus
}
#endif
#endif
