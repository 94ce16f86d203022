// 05_stream_overlap: copies and kernels overlapped across CUDA streams, measured fairly.
//
// build: make build/solutions/05_stream_overlap
// run:   build/solutions/05_stream_overlap [--streams 4] [--chunks 32] [--only 3] [--json]
//
// part 1 reports the device: copy engines, concurrent kernels, priority range.
// part 2 measures host<->device bandwidth from pinned and from pageable memory.
// part 3 runs copy-in, kernel, copy-out sequentially on one stream, then cut into
//        chunks over several streams in two issue orders; both sides use pinned
//        memory, so the difference is the overlap alone. Results must match bit for bit.
// part 4 shows what stream priority does: a probe kernel queued behind a flood of
//        blocks, on a stream of equal priority and on the highest-priority stream.
// part 5 pipelines batches through two streams (copy, compute) ordered by events;
//        --no-wait drops the waits and the check catches the race.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/args.h"     // defines: arg_spec, args_parse, usage_error
#include "common/check.h"    // defines: CUDA_CHECK, EXERCISE_HELPER
#include "common/device.h"   // defines: device_info, gpu_open, device_report
#include "common/json.h"     // defines: json_writer, json_begin, json_num, ...
#include "common/kernels.h"  // defines: launch_fma_chain, fma_chain_host, launch_spin, launch_probe
#include "common/timing.h"   // defines: stats, time_gpu_work
#include "common/trace.h"    // defines: trace_start, trace_begin, trace_end, trace_finish, TRACE_PHASE

static const char *PROG = "05_stream_overlap";

typedef struct {
    int size_mib, streams, chunks, kernel_work, reps, warmup;
    double kernel_ratio;
    int batches, priority_trials, only, no_wait, json, timeline;
    const char *trace_path;
} options;

// ----------------------------------------------------------------------------
// The workload: n floats in pinned host memory, the same function applied to each.

typedef struct {
    int n;
    float *h_in;   // pinned input
    float *h_ref;  // pinned: the sequential run's output, checked against the host
    float *h_out;  // pinned: output of the run being checked
    float *d_in, *d_out;
    int work;      // fused multiply-adds per element in the kernel
} workload;

#define POISON_BYTE 0xFF  // every float byte 0xFF is a NaN: an unwritten element cannot pass

static void poison(workload *w)
{
    memset(w->h_out, POISON_BYTE, sizeof(float) * (size_t)w->n);
    CUDA_CHECK(cudaMemset(w->d_out, POISON_BYTE, sizeof(float) * (size_t)w->n));
    // cudaMemset runs on the legacy stream, which our non-blocking streams do not
    // wait for: finish it before anything else touches d_out
    CUDA_CHECK(cudaDeviceSynchronize());
}

// Compares bit for bit. Returns the number of differing elements and prints the
// first few; an element still holding the poison was never written.
static long compare_bits(const char *what, const float *ref, const float *got, int n, FILE *out)
{
    long bad = 0;
    for (int i = 0; i < n; i++) {
        if (memcmp(&ref[i], &got[i], sizeof(float)) == 0) continue;
        if (bad < 3) {
            unsigned bits;
            memcpy(&bits, &got[i], sizeof bits);
            if (bits == 0xFFFFFFFFu)
                fprintf(out, "  %s: element %d was never written (still poisoned)\n", what, i);
            else
                fprintf(out, "  %s: element %d is %.9g, expected %.9g\n", what, i, got[i], ref[i]);
        }
        bad++;
    }
    return bad;
}

// ----------------------------------------------------------------------------
// Part 2: pinned vs pageable bandwidth.

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaMemcpyKind kind;
    cudaStream_t stream;
} copy_job;

static void copy_once(void *p)
{
    copy_job *j = (copy_job *)p;
    // from pageable memory the driver stages through its own pinned buffer, and a
    // device-to-pageable copy returns only when done: "Async" in name only
    CUDA_CHECK(cudaMemcpyAsync(j->dst, j->src, j->bytes, j->kind, j->stream));
}

static double bandwidth_gbs(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream, const options *o)
{
    copy_job j = {dst, src, bytes, kind, stream};
    stats s = time_gpu_work(copy_once, &j, &stream, 1, o->warmup, o->reps);
    return bytes / (s.median * 1e-3) / 1e9;
}

static void copy_both_ways(void *p)
{
    copy_job *j = (copy_job *)p;
    copy_once(&j[0]);
    copy_once(&j[1]);
}

