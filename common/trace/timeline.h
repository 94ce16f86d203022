// timeline.h: a recorded timeline (GPU kernels and copies per stream, host ranges
// per thread) and what the course does with it, one file each:
//   timeline.c          the model and its store: tracks, events, windows, kernels by name
//   timeline_json.c     write and read Chrome Trace Event JSON
//   timeline_figures.c  measure a window: busy, hidden, blocked, overlap
//   timeline_draw.c     draw a window in the terminal or as SVG
//
// Plain C with no CUDA in it: the tracer (trace.c) fills a timeline from CUPTI;
// tools/tracestat reads one back from JSON; the tests use fixtures.
#ifndef COMMON_TIMELINE_H
#define COMMON_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TL_MAX_TRACKS 64
#define TL_MAX_PROCESSES 16
#define TL_NAME 64

// What a host range is. Set where the range is recorded (trace_begin), written to
// JSON as its "cat" and read back by kind, never guessed from the range's name.
typedef enum {
    TL_RANGE_OTHER,        // "host": any other host range
    TL_RANGE_PHASE,        // "phase": a phase of the program ("run", "sequential"): what the report measures
    TL_RANGE_PREP,         // "prep": preparing a batch
    TL_RANGE_ISSUE,        // "issue": issuing GPU work worth its own range (a graph launch, a capture)
    TL_RANGE_SYNC,         // "sync": a counted host synchronisation
    TL_RANGE_SLOT_WAIT,    // "slot_wait": the host waits for a buffer (or a batch) to be ready
    TL_RANGE_LOADER_WAIT,  // "loader_wait": a loader thread waits for its slot's last copy
    TL_RANGE_KINDS
} tl_range;

// What a track is: a CUDA stream, the thread that drives the GPU, or another thread.
typedef enum { TL_TRACK_STREAM, TL_TRACK_MAIN, TL_TRACK_THREAD } tl_track_kind;

const char *tl_range_name(tl_range r);  // "prep", ...; the JSON "cat" of a host range

typedef enum {
    TL_KERNEL,  // a kernel, on a stream track
    TL_H2D,     // a copy host to device
    TL_D2H,     // a copy device to host
    TL_COPY,    // any other copy (device to device, memset)
    TL_HOST,    // a host range, on a thread track; its tl_range says which
    TL_SYNC     // a host synchronisation seen by CUPTI: drawn nowhere, counted
} tl_kind;

typedef struct {
    int track;
    tl_kind kind;
    char name[TL_NAME];
    tl_range range;        // TL_HOST: what the range is
    int batch;             // the batch a host range belongs to, or -1
    uint64_t start, end;   // nanoseconds
    long long bytes;       // copies
    int pageable;          // copies: the host side was pageable memory
    uint32_t correlation;  // TL_SYNC: CUPTI's id of the API call (not written to JSON)
    uint32_t graph;        // TL_KERNEL: CUPTI's id of the graph it ran in (0: launched on its own); a
                           // TL_RANGE_ISSUE range of a cudaGraphLaunch: the id of the graph launched.
                           // JSON: args "graph", written only when nonzero
} tl_event;

typedef struct {
    char name[TL_NAME];
    tl_track_kind kind;
    int process;  // index into timeline.processes: one per rank when traces are merged
} tl_track;

typedef struct {
    tl_track tracks[TL_MAX_TRACKS];
    int ntracks;
    tl_event *events;
    int nevents, capacity;
    long long dropped;  // records CUPTI could not deliver
    char program[TL_NAME];
    char processes[TL_MAX_PROCESSES][TL_NAME];  // process 0 is the program itself
    int nprocesses;
    uint64_t base_ns;  // the clock at time 0 of the events (read from JSON, where the times are
                       // relative; 0 when recorded): CUPTI stamps with CLOCK_REALTIME, so the
                       // traces of several processes on one machine line up (tracestat --merge)
} timeline;

// ---- timeline.c

void tl_init(timeline *t, const char *program);
void tl_free(timeline *t);
// Finds or adds the track of that name and kind in process 0; returns its index.
int tl_find_track(timeline *t, const char *name, tl_track_kind kind);
int tl_find_track_in(timeline *t, int process, const char *name, tl_track_kind kind);
int tl_is_host(const timeline *t, int track);  // a thread's track, not a stream's
void tl_add(timeline *t, const tl_event *e);
void tl_sort(timeline *t);  // by track order (host first), then start time
// Folds each process's stream tracks the program did not name ("stream N": a replayed graph runs
// its nodes on streams of its own, 36 and more for lesson 15's twelve graphs) onto as few tracks as
// their events' overlap needs, "lane 1", "lane 2", ...; the other tracks keep their order. Returns
// how many tracks were folded (tracestat --fold-streams).
int tl_fold_unnamed_streams(timeline *t);

// A time window [start, end): the last phase range of that name, or, within it,
// from the start of batch `first`'s prep range to the start of batch first+count's
// (or the phase's end). Returns 0 when there is no such phase.
int tl_phase_window(const timeline *t, const char *phase, uint64_t *start, uint64_t *end);
void tl_batch_window(const timeline *t, int first, int count, uint64_t *start, uint64_t *end);

