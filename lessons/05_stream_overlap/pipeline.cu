// STUDENT VERSION of solutions/05_stream_overlap/pipeline.cu, made by `make lessons` (checksum 3812068634)
// Fill in its 2 TODOs.
// pipeline.cu: part 5, batches through two streams ordered by events. The copy
// stream moves batches in and results out, the compute stream runs the kernels,
// through two device slots per direction (batch k uses slot k % 2). Every
// dependency crosses streams, so every one needs an event: a kernel waits for its
// copy-in, a copy-out for its kernel, and a slot is refilled only after the last
// work that reads it.
//
// The test hook --delay-us holds one stream back in the checked run (a spin
// kernel before every copy-in, or before every kernel): with every wait in place
// the output stays bit-identical; with one missing, it differs every time.
#include <stdio.h>  // fprintf

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/kernels.h"  // defines: launch_spin
#include "common/trace/trace.h"  // defines: trace_name_stream, trace_begin, trace_end, TL_RANGE_PHASE
#include "overlap.h"             // defines: workload, variant, report, delay_point, launch_fma_chain, the stages,
                                 //          time_round_robin

typedef struct {
    workload *w;
    int batches;
    cudaStream_t copy_stream, compute_stream;
    float *d_in_slot[2], *d_out_slot[2];
    size_t slot_bytes;
    cudaEvent_t in_ready[2];     // copy-in of the slot's batch has landed
    cudaEvent_t kernel_done[2];  // the kernel has written the out-slot
    cudaEvent_t in_free[2];      // the kernel has finished reading the in-slot
    cudaEvent_t out_free[2];     // copy-out of the out-slot has finished
    long long delay_ns;          // the test hook: 0, or a spin this long at each delay_on point
    int delay_on;                // a delay_point
} pipeline_job;

static size_t batch_begin(const pipeline_job *p, int k) { return (size_t)p->w->n * k / p->batches; }
static int batch_len(const pipeline_job *p, int k) { return (int)(batch_begin(p, k + 1) - batch_begin(p, k)); }

static void test_delay(const pipeline_job *p, delay_point where, cudaStream_t stream)
{
    if (p->delay_ns > 0 && p->delay_on == (int)where) launch_spin(1, 32, p->delay_ns, stream);
}

static void issue_copy_in(pipeline_job *p, int k)
{
    int slot = k % 2;
    // refill the in-slot only after the kernel that read batch k-2 from it; the
    // copy stream's own order already implies it here (copy-out k-2 waited on that
    // kernel), stated anyway so the rule survives moving copy-outs to a third stream
    if (k >= 2) CUDA_CHECK(cudaStreamWaitEvent(p->copy_stream, p->in_free[slot], 0));
    test_delay(p, DELAY_ON_COPY, p->copy_stream);
    CUDA_CHECK(cudaMemcpyAsync(p->d_in_slot[slot], p->w->h_in + batch_begin(p, k), sizeof(float) * batch_len(p, k),
                               cudaMemcpyHostToDevice, p->copy_stream));
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
        // TODO(05-kernel-wait): kernel k reads its in-slot: which event says that batch
        // k's copy-in has landed, and how does the compute stream wait for it without the host?
        // the out-slot is rewritten only after copy-out k-2 has read it (implied
        // here too once kernel k waits for copy-in k, which came after that copy-out)
        if (k >= 2) CUDA_CHECK(cudaStreamWaitEvent(p->compute_stream, p->out_free[slot], 0));
        test_delay(p, DELAY_ON_COMPUTE, p->compute_stream);
        launch_fma_chain(p->d_in_slot[slot], p->d_out_slot[slot], batch_len(p, k), p->w->work, p->compute_stream);
        CUDA_CHECK(cudaEventRecord(p->kernel_done[slot], p->compute_stream));
        CUDA_CHECK(cudaEventRecord(p->in_free[slot], p->compute_stream));
        // TODO(05-copy-out-wait): copy-out k reads the out-slot: which event says kernel
        // k has written it, and which stream must wait for it?
        CUDA_CHECK(cudaMemcpyAsync(p->w->h_out + batch_begin(p, k), p->d_out_slot[slot],
                                   sizeof(float) * batch_len(p, k), cudaMemcpyDeviceToHost, p->copy_stream));
        CUDA_CHECK(cudaEventRecord(p->out_free[slot], p->copy_stream));
    }
}

