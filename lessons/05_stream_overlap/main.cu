// STUDENT VERSION of solutions/05_stream_overlap/main.cu, made by `make lessons` (checksum 1067413538)
// No exercise in this file, read it as it stands; the TODOs are in overlap.cu, pipeline.cu, priority.cu.
// 05_stream_overlap: copies and kernels overlapped across CUDA streams, measured fairly.
//
// build: make build/lessons/05_stream_overlap
// run:   build/lessons/05_stream_overlap [--streams 4] [--chunks 32] [--only 3] [--json]
//
// part 1 reports what the device can overlap: copy engines, concurrent kernels (device_bandwidth.cu).
// part 2 measures host<->device bandwidth from pinned and from pageable memory (device_bandwidth.cu).
// part 3 runs copy-in, kernel, copy-out in order on one stream, then in chunks over
//        several streams in two issue orders, against a bound (overlap.cu).
// part 4 shows what stream priority does to a probe queued behind a flood (priority.cu).
// part 5 pipelines batches through a copy and a compute stream ordered by events (pipeline.cu).
// The kernel they all run is in fma_chain.cu; the data, its stages and the
// sequential reference in workload.cu; timing and checking in harness.cu.
#include <stdio.h>   // fprintf, fputc
#include <stdlib.h>  // EXIT_SUCCESS, EXIT_FAILURE

#include "common/gpu/device.h"   // defines: device_info, gpu_open
#include "common/base/json.h"    // defines: json_begin, json_end
#include "common/trace/trace.h"  // defines: trace_start, trace_add_window, trace_on, trace_finish
#include "overlap.h"             // defines: options, workload, report, the parts

int main(int argc, char **argv)
{
    options o = parse_options(argc, argv);
    check_host_memory(&o);  // before anything is allocated: exit 2 if it cannot fit
    trace_start(PROG, o.trace_path, o.timeline);
    trace_add_window("sequential", -1, 0);
    trace_add_window("per chunk", -1, 0);
    device_info dev;
    gpu_open(PROG, &dev);  // exit 3 without a usable GPU
    check_device_memory(&o, &dev);

    report r = {.out = o.json ? stderr : stdout, .json = o.json};  // with --json, stdout holds the JSON alone
    if (r.json) json_begin(&r.js, stdout);
    part1_device(&dev, &o, &r);
    report_int(&r, "size_mib", o.size_mib);
    int ok = 1;
    workload w = {.n = 0};
    if (needs_data(&o)) workload_create(&w, &o);
    if (runs_part(&o, 2)) part2_bandwidth(&w, &o, &r);
    if (runs_part(&o, 3) || runs_part(&o, 5)) ok = make_reference(&w, &o, &r);
    if (runs_part(&o, 3)) ok = part3_overlap(&w, &dev, &o, &r) && ok;
    if (runs_part(&o, 4)) part4_priority(&dev, &o, &r);
    if (runs_part(&o, 5)) ok = part5_pipeline(&w, &o, &r) && ok;
    if (needs_data(&o)) workload_destroy(&w);

    if (trace_on()) {
        fputc('\n', r.out);
        trace_finish(r.out);
    }
    fprintf(r.out, "\n%s\n", ok ? "all checks passed" : "CHECKS FAILED");
    report_bool(&r, "verified", ok);
    if (r.json) json_end(&r.js);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