// 1 for a kernel of cuBLAS (or CUTLASS under it), by name: "...gemm...",
// "Kernel2", "splitKreduce_kernel". Used to colour, never to check.
int tl_library_kernel(const char *name);

// 1 for a kernel of NCCL, by name: "nccl..." ("ncclDevKernel_AllReduce_..."), or
// "oneRankReduce", what an all-reduce of a one-rank communicator runs.
int tl_comm_kernel(const char *name);

// ---- timeline_json.c

// Chrome Trace Event JSON: complete events ("ph":"X") in microseconds, one track
// per stream and per host thread, named with metadata events, one event per line.
// Where two events on one track would partly overlap (clock granularity), the
// later one starts where the earlier ends, so that every track nests.
void tl_write_json(const timeline *t, FILE *out);
// Reads back what tl_write_json wrote: TL_READ_OK, TL_READ_NOT_A_TRACE, or
// TL_READ_CUT_SHORT when the file ends before its closing "otherData" line or in the
// middle of an event (a trace whose writer was stopped: its figures would be wrong).
typedef enum { TL_READ_OK = 0, TL_READ_NOT_A_TRACE, TL_READ_CUT_SHORT } tl_read_status;
int tl_read_json(timeline *t, FILE *in);

// ---- timeline_figures.c

typedef struct {
    double span_ms;
    double gpu_busy;     // fraction of the window with a kernel or a copy running
    double copy_hidden;  // fraction of copy time during which a kernel ran too
    double h2d_hidden;   // the same for copies to the GPU alone
    double kernel_copy_overlap_ms;
    double host_blocked;       // fraction of the window the main thread spent in sync or slot-wait ranges
    double prep_under_gpu;     // fraction of prep time during which the GPU was busy
    double largest_gap_ms;     // longest time with no kernel and no copy
    int kernels, own_kernels;  // own: not a library's (see tl_library_kernel)
    int h2d, d2h, copies;
    int pageable_copies;
    int host_syncs;      // CUPTI: event, stream and device synchronisations
    int graph_kernels;   // kernels that ran as nodes of a CUDA graph
    int graph_launches;  // cudaGraphLaunch calls (issue ranges with a graph id)
    int comm_kernels;    // NCCL's kernels (tl_comm_kernel)
    double comm_ms;      // time with an NCCL kernel running, summed over the processes
    double comm_hidden;  // fraction of it during which a kernel of the same process that is not
                         // NCCL's ran too: communication hidden under compute
} tl_figures;

tl_figures tl_analyse(const timeline *t, uint64_t start, uint64_t end);

// Of the time an NCCL kernel of `process` (-1: of every process, each against its own
// kernels) ran in the window, the fraction during which another kernel of that process
// ran too; *comm_ms (if not NULL) gets that NCCL time.
double tl_comm_hidden(const timeline *t, int process, uint64_t start, uint64_t end, double *comm_ms);

// Communication that shows in a step: each NCCL kernel of `process` (-1: every process, each
// against its own kernels) that starts in the window, split into the time some other kernel
// of that process ran beside it (hidden) and the time none did (exposed: the communication
// stream busy while the compute stream is not). With groups N > 0 the NCCL kernels come N to a
// step in issue order (lesson 12: one all-reduce per bucket), and the last of each group, the
// last bucket, which no later compute can hide, is counted apart from the others.
typedef struct {
    int kernels;                              // NCCL kernels that start in the window
    int whole_groups;                         // groups > 0: kernels is a multiple of groups
    double comm_ms, exposed_ms;               // all of them
    double last_ms, last_exposed_ms;          // the last of each group (groups > 0)
    double hideable_ms, hideable_exposed_ms;  // the others: what buckets can hide
} tl_comm_split;

tl_comm_split tl_comm_exposed(const timeline *t, int process, uint64_t start, uint64_t end, int groups);

// The share of the window during which a kernel of `process` (-1: of any) that is not NCCL's
// ran: 1 minus it is what a pipeline stage's GPU spent idle or waiting in NCCL, its bubble
// (lesson 13).
double tl_compute_busy(const timeline *t, int process, uint64_t start, uint64_t end);

// Time both tracks had work running at once, in milliseconds: any kernel or copy,
// or with kernels_only, kernels alone.
double tl_track_overlap_ms(const timeline *t, int a, int b, uint64_t start, uint64_t end, int kernels_only);

// Prints one line of figures (the columns of tl_print_figures_header).
void tl_print_figures_header(FILE *out);
void tl_print_figures(FILE *out, const char *label, const tl_figures *f);

// ---- timeline_draw.c

// A text Gantt chart of the window, one row per track, `width` columns in all.
// `ns_per_column` of 0 fits the window; a fixed value lets two windows share a scale.
void tl_render_text(const timeline *t, uint64_t start, uint64_t end, int width, double ns_per_column, const char *title,
                    FILE *out);

// The same as an SVG picture, `ms_axis` milliseconds wide (0: the window's own span).
void tl_render_svg(const timeline *t, uint64_t start, uint64_t end, double ms_axis, const char *title, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
