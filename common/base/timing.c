// timing.c: host clocks (monotonic, CPU, calendar) and naps, sample statistics, the time between
// two events and fork-join event timing.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "common/base/timing.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/host_memory.h"  // host_alloc
#include "common/base/check.h"

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double host_now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
double process_cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }
double wall_clock_s(void) { return clock_ms(CLOCK_REALTIME) / 1e3; }

long long host_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void host_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

stats stats_of(const double *samples, int n)
{
    stats s = {0, 0, 0, 0, n};
    if (n <= 0) return s;
    double *sorted = host_alloc(sizeof(double) * (size_t)n, "statistics");
    memcpy(sorted, samples, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), compare_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += sorted[i];
    s.min = sorted[0];
    s.max = sorted[n - 1];
    s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    s.mean = sum / n;
    free(sorted);
    return s;
}

double event_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

void parts_ms(const cudaEvent_t *ev, int n, double *const *samples, int rep)
{
    for (int j = 0; j + 1 < n; j++) samples[j][rep] = event_ms(ev[j], ev[j + 1]);
}

stats time_gpu_work(gpu_work_fn work, void *ctx, cudaStream_t *streams, int nstreams, int warmup, int reps)
{
    cudaEvent_t start, stop, joined[64];
    if (nstreams > 64) nstreams = 64;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    for (int s = 0; s < nstreams; s++) CUDA_CHECK(cudaEventCreateWithFlags(&joined[s], cudaEventDisableTiming));

    double *samples = host_alloc(sizeof(double) * (size_t)(reps > 0 ? reps : 1), "timings");
    for (int r = -warmup; r < reps; r++) {
        CUDA_CHECK(cudaEventRecord(start, streams[0]));
        // fork: nothing on the other streams may start before the start event
        for (int s = 1; s < nstreams; s++) CUDA_CHECK(cudaStreamWaitEvent(streams[s], start, 0));
        work(ctx);
        // join: the stop event comes after the last work of every stream
        for (int s = 1; s < nstreams; s++) {
            CUDA_CHECK(cudaEventRecord(joined[s], streams[s]));
            CUDA_CHECK(cudaStreamWaitEvent(streams[0], joined[s], 0));
        }
        CUDA_CHECK(cudaEventRecord(stop, streams[0]));
        CUDA_CHECK(cudaEventSynchronize(stop));
        double ms = event_ms(start, stop);
        if (r >= 0) samples[r] = ms;
    }
    stats st = stats_of(samples, reps);
    free(samples);
    for (int s = 0; s < nstreams; s++) CUDA_CHECK(cudaEventDestroy(joined[s]));
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return st;
}