// Both directions at once on two streams: what overlapped copies can really get.
static double duplex_gbs(copy_job jobs[2], cudaStream_t *streams, const options *o)
{
    stats s = time_gpu_work(copy_both_ways, jobs, streams, 2, o->warmup, o->reps);
    return jobs[0].bytes / (s.median * 1e-3) / 1e9;  // per direction
}

// ----------------------------------------------------------------------------
// Part 3: sequential vs overlapped.

typedef struct {
    workload *w;
    cudaStream_t *streams;
    int nstreams, chunks;
} overlap_job;

static size_t chunk_begin(const overlap_job *j, int c) { return (size_t)j->w->n * c / j->chunks; }
EXERCISE_HELPER static int chunk_len(const overlap_job *j, int c)
{
    return (int)(chunk_begin(j, c + 1) - chunk_begin(j, c));
}

static void h2d_only(void *p)
{
    overlap_job *j = (overlap_job *)p;
    CUDA_CHECK(cudaMemcpyAsync(j->w->d_in, j->w->h_in, sizeof(float) * (size_t)j->w->n,
                               cudaMemcpyHostToDevice, j->streams[0]));
}

static void kernel_only(void *p)
{
    overlap_job *j = (overlap_job *)p;
    launch_fma_chain(j->w->d_in, j->w->d_out, j->w->n, j->w->work, j->streams[0]);
}

static void d2h_only(void *p)
{
    overlap_job *j = (overlap_job *)p;
    CUDA_CHECK(cudaMemcpyAsync(j->w->h_out, j->w->d_out, sizeof(float) * (size_t)j->w->n,
                               cudaMemcpyDeviceToHost, j->streams[0]));
}

// The baseline: everything in order on one stream, from and to pinned memory.
static void run_sequential(void *p)
{
    h2d_only(p);
    kernel_only(p);
    d2h_only(p);
}

// Issue order 1, per chunk: copy-in, kernel, copy-out of chunk c on stream c % nstreams.
static void run_overlapped_per_chunk(void *p)
{
    // BEGIN SOLUTION(05-per-chunk): every chunk goes through copy-in, kernel and copy-out on one stream, and the chunks take turns over the streams; chunk_begin and chunk_len give a chunk's range
    overlap_job *j = (overlap_job *)p;
    workload *w = j->w;
    for (int c = 0; c < j->chunks; c++) {
        cudaStream_t s = j->streams[c % j->nstreams];
        size_t at = chunk_begin(j, c);
        size_t bytes = sizeof(float) * (size_t)chunk_len(j, c);
        CUDA_CHECK(cudaMemcpyAsync(w->d_in + at, w->h_in + at, bytes, cudaMemcpyHostToDevice, s));
        launch_fma_chain(w->d_in + at, w->d_out + at, chunk_len(j, c), w->work, s);
        CUDA_CHECK(cudaMemcpyAsync(w->h_out + at, w->d_out + at, bytes, cudaMemcpyDeviceToHost, s));
    }
    //| (void)p;  // nothing issued yet: every chunk of the output stays poisoned
    // END SOLUTION
}

// Issue order 2, stage by stage: in rounds of nstreams chunks, all copy-ins of the
// round, then all its kernels, then all its copy-outs. Each stream sees the same
// sequence as in order 1; only the order in which the host issues them changes.
static void run_overlapped_by_stage(void *p)
{
    // BEGIN SOLUTION(05-by-stage): in rounds of nstreams chunks, issue every copy-in of the round, then every kernel, then every copy-out, each chunk on the same stream as in order 1
    overlap_job *j = (overlap_job *)p;
    workload *w = j->w;
    for (int first = 0; first < j->chunks; first += j->nstreams) {
        int last = first + j->nstreams < j->chunks ? first + j->nstreams : j->chunks;
        for (int c = first; c < last; c++) {
            size_t at = chunk_begin(j, c);
            CUDA_CHECK(cudaMemcpyAsync(w->d_in + at, w->h_in + at, sizeof(float) * chunk_len(j, c),
                                       cudaMemcpyHostToDevice, j->streams[c % j->nstreams]));
        }
        for (int c = first; c < last; c++) {
            size_t at = chunk_begin(j, c);
            launch_fma_chain(w->d_in + at, w->d_out + at, chunk_len(j, c), w->work,
                             j->streams[c % j->nstreams]);
        }
        for (int c = first; c < last; c++) {
            size_t at = chunk_begin(j, c);
            CUDA_CHECK(cudaMemcpyAsync(w->h_out + at, w->d_out + at, sizeof(float) * chunk_len(j, c),
                                       cudaMemcpyDeviceToHost, j->streams[c % j->nstreams]));
        }
    }
    //| (void)p;  // nothing issued yet: every chunk of the output stays poisoned
    // END SOLUTION
}

