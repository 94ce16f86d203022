// trace_internal.h: the parts of the tracer (trace.h) that its own files share, not
// for lessons: what a CUPTI record becomes (trace_records.c) and the report printed
// at the end (trace_report.c). trace.c records and owns the state.
#ifndef COMMON_TRACE_INTERNAL_H
#define COMMON_TRACE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include <cupti.h>

#include "common/trace/timeline.h"

#define TRACE_MAX_WINDOWS 4

// A window of the terminal timeline (trace_add_window).
typedef struct {
    const char *phase;
    int first, count;
} trace_window;

// The event a CUPTI activity record stands for: a kernel, a copy or a host
// synchronisation, its track left to the caller: *stream_id gets the stream of a
// kernel or a copy (a synchronisation has no track: -1). Returns 0 for a record
// the timeline does not keep (another kind, a stream waiting on an event).
int trace_record_event(const CUpti_Activity *record, tl_event *e, uint32_t *stream_id);

// Removes the synchronisations whose correlation id is one of ids[] (sorted here):
// the cudaEventQuery calls, in which the host did not wait.
void trace_drop_syncs(timeline *t, uint32_t *ids, int n);

// The figures of every phase on `out`, and with `draw` the terminal timeline of
// each window, on one scale.
void trace_report(FILE *out, const timeline *t, const char *json_path, int draw, const trace_window *windows,
                  int nwindows);

#endif