// The pipeline's copies alone, in its order on the copy stream, without the kernels:
// the copy stream cannot move its batches faster than this.
static void run_pipeline_copies(void *arg)
{
    pipeline_job *p = (pipeline_job *)arg;
    for (int k = 0; k < p->batches; k++) {
        int slot = k % 2;
        CUDA_CHECK(cudaMemcpyAsync(p->d_in_slot[slot], p->w->h_in + batch_begin(p, k), sizeof(float) * batch_len(p, k),
                                   cudaMemcpyHostToDevice, p->copy_stream));
        CUDA_CHECK(cudaMemcpyAsync(p->w->h_out + batch_begin(p, k), p->d_out_slot[slot],
                                   sizeof(float) * batch_len(p, k), cudaMemcpyDeviceToHost, p->copy_stream));
    }
}

// Part 5's bound from the stages' times (ms): one copy stream carries both
// directions, so its copies add up (whole, or in batches as the pipeline issues
// them, whichever was faster); the kernels cannot start before the first batch's
// copy-in, nor the last copy-out before the last kernel.
static double pipeline_bound(double h2d, double d2h, double copies_in_batches, double kernels, int batches,
                             double *copies)
{
    *copies = h2d + d2h < copies_in_batches ? h2d + d2h : copies_in_batches;
    double bound = kernels + *copies / batches;
    return *copies > bound ? *copies : bound;
}

// ----------------------------------------------------------------------------