// Times the stages alone and the three ways of running them round-robin, one
// repetition of each per round: a slow moment of the machine (its PCIe link can
// be shared) then touches all of them alike, not one series. Returns the median
// of each in ms[], in the order of `fns`.
static void time_round_robin(gpu_work_fn *fns, int *nstreams, int n, overlap_job *j, const options *o,
                             stats *out)
{
    double *samples = (double *)malloc(sizeof(double) * (size_t)n * o->reps);
    for (int r = -o->warmup; r < o->reps; r++)
        for (int v = 0; v < n; v++) {
            stats one = time_gpu_work(fns[v], j, j->streams, nstreams[v], 0, 1);
            if (r >= 0) samples[(size_t)v * o->reps + r] = one.median;
        }
    for (int v = 0; v < n; v++) out[v] = stats_of(samples + (size_t)v * o->reps, o->reps);
    free(samples);
}

// Runs `fn` once on poisoned outputs and compares with the sequential result.
// This is also the run a trace shows, as a phase named `what`.
static long check_variant(const char *what, gpu_work_fn fn, overlap_job *j, FILE *out)
{
    poison(j->w);
    trace_range phase = trace_begin(TL_RANGE_PHASE, what, -1);
    fn(j);
    CUDA_CHECK(cudaDeviceSynchronize());
    trace_end(&phase);
    return compare_bits(what, j->w->h_ref, j->w->h_out, j->w->n, out);
}

// Chooses the kernel's work so that it takes `copy_ms` (the copies' mean time
// times --kernel-ratio): time it at two amounts of work and solve the straight line.
static int balance_kernel_work(overlap_job *j, double copy_ms, const options *o)
{
    const int w0 = 64, w1 = 1024;
    j->w->work = w0;
    double t0 = time_gpu_work(kernel_only, j, j->streams, 1, 1, o->reps).median;
    j->w->work = w1;
    double t1 = time_gpu_work(kernel_only, j, j->streams, 1, 1, o->reps).median;
    double per_work = (t1 - t0) / (w1 - w0);
    double work = per_work > 0 ? w0 + (copy_ms - t0) / per_work : w1;
    if (work < 1) work = 1;
    if (work > 1000000) work = 1000000;
    return (int)(work + 0.5);
}

// ----------------------------------------------------------------------------
// Part 4: stream priorities.

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

// Floods the GPU with short blocks on `flood`, then times one probe kernel on
// `probe` from the moment it is queued to its end. Returns microseconds.
static double probe_latency_us(cudaStream_t flood, cudaStream_t probe, int flood_blocks,
                               int *d_flag, cudaEvent_t queued, cudaEvent_t done)
{
    launch_spin(flood_blocks, 1024, 20000, flood);  // blocks of 20 us each, many waves
    sleep_us(200);                                  // let the flood fill every SM first
    CUDA_CHECK(cudaEventRecord(queued, probe));
    launch_probe(d_flag, 1, probe);
    CUDA_CHECK(cudaEventRecord(done, probe));
    CUDA_CHECK(cudaDeviceSynchronize());
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, queued, done));
    return ms * 1e3;
}

// ----------------------------------------------------------------------------
// Part 5: two streams, copy and compute, ordered by events.

typedef struct {
    workload *w;
    int batches, no_wait;
    cudaStream_t copy_stream, compute_stream;
    float *d_in_slot[2], *d_out_slot[2];  // two device slots of each kind: batch k uses slot k % 2
    cudaEvent_t in_ready[2];              // copy-in of the slot's batch has landed
    cudaEvent_t kernel_done[2];           // the kernel has read the in-slot and written the out-slot
    cudaEvent_t out_free[2];              // copy-out of the out-slot has finished
} pipeline_job;

static size_t batch_begin(const pipeline_job *p, int k) { return (size_t)p->w->n * k / p->batches; }
static int batch_len(const pipeline_job *p, int k)
{
    return (int)(batch_begin(p, k + 1) - batch_begin(p, k));
}

static void issue_copy_in(pipeline_job *p, int k)
{
    int slot = k % 2;
    // refill the in-slot only after the kernel that read batch k-2 from it; the
    // copy stream's own order already implies it here (copy-out k-2 waited on that
    // kernel), stated anyway so the rule survives moving copy-outs to a third stream
    if (!p->no_wait && k >= 2) CUDA_CHECK(cudaStreamWaitEvent(p->copy_stream, p->kernel_done[slot], 0));
    CUDA_CHECK(cudaMemcpyAsync(p->d_in_slot[slot], p->w->h_in + batch_begin(p, k),
                               sizeof(float) * batch_len(p, k), cudaMemcpyHostToDevice,
                               p->copy_stream));
    CUDA_CHECK(cudaEventRecord(p->in_ready[slot], p->copy_stream));
}

