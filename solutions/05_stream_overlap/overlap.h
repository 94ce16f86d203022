// overlap.h: what the files of lesson 05 share: the options, the workload, and
// one function per part. No exercise in it: the lesson and its solution include
// this same file.
#ifndef LESSON05_OVERLAP_H
#define LESSON05_OVERLAP_H

#include <stdio.h>  // FILE

#include <cuda_runtime.h>  // cudaStream_t

#include "common/gpu/device.h"   // defines: device_info
#include "common/base/json.h"    // defines: json_writer, json_num, json_int, json_bool, json_str
#include "common/base/timing.h"  // defines: stats, gpu_work_fn

#define PROG "05_stream_overlap"
#define MAX_STREAMS 32

// Where part 5's test hook holds work back (--delay-on).
typedef enum { DELAY_ON_COPY, DELAY_ON_COMPUTE } delay_point;

typedef struct {
    int size_mib, streams, chunks;
    int kernel_work;  // FMAs per element; 0 = chosen so that the kernel takes kernel_ratio x one copy
    double kernel_ratio;
    int reps, warmup;
    int batches;          // part 5
    int priority_trials;  // part 4
    int only;             // 0 = every part
    int delay_us;         // part 5's test hook: a spin this long before every --delay-on point of its checked run
    int delay_on;         // a delay_point
    int json, timeline;
    const char *trace_path;
} options;

static inline int runs_part(const options *o, int part) { return o->only == 0 || o->only == part; }
static inline int needs_data(const options *o) { return runs_part(o, 2) || runs_part(o, 3) || runs_part(o, 5); }

// The data: n floats, the same function applied to each.
typedef struct {
    int n;
    float *h_in;   // pinned input
    float *h_ref;  // pinned: the sequential run's output, which every other run must equal
    float *h_out;  // pinned: output of the run being checked
    float *d_in, *d_out;
    int work;               // fused multiply-adds per element in the kernel
    cudaStream_t *streams;  // non-blocking, at least 2: streams[1] is the second direction of both_copies
    int nstreams;           // --streams: the overlapped runs use streams[0 .. nstreams-1]
    int chunks;             // --chunks
} workload;

typedef struct {  // each stage over the whole array, timed alone, and both copies at once (ms)
    double h2d, kernel, d2h, duplex;
} stage_times;

// One thing to time round-robin: fn(ctx) issues its work on streams[0 .. nstreams-1].
typedef struct {
    gpu_work_fn fn;
    void *ctx;
    cudaStream_t *streams;
    int nstreams;
} variant;

// The text report on `out` (stderr with --json) and, with --json, one JSON object on stdout.
typedef struct {
    FILE *out;
    int json;
    json_writer js;
} report;

static inline void report_num(report *r, const char *key, double v)
{
    if (r->json) json_num(&r->js, key, v);
}
static inline void report_int(report *r, const char *key, long long v)
{
    if (r->json) json_int(&r->js, key, v);
}
static inline void report_bool(report *r, const char *key, int v)
{
    if (r->json) json_bool(&r->js, key, v);
}
static inline void report_str(report *r, const char *key, const char *v)
{
    if (r->json) json_str(&r->js, key, v);
}

// options.cu: the command line, and the sizes checked before anything is allocated (exit 2).
options parse_options(int argc, char **argv);
void check_host_memory(const options *o);
void check_device_memory(const options *o, const device_info *dev);

// fma_chain.cu: the kernel that is overlapped with the copies, and its host twin.
void launch_fma_chain(const float *d_in, float *d_out, int n, int work, cudaStream_t stream);
float fma_chain_host(float x, int work);

// workload.cu: the data, its three stages, the sequential run and the reference.
void workload_create(workload *w, const options *o);
void workload_destroy(workload *w);
void poison(workload *w);
long compare_bits(const char *what, const float *ref, const float *got, int n, FILE *out);
void h2d_only(void *w);
void kernel_only(void *w);
void d2h_only(void *w);
void both_copies(void *w);     // copy-in on streams[0] and copy-out on streams[1], at once
void run_sequential(void *w);  // the baseline: the three stages in order on streams[0]
int make_reference(workload *w, const options *o, report *r);

// harness.cu: timing several variants fairly, and checking one run.
void time_round_robin(const variant *v, int n, const options *o, stats *out);
long check_variant(const char *what, gpu_work_fn fn, workload *w, FILE *out);

// device_bandwidth.cu: part 1 (the device) and part 2 (pinned vs pageable bandwidth).
void part1_device(const device_info *dev, const options *o, report *r);
void part2_bandwidth(workload *w, const options *o, report *r);

// overlap.cu: part 3, the sequential run against two overlapped issue orders. Returns 1 when verified.
int part3_overlap(workload *w, const device_info *dev, const options *o, report *r);

// priority.cu: part 4, a probe kernel behind a flood, on streams of two priorities.
void part4_priority(const device_info *dev, const options *o, report *r);

// pipeline.cu: part 5, a copy stream and a compute stream ordered by events. Returns 1 when verified.
int part5_pipeline(workload *w, const options *o, report *r);

#endif
