// STUDENT VERSION of solutions/05_stream_overlap/device_bandwidth.cu, made by `make lessons` (checksum 265704612)
// No exercise in this file, read it as it stands; the TODOs are in overlap.cu, pipeline.cu, priority.cu.
// device_bandwidth.cu: part 1, what the device can overlap (copy engines,
// concurrent kernels, stream priorities), and part 2, host<->device bandwidth
// from pinned and from pageable memory, one direction at a time and both at once.
#include <stdlib.h>  // free
#include <string.h>  // memcpy, memset

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/device.h"   // defines: device_info, device_report
#include "common/gpu/memory.h"   // defines: host_alloc
#include "common/base/timing.h"  // defines: stats, time_gpu_work
#include "overlap.h"             // defines: workload, options, report, report_*, both_copies

// ----------------------------------------------------------------------------
// Part 1: the device.

void part1_device(const device_info *dev, const options *o, report *r)
{
    if (runs_part(o, 1)) device_report(r->out, dev);
    // tests read these to decide whether overlap can be checked on this GPU
    report_str(r, "device", dev->name);
    report_int(r, "sms", dev->sms);
    report_int(r, "copy_engines", dev->copy_engines);
    report_int(r, "concurrent_kernels", dev->concurrent_kernels ? 1 : 0);
    report_bool(r, "mig", dev->mig);
    report_int(r, "priority_least", dev->priority_least);
    report_int(r, "priority_greatest", dev->priority_greatest);
}

// ----------------------------------------------------------------------------
// Part 2: bandwidth.

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaMemcpyKind kind;
    cudaStream_t stream;
} copy_job;

static void copy_once(void *arg)
{
    copy_job *j = (copy_job *)arg;
    // from pageable memory the driver stages through its own pinned buffer, and a
    // device-to-pageable copy returns only when done: "Async" in name only
    CUDA_CHECK(cudaMemcpyAsync(j->dst, j->src, j->bytes, j->kind, j->stream));
}

static double bandwidth_gbs(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                            const options *o)
{
    copy_job j = {.dst = dst, .src = src, .bytes = bytes, .kind = kind, .stream = stream};
    stats s = time_gpu_work(copy_once, &j, &stream, 1, o->warmup, o->reps);
    return bytes / (s.median * 1e-3) / 1e9;
}

void part2_bandwidth(workload *w, const options *o, report *r)
{
    size_t bytes = sizeof(float) * (size_t)w->n;
    float *pageable_in = (float *)host_alloc(bytes, "part 2's pageable input");
    float *pageable_out = (float *)host_alloc(bytes, "part 2's pageable output");
    memcpy(pageable_in, w->h_in, bytes);
    memset(pageable_out, 0, bytes);  // touch every page so the timing excludes first faults
    cudaStream_t s = w->streams[0];
    double h2d_pinned = bandwidth_gbs(w->d_in, w->h_in, bytes, cudaMemcpyHostToDevice, s, o);
    double d2h_pinned = bandwidth_gbs(w->h_out, w->d_in, bytes, cudaMemcpyDeviceToHost, s, o);
    double h2d_pageable = bandwidth_gbs(w->d_in, pageable_in, bytes, cudaMemcpyHostToDevice, s, o);
    double d2h_pageable = bandwidth_gbs(pageable_out, w->d_in, bytes, cudaMemcpyDeviceToHost, s, o);
    CUDA_CHECK(cudaMemset(w->d_out, 0, bytes));  // both_copies copies it back: never copy what nothing wrote
    CUDA_CHECK(cudaDeviceSynchronize());         // the legacy stream's memset, before the copies
    stats both = time_gpu_work(both_copies, w, w->streams, 2, o->warmup, o->reps);
    double duplex = bytes / (both.median * 1e-3) / 1e9;  // per direction

    fprintf(r->out, "\npart 2: bandwidth of %d MiB copies (median of %d)\n", o->size_mib, o->reps);
    fprintf(r->out, "  %-16s %9s %9s %7s\n", "", "pinned", "pageable", "ratio");
    fprintf(r->out, "  %-16s %6.1f GB/s %6.1f GB/s %6.2fx\n", "host to device", h2d_pinned, h2d_pageable,
            h2d_pinned / h2d_pageable);
    fprintf(r->out, "  %-16s %6.1f GB/s %6.1f GB/s %6.2fx\n", "device to host", d2h_pinned, d2h_pageable,
            d2h_pinned / d2h_pageable);
    fprintf(r->out, "  both directions at once (pinned, two streams): %.1f GB/s each way\n", duplex);
    report_num(r, "h2d_pinned_gbs", h2d_pinned);
    report_num(r, "d2h_pinned_gbs", d2h_pinned);
    report_num(r, "h2d_pageable_gbs", h2d_pageable);
    report_num(r, "d2h_pageable_gbs", d2h_pageable);
    report_num(r, "duplex_gbs_each_way", duplex);
    free(pageable_in);
    free(pageable_out);
}