// Batch k: kernel after its copy-in, copy-out after its kernel. Batch k+1's
// copy-in is issued before batch k's copy-out so that it runs under kernel k.
static void run_pipeline(void *arg)
{
    pipeline_job *p = (pipeline_job *)arg;
    issue_copy_in(p, 0);
    for (int k = 0; k < p->batches; k++) {
        int slot = k % 2;
        if (k + 1 < p->batches) issue_copy_in(p, k + 1);
        if (!p->no_wait) {
            // BEGIN SOLUTION(05-kernel-wait): kernel k reads its in-slot: which event says that batch k's copy-in has landed, and how does the compute stream wait for it without the host?
            CUDA_CHECK(cudaStreamWaitEvent(p->compute_stream, p->in_ready[slot], 0));
            // END SOLUTION
            // the out-slot is rewritten only after copy-out k-2 has read it (implied
            // here too once kernel k waits for copy-in k, which came after that copy-out)
            if (k >= 2) CUDA_CHECK(cudaStreamWaitEvent(p->compute_stream, p->out_free[slot], 0));
        }
        launch_fma_chain(p->d_in_slot[slot], p->d_out_slot[slot], batch_len(p, k), p->w->work,
                         p->compute_stream);
        CUDA_CHECK(cudaEventRecord(p->kernel_done[slot], p->compute_stream));
        if (!p->no_wait) {
            // BEGIN SOLUTION(05-copy-out-wait): copy-out k reads the out-slot: which event says kernel k has written it, and which stream must wait for it?
            CUDA_CHECK(cudaStreamWaitEvent(p->copy_stream, p->kernel_done[slot], 0));
            // END SOLUTION
        }
        CUDA_CHECK(cudaMemcpyAsync(p->w->h_out + batch_begin(p, k), p->d_out_slot[slot],
                                   sizeof(float) * batch_len(p, k), cudaMemcpyDeviceToHost,
                                   p->copy_stream));
        CUDA_CHECK(cudaEventRecord(p->out_free[slot], p->copy_stream));
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    options o = {256, 4, 32, 0, 10, 2, 1.15, 8, 50, 0, 0, 0, 0, NULL};
    const arg_spec specs[] = {
        {"size-mib", ARG_INT, &o.size_mib, 1, 4096, "MIB", "data size, each direction"},
        {"streams", ARG_INT, &o.streams, 1, 32, "N", "streams for the overlapped runs"},
        {"chunks", ARG_INT, &o.chunks, 1, 4096, "N", "chunks the data is cut into"},
        {"kernel-work", ARG_INT, &o.kernel_work, 0, 1000000, "N",
         "FMAs per element; 0 = chosen by --kernel-ratio"},
        {"kernel-ratio", ARG_DOUBLE, &o.kernel_ratio, 0.01, 100, "X",
         "with --kernel-work 0: the kernel takes X times one copy (notes/05 says why not 1)"},
        {"reps", ARG_INT, &o.reps, 1, 1000, "N", "timed repetitions (the median is reported)"},
        {"warmup", ARG_INT, &o.warmup, 0, 100, "N", "untimed repetitions first"},
        {"batches", ARG_INT, &o.batches, 2, 4096, "K", "batches in the two-stream pipeline (part 5)"},
        {"priority-trials", ARG_INT, &o.priority_trials, 1, 10000, "N", "probe launches per stream (part 4)"},
        {"only", ARG_INT, &o.only, 0, 5, "PART", "run only this part (0 = all)"},
        {"no-wait", ARG_FLAG, &o.no_wait, 0, 0, NULL, "part 5 without its event waits (a race)"},
        {"trace", ARG_STRING, &o.trace_path, 0, 0, "FILE", "write a Chrome/Perfetto trace of one run of each part"},
        {"timeline", ARG_FLAG, &o.timeline, 0, 0, NULL, "print the sequential and overlapped runs' timelines"},
        {"json", ARG_FLAG, &o.json, 0, 0, NULL, "print the results as one JSON object on stdout"},
    };
    args_parse(argc, argv, PROG, "Overlap copies and kernels with CUDA streams, and measure it.",
               specs, (int)(sizeof specs / sizeof specs[0]));
    long long elements = (long long)o.size_mib * 1048576 / sizeof(float);
    if (o.chunks > elements) usage_error(PROG, "--chunks %d is more than the %lld elements", o.chunks, elements);
    if (o.batches > elements) usage_error(PROG, "--batches %d is more than the %lld elements", o.batches, elements);

    FILE *out = o.json ? stderr : stdout;  // with --json, stdout holds the JSON alone
    trace_start(PROG, o.trace_path, o.timeline);
    trace_add_window("sequential", -1, 0);
    trace_add_window("per chunk", -1, 0);
    device_info dev;
    gpu_open(PROG, &dev);
    size_t bytes = sizeof(float) * (size_t)elements;
    if (2 * bytes + (64u << 20) > dev.mem_free)
        usage_error(PROG, "--size-mib %d needs %.1f GiB of device memory; the GPU has %.1f GiB free",
                    o.size_mib, 2.0 * bytes / 1073741824.0, dev.mem_free / 1073741824.0);
    json_writer js;
    if (o.json) json_begin(&js, stdout);
    int ok = 1;

    // part 1
    if (o.only == 0 || o.only == 1) device_report(out, &dev);
    if (o.json) {
        json_str(&js, "device", dev.name);
        json_int(&js, "copy_engines", dev.copy_engines);
        json_int(&js, "concurrent_kernels", dev.concurrent_kernels);
        json_int(&js, "priority_least", dev.priority_least);
        json_int(&js, "priority_greatest", dev.priority_greatest);
    }
    if (o.only == 1) {
        if (o.json) json_end(&js);
        return EXIT_SUCCESS;
    }

    workload w = {(int)elements, NULL, NULL, NULL, NULL, NULL, 0};
    CUDA_CHECK(cudaMallocHost((void **)&w.h_in, bytes));
    CUDA_CHECK(cudaMallocHost((void **)&w.h_ref, bytes));
    CUDA_CHECK(cudaMallocHost((void **)&w.h_out, bytes));
    CUDA_CHECK(cudaMalloc((void **)&w.d_in, bytes));
    CUDA_CHECK(cudaMalloc((void **)&w.d_out, bytes));
    for (int i = 0; i < w.n; i++) w.h_in[i] = (float)((i * 7919u) % 10007u) / 10007.0f - 0.5f;

    cudaStream_t *streams = (cudaStream_t *)malloc(sizeof(cudaStream_t) * o.streams);
    for (int s = 0; s < o.streams; s++) {
        char name[24];
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));  // no legacy-stream syncs
        snprintf(name, sizeof name, "stream %d", s);
        trace_name_stream(streams[s], name);
    }
    overlap_job job = {&w, streams, o.streams, o.chunks};

    // part 2
    if (o.only == 0 || o.only == 2) {
        float *pageable_in = (float *)malloc(bytes), *pageable_out = (float *)malloc(bytes);
        memcpy(pageable_in, w.h_in, bytes);
        memset(pageable_out, 0, bytes);  // touch every page so the timing excludes first faults
        double h2d_pinned = bandwidth_gbs(w.d_in, w.h_in, bytes, cudaMemcpyHostToDevice, streams[0], &o);
        double d2h_pinned = bandwidth_gbs(w.h_out, w.d_in, bytes, cudaMemcpyDeviceToHost, streams[0], &o);
        double h2d_pageable = bandwidth_gbs(w.d_in, pageable_in, bytes, cudaMemcpyHostToDevice, streams[0], &o);
        double d2h_pageable = bandwidth_gbs(pageable_out, w.d_in, bytes, cudaMemcpyDeviceToHost, streams[0], &o);
        cudaStream_t pair[2];
        for (int s = 0; s < 2; s++) CUDA_CHECK(cudaStreamCreateWithFlags(&pair[s], cudaStreamNonBlocking));
        CUDA_CHECK(cudaMemset(w.d_out, 0, bytes));  // it is copied back below: never copy what nothing wrote
        CUDA_CHECK(cudaDeviceSynchronize());         // the legacy stream's memset, before the copies
        copy_job both[2] = {{w.d_in, w.h_in, bytes, cudaMemcpyHostToDevice, pair[0]},
                            {w.h_out, w.d_out, bytes, cudaMemcpyDeviceToHost, pair[1]}};
        double duplex = duplex_gbs(both, pair, &o);
        for (int s = 0; s < 2; s++) CUDA_CHECK(cudaStreamDestroy(pair[s]));
        fprintf(out, "\npart 2: bandwidth of %d MiB copies (median of %d)\n", o.size_mib, o.reps);
        fprintf(out, "  %-16s %9s %9s %7s\n", "", "pinned", "pageable", "ratio");
        fprintf(out, "  %-16s %6.1f GB/s %6.1f GB/s %6.2fx\n", "host to device", h2d_pinned,
                h2d_pageable, h2d_pinned / h2d_pageable);
        fprintf(out, "  %-16s %6.1f GB/s %6.1f GB/s %6.2fx\n", "device to host", d2h_pinned,
                d2h_pageable, d2h_pinned / d2h_pageable);
        fprintf(out, "  both directions at once (pinned, two streams): %.1f GB/s each way\n", duplex);
        if (o.json) {
            json_num(&js, "h2d_pinned_gbs", h2d_pinned);
            json_num(&js, "d2h_pinned_gbs", d2h_pinned);
            json_num(&js, "h2d_pageable_gbs", h2d_pageable);
            json_num(&js, "d2h_pageable_gbs", d2h_pageable);
            json_num(&js, "duplex_gbs_each_way", duplex);
        }
        free(pageable_in);
        free(pageable_out);
    }

    // The reference every later part is checked against: one sequential run,
    // itself checked against the host on a sample of elements.
    double h2d_ms = time_gpu_work(h2d_only, &job, streams, 1, o.warmup, o.reps).median;
    double d2h_ms = time_gpu_work(d2h_only, &job, streams, 1, o.warmup, o.reps).median;
    w.work = o.kernel_work ? o.kernel_work : balance_kernel_work(&job, o.kernel_ratio * 0.5 * (h2d_ms + d2h_ms), &o);
    double kernel_ms = time_gpu_work(kernel_only, &job, streams, 1, o.warmup, o.reps).median;
    poison(&w);
    trace_range phase = trace_begin(TL_RANGE_PHASE, "sequential", -1);
    run_sequential(&job);
    CUDA_CHECK(cudaDeviceSynchronize());
    trace_end(&phase);
    memcpy(w.h_ref, w.h_out, bytes);
    long host_bad = 0;
    int step = w.n > 100000 ? w.n / 100000 : 1;
    for (int i = 0; i < w.n; i += step) {
        float want = fma_chain_host(w.h_in[i], w.work);
        if (memcmp(&want, &w.h_ref[i], sizeof want) != 0 && host_bad++ < 3)
            fprintf(out, "  sequential: element %d is %.9g, the host computes %.9g\n", i, w.h_ref[i], want);
    }
    if (host_bad) ok = 0;

    // part 3
    if (o.only == 0 || o.only == 3) {
        long bad1 = check_variant("per chunk", run_overlapped_per_chunk, &job, out);
        long bad2 = check_variant("by stage", run_overlapped_by_stage, &job, out);
        gpu_work_fn fns[6] = {h2d_only, kernel_only, d2h_only, run_sequential, run_overlapped_per_chunk,
                              run_overlapped_by_stage};
        int nstreams[6] = {1, 1, 1, 1, o.streams, o.streams};
        stats t[6];
        time_round_robin(fns, nstreams, 6, &job, &o, t);
        double h2d3 = t[0].median, kernel3 = t[1].median, d2h3 = t[2].median, seq_ms = t[3].median;
        stats per_chunk = t[4], by_stage = t[5];
        double sum = h2d3 + kernel3 + d2h3;
        double longest = h2d3 > kernel3 ? h2d3 : kernel3;
        if (d2h3 > longest) longest = d2h3;
        double bound = longest + (sum - longest) / o.chunks;

        fprintf(out, "\npart 3: %d MiB in %d chunks over %d streams, kernel work %d (median of %d, round-robin)\n",
                o.size_mib, o.chunks, o.streams, w.work, o.reps);
        fprintf(out, "  stages alone:    copy-in %.3f ms, kernel %.3f ms, copy-out %.3f ms\n", h2d3, kernel3,
                d2h3);
        fprintf(out, "  serial sum:      %8.3f ms   sequential run: %.3f ms\n", sum, seq_ms);
        fprintf(out, "  bound:           %8.3f ms   max(stage) + (sum - max(stage)) / chunks\n", bound);
        fprintf(out, "  per chunk:       %8.3f ms   (min %.3f, max %.3f)  speedup %.2fx  efficiency %.2f  %s\n",
                per_chunk.median, per_chunk.min, per_chunk.max, seq_ms / per_chunk.median,
                bound / per_chunk.median, bad1 ? "DIFFERS" : "bit-identical");
        fprintf(out, "  by stage:        %8.3f ms   (min %.3f, max %.3f)  speedup %.2fx  efficiency %.2f  %s\n",
                by_stage.median, by_stage.min, by_stage.max, seq_ms / by_stage.median,
                bound / by_stage.median, bad2 ? "DIFFERS" : "bit-identical");
        fprintf(out, "  %d copy engine(s): %s\n", dev.copy_engines,
                dev.copy_engines >= 2
                    ? "copy-in and copy-out run at once, so both issue orders can reach the bound"
                    : "one engine serves both directions, so copy-outs queue behind copy-ins and the issue order matters");
        if (bad1 || bad2) {
            fprintf(out, "  verification FAILED: the overlapped output differs from the sequential one\n");
            ok = 0;
        }
        if (o.json) {
            json_int(&js, "kernel_work", w.work);
            json_num(&js, "h2d_ms", h2d3);
            json_num(&js, "kernel_ms", kernel3);
            json_num(&js, "d2h_ms", d2h3);
            json_num(&js, "serial_sum_ms", sum);
            json_num(&js, "sequential_ms", seq_ms);
            json_num(&js, "bound_ms", bound);
            json_num(&js, "per_chunk_ms", per_chunk.median);
            json_num(&js, "per_chunk_min_ms", per_chunk.min);
            json_num(&js, "per_chunk_max_ms", per_chunk.max);
            json_num(&js, "by_stage_ms", by_stage.median);
            json_num(&js, "speedup", seq_ms / per_chunk.median);
            json_num(&js, "efficiency", bound / per_chunk.median);
            json_num(&js, "speedup_by_stage", seq_ms / by_stage.median);
            json_num(&js, "efficiency_by_stage", bound / by_stage.median);
            json_bool(&js, "overlap_verified", !bad1 && !bad2);
        }
    }

    // part 4
    if (o.only == 0 || o.only == 4) {
        cudaStream_t flood, control, high;
        CUDA_CHECK(cudaStreamCreateWithPriority(&flood, cudaStreamNonBlocking, dev.priority_least));
        CUDA_CHECK(cudaStreamCreateWithPriority(&control, cudaStreamNonBlocking, dev.priority_least));
        // BEGIN SOLUTION(05-priority): create `high` so that its blocks are scheduled before the flood's: which end of the device's priority range is the highest?
        CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, dev.priority_greatest));
        //| CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, dev.priority_least));
        // END SOLUTION
        int *d_flag;
        CUDA_CHECK(cudaMalloc((void **)&d_flag, sizeof(int)));
        cudaEvent_t queued, done;
        CUDA_CHECK(cudaEventCreate(&queued));
        CUDA_CHECK(cudaEventCreate(&done));
        int flood_blocks = dev.sms * 2 * 50;  // 2 resident 1024-thread blocks per SM, 50 waves
        double *lat_control = (double *)malloc(sizeof(double) * o.priority_trials);
        double *lat_high = (double *)malloc(sizeof(double) * o.priority_trials);
        probe_latency_us(flood, control, flood_blocks, d_flag, queued, done);  // warm-up
        for (int t = 0; t < o.priority_trials; t++) {
            lat_control[t] = probe_latency_us(flood, control, flood_blocks, d_flag, queued, done);
            lat_high[t] = probe_latency_us(flood, high, flood_blocks, d_flag, queued, done);
        }
        stats c = stats_of(lat_control, o.priority_trials), h = stats_of(lat_high, o.priority_trials);
        fprintf(out, "\npart 4: a probe kernel queued behind %d blocks of 20 us (%d trials)\n",
                flood_blocks, o.priority_trials);
        fprintf(out, "  equal priority (%d):   median %8.1f us   worst %8.1f us\n", dev.priority_least,
                c.median, c.max);
        fprintf(out, "  highest priority (%d): median %8.1f us   worst %8.1f us\n", dev.priority_greatest,
                h.median, h.max);
        fprintf(out, "  priority lets the probe's block go next when an SM frees up; it does not stop\n"
                     "  running blocks, and it does not reorder copies\n");
        if (o.json) {
            json_num(&js, "priority_control_median_us", c.median);
            json_num(&js, "priority_control_worst_us", c.max);
            json_num(&js, "priority_high_median_us", h.median);
            json_num(&js, "priority_high_worst_us", h.max);
        }
        free(lat_control);
        free(lat_high);
        CUDA_CHECK(cudaEventDestroy(queued));
        CUDA_CHECK(cudaEventDestroy(done));
        CUDA_CHECK(cudaFree(d_flag));
        CUDA_CHECK(cudaStreamDestroy(flood));
        CUDA_CHECK(cudaStreamDestroy(control));
        CUDA_CHECK(cudaStreamDestroy(high));
    }

    // part 5
    if (o.only == 0 || o.only == 5) {
        pipeline_job p;
        memset(&p, 0, sizeof p);
        p.w = &w;
        p.batches = o.batches;
        p.no_wait = o.no_wait;
        CUDA_CHECK(cudaStreamCreateWithFlags(&p.copy_stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamCreateWithFlags(&p.compute_stream, cudaStreamNonBlocking));
        trace_name_stream(p.copy_stream, "copy");
        trace_name_stream(p.compute_stream, "compute");
        size_t slot_bytes = sizeof(float) * (size_t)batch_len(&p, 0) + sizeof(float);
        for (int s = 0; s < 2; s++) {
            CUDA_CHECK(cudaMalloc((void **)&p.d_in_slot[s], slot_bytes));
            CUDA_CHECK(cudaMalloc((void **)&p.d_out_slot[s], slot_bytes));
            CUDA_CHECK(cudaEventCreateWithFlags(&p.in_ready[s], cudaEventDisableTiming));
            CUDA_CHECK(cudaEventCreateWithFlags(&p.kernel_done[s], cudaEventDisableTiming));
            CUDA_CHECK(cudaEventCreateWithFlags(&p.out_free[s], cudaEventDisableTiming));
        }
        cudaStream_t pair[2] = {p.copy_stream, p.compute_stream};
        stats t = time_gpu_work(run_pipeline, &p, pair, 2, o.warmup, o.reps);
        // the check: fresh poison in every slot and in the output, one more run, compare
        for (int s = 0; s < 2; s++) {
            CUDA_CHECK(cudaMemset(p.d_in_slot[s], POISON_BYTE, slot_bytes));
            CUDA_CHECK(cudaMemset(p.d_out_slot[s], POISON_BYTE, slot_bytes));
        }
        CUDA_CHECK(cudaDeviceSynchronize());  // (poison below waits too) the slots' memsets, first
        poison(&w);
        trace_range phase = trace_begin(TL_RANGE_PHASE, "pipeline", -1);
        run_pipeline(&p);
        CUDA_CHECK(cudaDeviceSynchronize());
        trace_end(&phase);
        long bad = compare_bits("pipeline", w.h_ref, w.h_out, w.n, out);
        // one copy stream carries both directions, so its copies add up; the kernels
        // cannot start before the first batch's copy-in, nor the last copy-out before
        // the last kernel
        double copies = h2d_ms + d2h_ms;
        double bound = kernel_ms + copies / o.batches;
        if (copies > bound) bound = copies;
        fprintf(out, "\npart 5: %d batches through a copy stream and a compute stream%s\n", o.batches,
                o.no_wait ? " WITHOUT event waits (--no-wait)" : "");
        fprintf(out, "  copies %.3f ms, kernels %.3f ms in all; bound %.3f ms\n", copies, kernel_ms, bound);
        fprintf(out, "  measured %.3f ms (min %.3f, max %.3f), efficiency %.2f\n", t.median, t.min, t.max,
                bound / t.median);
        if (bad) {
            fprintf(out, "  verification FAILED: %ld of %d elements differ from the sequential run%s\n",
                    bad, w.n,
                    o.no_wait ? "\n  (expected: without the waits a kernel reads its slot before the copy lands,"
                                "\n   and a copy-out reads its slot before the kernel has written it)"
                              : "");
            ok = 0;
        } else {
            fprintf(out, "  verified: bit-identical to the sequential run\n");
        }
        if (o.json) {
            json_num(&js, "pipeline_ms", t.median);
            json_num(&js, "pipeline_bound_ms", bound);
            json_bool(&js, "pipeline_verified", bad == 0);
            json_int(&js, "pipeline_bad_elements", bad);
        }
        for (int s = 0; s < 2; s++) {
            CUDA_CHECK(cudaFree(p.d_in_slot[s]));
            CUDA_CHECK(cudaFree(p.d_out_slot[s]));
            CUDA_CHECK(cudaEventDestroy(p.in_ready[s]));
            CUDA_CHECK(cudaEventDestroy(p.kernel_done[s]));
            CUDA_CHECK(cudaEventDestroy(p.out_free[s]));
        }
        CUDA_CHECK(cudaStreamDestroy(p.copy_stream));
        CUDA_CHECK(cudaStreamDestroy(p.compute_stream));
    }

    if (trace_on()) {
        fputc('\n', out);
        trace_finish(out);
    }
    fprintf(out, "\n%s\n", ok ? "all checks passed" : "CHECKS FAILED");
    if (o.json) {
        json_bool(&js, "verified", ok);
        json_end(&js);
    }
    for (int s = 0; s < o.streams; s++) CUDA_CHECK(cudaStreamDestroy(streams[s]));
    free(streams);
    CUDA_CHECK(cudaFree(w.d_in));
    CUDA_CHECK(cudaFree(w.d_out));
    CUDA_CHECK(cudaFreeHost(w.h_in));
    CUDA_CHECK(cudaFreeHost(w.h_ref));
    CUDA_CHECK(cudaFreeHost(w.h_out));
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
