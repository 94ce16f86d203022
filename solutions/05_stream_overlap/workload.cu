// workload.cu: lesson 05's data, its three stages (copy-in, kernel, copy-out),
// the sequential run that every other run is compared with, and the checks.
#include <stdio.h>   // fprintf, snprintf
#include <stdlib.h>  // free
#include <string.h>  // memcpy, memcmp, memset

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/memory.h"   // defines: host_calloc
#include "common/trace/trace.h"  // defines: trace_name_stream, trace_begin, trace_end, TL_RANGE_PHASE
#include "overlap.h"             // defines: workload, options, report, launch_fma_chain

#define POISON_BYTE 0xFF  // every float byte 0xFF is a NaN: an unwritten element cannot pass

void workload_create(workload *w, const options *o)
{
    memset(w, 0, sizeof *w);
    w->n = (int)((size_t)o->size_mib * 1048576 / sizeof(float));
    size_t bytes = sizeof(float) * (size_t)w->n;
    // pinned (page-locked): the copy engines read and write it directly, so copies
    // can overlap kernels; both sides of every comparison use it
    CUDA_CHECK(cudaMallocHost((void **)&w->h_in, bytes));
    CUDA_CHECK(cudaMallocHost((void **)&w->h_ref, bytes));
    CUDA_CHECK(cudaMallocHost((void **)&w->h_out, bytes));
    CUDA_CHECK(cudaMalloc((void **)&w->d_in, bytes));
    CUDA_CHECK(cudaMalloc((void **)&w->d_out, bytes));
    for (int i = 0; i < w->n; i++) w->h_in[i] = (float)((i * 7919u) % 10007u) / 10007.0f - 0.5f;

    w->nstreams = o->streams;
    w->chunks = o->chunks;
    int created = o->streams < 2 ? 2 : o->streams;
    w->streams = (cudaStream_t *)host_calloc((size_t)created, sizeof(cudaStream_t), "the streams");
    for (int s = 0; s < created; s++) {
        char name[24];
        CUDA_CHECK(cudaStreamCreateWithFlags(&w->streams[s], cudaStreamNonBlocking));  // no legacy-stream syncs
        snprintf(name, sizeof name, "stream %d", s);
        trace_name_stream(w->streams[s], name);
    }
}

void workload_destroy(workload *w)
{
    int created = w->nstreams < 2 ? 2 : w->nstreams;
    for (int s = 0; s < created; s++) CUDA_CHECK(cudaStreamDestroy(w->streams[s]));
    free(w->streams);
    CUDA_CHECK(cudaFree(w->d_in));
    CUDA_CHECK(cudaFree(w->d_out));
    CUDA_CHECK(cudaFreeHost(w->h_in));
    CUDA_CHECK(cudaFreeHost(w->h_ref));
    CUDA_CHECK(cudaFreeHost(w->h_out));
}

void poison(workload *w)
{
    memset(w->h_out, POISON_BYTE, sizeof(float) * (size_t)w->n);
    CUDA_CHECK(cudaMemset(w->d_out, POISON_BYTE, sizeof(float) * (size_t)w->n));
    // cudaMemset runs on the legacy stream, which our non-blocking streams do not
    // wait for: finish it before anything else touches d_out
    CUDA_CHECK(cudaDeviceSynchronize());
}

// Compares bit for bit. Returns the number of differing elements and prints the
// first few; an element still holding the poison was never written.
long compare_bits(const char *what, const float *ref, const float *got, int n, FILE *out)
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
// The stages over the whole array: gpu_work_fn's, so that they can be timed.

void h2d_only(void *arg)
{
    workload *w = (workload *)arg;
    CUDA_CHECK(cudaMemcpyAsync(w->d_in, w->h_in, sizeof(float) * (size_t)w->n, cudaMemcpyHostToDevice, w->streams[0]));
}

void kernel_only(void *arg)
{
    workload *w = (workload *)arg;
    launch_fma_chain(w->d_in, w->d_out, w->n, w->work, w->streams[0]);
}

void d2h_only(void *arg)
{
    workload *w = (workload *)arg;
    CUDA_CHECK(
        cudaMemcpyAsync(w->h_out, w->d_out, sizeof(float) * (size_t)w->n, cudaMemcpyDeviceToHost, w->streams[0]));
}

// Both directions at once, on two streams: what overlapped copies really get
// when they share the host's link.
void both_copies(void *arg)
{
    workload *w = (workload *)arg;
    h2d_only(w);
    CUDA_CHECK(
        cudaMemcpyAsync(w->h_out, w->d_out, sizeof(float) * (size_t)w->n, cudaMemcpyDeviceToHost, w->streams[1]));
}

void run_sequential(void *arg)
{
    h2d_only(arg);
    kernel_only(arg);
    d2h_only(arg);
}

// ----------------------------------------------------------------------------
// The reference.

// The kernel's work such that it takes `ratio` times one copy (their mean): time
// it at two amounts of work and solve the straight line.
static int balance_kernel_work(workload *w, const options *o)
{
    double h2d = time_gpu_work(h2d_only, w, w->streams, 1, o->warmup, o->reps).median;
    CUDA_CHECK(cudaMemset(w->d_out, 0, sizeof(float) * (size_t)w->n));  // never copy what nothing wrote
    CUDA_CHECK(cudaDeviceSynchronize());                                // the legacy stream's memset, before the copy
    double d2h = time_gpu_work(d2h_only, w, w->streams, 1, o->warmup, o->reps).median;
    double target = o->kernel_ratio * 0.5 * (h2d + d2h);
    const int w0 = 64, w1 = 1024;
    w->work = w0;
    double t0 = time_gpu_work(kernel_only, w, w->streams, 1, 1, o->reps).median;
    w->work = w1;
    double t1 = time_gpu_work(kernel_only, w, w->streams, 1, 1, o->reps).median;
    double per_work = (t1 - t0) / (w1 - w0);
    double work = per_work > 0 ? w0 + (target - t0) / per_work : w1;
    if (work < 1) work = 1;
    if (work > 1000000) work = 1000000;
    return (int)(work + 0.5);
}

// One sequential run on poisoned outputs, kept in h_ref, and itself checked
// against the host on a sample of elements. Returns 1 when it matches.
int make_reference(workload *w, const options *o, report *r)
{
    w->work = o->kernel_work ? o->kernel_work : balance_kernel_work(w, o);
    poison(w);
    trace_range phase = trace_begin(TL_RANGE_PHASE, "sequential", -1);
    run_sequential(w);
    CUDA_CHECK(cudaDeviceSynchronize());
    trace_end(&phase);
    memcpy(w->h_ref, w->h_out, sizeof(float) * (size_t)w->n);
    long bad = 0, checked = 0;
    int step = w->n > 100000 ? w->n / 100000 : 1;
    for (int i = 0; i < w->n; i += step, checked++) {
        float want = fma_chain_host(w->h_in[i], w->work);
        if (memcmp(&want, &w->h_ref[i], sizeof want) != 0 && bad++ < 3)
            fprintf(r->out, "  sequential: element %d is %.9g, the host computes %.9g\n", i, w->h_ref[i], want);
    }
    fprintf(r->out,
            "\nreference: the sequential run, kernel work %d FMAs per element; %ld of %ld sampled "
            "elements equal the host's\n",
            w->work, checked - bad, checked);
    report_int(r, "kernel_work", w->work);
    report_bool(r, "reference_verified", bad == 0);
    return bad == 0;
}