static void pipeline_create(pipeline_job *p, workload *w, const options *o)
{
    *p = (pipeline_job){.w = w, .batches = o->batches, .delay_on = o->delay_on};
    CUDA_CHECK(cudaStreamCreateWithFlags(&p->copy_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&p->compute_stream, cudaStreamNonBlocking));
    trace_name_stream(p->copy_stream, "copy");
    trace_name_stream(p->compute_stream, "compute");
    p->slot_bytes = sizeof(float) * ((size_t)batch_len(p, 0) + 1);  // batches differ by at most one element
    for (int s = 0; s < 2; s++) {
        CUDA_CHECK(cudaMalloc((void **)&p->d_in_slot[s], p->slot_bytes));
        CUDA_CHECK(cudaMalloc((void **)&p->d_out_slot[s], p->slot_bytes));
        // events used only for ordering need no timestamps
        CUDA_CHECK(cudaEventCreateWithFlags(&p->in_ready[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->kernel_done[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->in_free[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->out_free[s], cudaEventDisableTiming));
        // run_pipeline_copies copies the out-slots before any kernel wrote them: never copy unwritten memory
        CUDA_CHECK(cudaMemset(p->d_out_slot[s], 0, p->slot_bytes));
    }
    CUDA_CHECK(cudaDeviceSynchronize());  // the legacy stream's memsets, before the non-blocking streams use the slots
}

static void pipeline_destroy(pipeline_job *p)
{
    for (int s = 0; s < 2; s++) {
        CUDA_CHECK(cudaFree(p->d_in_slot[s]));
        CUDA_CHECK(cudaFree(p->d_out_slot[s]));
        CUDA_CHECK(cudaEventDestroy(p->in_ready[s]));
        CUDA_CHECK(cudaEventDestroy(p->kernel_done[s]));
        CUDA_CHECK(cudaEventDestroy(p->in_free[s]));
        CUDA_CHECK(cudaEventDestroy(p->out_free[s]));
    }
    CUDA_CHECK(cudaStreamDestroy(p->copy_stream));
    CUDA_CHECK(cudaStreamDestroy(p->compute_stream));
}

// The checked run: fresh poison in every slot and in the output, so that a kernel
// or a copy-out that runs too early reads NaN, not the right data by luck; the
// test delays, if any; then a bit-for-bit comparison. Returns the differing elements.
static long check_pipeline(pipeline_job *p, const options *o, FILE *out)
{
    for (int s = 0; s < 2; s++) {
        CUDA_CHECK(cudaMemset(p->d_in_slot[s], 0xFF, p->slot_bytes));
        CUDA_CHECK(cudaMemset(p->d_out_slot[s], 0xFF, p->slot_bytes));
    }
    poison(p->w);  // and waits for the legacy stream's memsets
    p->delay_ns = 1000LL * o->delay_us;
    trace_range phase = trace_begin(TL_RANGE_PHASE, "pipeline", -1);
    run_pipeline(p);
    CUDA_CHECK(cudaDeviceSynchronize());
    trace_end(&phase);
    p->delay_ns = 0;
    return compare_bits("pipeline", p->w->h_ref, p->w->h_out, p->w->n, out);
}

enum { P_H2D, P_KERNEL, P_D2H, P_COPIES, P_PIPELINE, P_COUNT };

int part5_pipeline(workload *w, const options *o, report *r)
{
    pipeline_job p;
    pipeline_create(&p, w, o);
    cudaStream_t pair[2] = {p.copy_stream, p.compute_stream};
    variant v[P_COUNT] = {
        // in the order of the P_ names
        {.fn = h2d_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = kernel_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = d2h_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = run_pipeline_copies, .ctx = &p, .streams = pair, .nstreams = 1},
        {.fn = run_pipeline, .ctx = &p, .streams = pair, .nstreams = 2},
    };
    stats t[P_COUNT];
    time_round_robin(v, P_COUNT, o, t);
    long bad = check_pipeline(&p, o, r->out);
    double copies, copies_min, kernels = t[P_KERNEL].median;
    double bound = pipeline_bound(t[P_H2D].median, t[P_D2H].median, t[P_COPIES].median, kernels, o->batches, &copies);
    // from each part's fastest repetition, to hold against the pipeline's fastest one
    double bound_min = pipeline_bound(t[P_H2D].min, t[P_D2H].min, t[P_COPIES].min, t[P_KERNEL].min, o->batches,
                                      &copies_min);
    stats run = t[P_PIPELINE];
    const char *delay_names[2] = {"copy", "compute"};

    fprintf(r->out, "\npart 5: %d batches through a copy stream and a compute stream (median of %d, round-robin)\n",
            o->batches, o->reps);
    fprintf(r->out, "  copies %.3f ms in all (whole %.3f + %.3f ms, in batches %.3f ms), kernels %.3f ms\n", copies,
            t[P_H2D].median, t[P_D2H].median, t[P_COPIES].median, kernels);
    fprintf(r->out, "  bound %.3f ms = max(copies, kernels + copies / batches)\n", bound);
    fprintf(r->out, "  measured %.3f ms (min %.3f, max %.3f), efficiency %.2f\n", run.median, run.min, run.max,
            bound / run.median);
    fprintf(r->out, "  fastest repetitions: bound %.3f ms, pipeline %.3f ms\n", bound_min, run.min);
    if (o->delay_us)
        fprintf(r->out, "  checked run with a %d us spin before every %s (--delay-on %s)\n", o->delay_us,
                o->delay_on == DELAY_ON_COPY ? "copy-in" : "kernel", delay_names[o->delay_on]);
    if (bad)
        fprintf(r->out,
                "  verification FAILED: %ld of %d elements differ from the sequential run: a kernel read "
                "its slot before the copy landed, or a copy-out read its slot before the kernel wrote it\n",
                bad, w->n);
    else
        fprintf(r->out, "  verified: bit-identical to the sequential run\n");
    report_num(r, "pipeline_copies_ms", copies);
    report_num(r, "pipeline_copies_in_batches_ms", t[P_COPIES].median);
    report_num(r, "pipeline_kernels_ms", kernels);
    report_num(r, "pipeline_ms", run.median);
    report_num(r, "pipeline_min_ms", run.min);
    report_num(r, "pipeline_max_ms", run.max);
    report_num(r, "pipeline_bound_ms", bound);
    report_num(r, "pipeline_bound_min_ms", bound_min);
    report_num(r, "pipeline_efficiency", bound / run.median);
    report_num(r, "pipeline_efficiency_best", bound_min / run.min);
    report_int(r, "delay_us", o->delay_us);
    report_str(r, "delay_on", delay_names[o->delay_on]);
    report_bool(r, "pipeline_verified", bad == 0);
    report_int(r, "pipeline_bad_elements", bad);
    pipeline_destroy(&p);
    return bad == 0;
}
