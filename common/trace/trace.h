// trace.h: a per-stream timeline recorded by the program itself.
//
// Off by default. When on (--trace FILE.json and/or --timeline), CUPTI records
// every kernel, copy and synchronisation with its stream; host ranges (batch
// preparation, the host blocked in a sync) are stamped on CUPTI's clock so that
// they line up with the GPU's. Every host range is also an NVTX range, so that
// Nsight Systems shows the same names.
#ifndef COMMON_TRACE_H
#define COMMON_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>

#include "common/trace/timeline.h"  // tl_range, tl_track_kind

#ifdef __cplusplus
extern "C" {
#endif

// Starts recording when json_path is set or timeline is nonzero; call before any
// other CUDA work (CUPTI instruments kernels as modules load). The JSON file is
// opened here: a path that cannot be written is a usage error (exit code 2), found
// before the run, not after it. Records nothing where there is no GPU: gpu_open
// reports that.
void trace_start(const char *prog, const char *json_path, int timeline);
int trace_on(void);

// Stops and restarts recording (kernels, copies, syncs, host ranges), to time the
// same work traced and untraced in one process.
void trace_pause(void);
void trace_resume(void);

// A window the terminal timeline shows: the last host range named `phase`, or,
// with first_batch >= 0, `count` batches of it. Several windows share one scale.
void trace_add_window(const char *phase, int first_batch, int count);

// Names a stream's track ("copy", "compute", ...) and the calling thread's track
// (TL_TRACK_MAIN for the thread that drives the GPU, TL_TRACK_THREAD for others).
void trace_name_stream(cudaStream_t stream, const char *name);
void trace_name_thread(const char *name, tl_track_kind kind);

// A host range on the calling thread's track: what it is (TL_RANGE_PREP, ...;
// TL_RANGE_PHASE marks a phase of the program, "run", "sequential", whose overlap
// the report measures), its name, and the batch it belongs to, or -1. Names must
// be string literals (they are kept, not copied).
typedef struct {
    tl_range kind;
    const char *name;
    int batch;
    uint64_t begin_ns;
} trace_range;
trace_range trace_begin(tl_range kind, const char *name, int batch);
void trace_end(trace_range *r);

// Synchronises the device, collects CUPTI's records, writes the JSON file, and
// prints the overlap figures (and the terminal timeline when asked) on `out`.
void trace_finish(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
