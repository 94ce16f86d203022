// trace.c: recording a timeline with CUPTI's Activity API, plus NVTX ranges.
//
// Kernels are recorded as CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (KIND_KERNEL
// would serialise every kernel), copies as MEMCPY, host waits as SYNCHRONIZATION
// (less the cudaEventQuery calls CUPTI also reports there, recognised through a
// callback on that one function), graph launches as issue ranges (a callback on
// cudaGraphLaunch; the kernels a graph runs carry its graphId). CUPTI hands
// records over in buffers, possibly from its own thread; host ranges are stamped
// with cuptiGetTimestamp, the clock of those records.
#define _POSIX_C_SOURCE 200809L
#include "trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>  // also the API calls' parameters (cudaGraphLaunch_v10000_params)
#include <cupti_runtime_cbid.h>
#include <nvtx3/nvToolsExt.h>

#include "args.h"  // usage_error
#include "check.h"
#include "timeline.h"

#define CUPTI_CHECK(expr)                                                                  \
    do {                                                                                   \
        CUptiResult check_res_ = (expr);                                                   \
        if (check_res_ != CUPTI_SUCCESS) {                                                 \
            const char *check_text_ = "unknown CUPTI error";                               \
            cuptiGetResultString(check_res_, &check_text_);                                \
            check_fail(#expr, __FILE__, __LINE__, "CUptiResult", check_text_);             \
        }                                                                                  \
    } while (0)

#define BUFFER_BYTES (8u << 20)
#define MAX_STREAMS 64
#define MAX_WINDOWS 4

static struct {
    int on, paused;
    const char *json_path;
    FILE *json;
    int timeline;
    timeline tl;
    pthread_mutex_t lock;
    struct {
        uint32_t id;
        int track;
    } streams[MAX_STREAMS];
    int nstreams;
    struct {
        const char *phase;
        int first, count;
    } windows[MAX_WINDOWS];
    int nwindows;
    CUpti_SubscriberHandle subscriber;
    uint32_t *queries;  // correlation ids of cudaEventQuery calls
    int nqueries, cap_queries;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int thread_track = -1;

// ----------------------------------------------------------------------------
// CUPTI's buffers, and the two API calls we watch

// A cudaGraphLaunch call, as an issue range on the calling thread's track marked
// with the id CUPTI gives the graph exec launched: the trace counts launches from
// the calls themselves, not from what the program says it did.
static void record_graph_launch(const CUpti_CallbackData *info)
{
    if (info->callbackSite == CUPTI_API_ENTER) {  // the entry's time, handed to the exit callback
        CUPTI_CHECK(cuptiGetTimestamp(info->correlationData));
        return;
    }
    tl_event e;
    memset(&e, 0, sizeof e);
    e.kind = TL_HOST;
    e.range = TL_RANGE_ISSUE;
    snprintf(e.name, sizeof e.name, "cudaGraphLaunch");
    e.batch = -1;
    e.start = *info->correlationData;
    CUPTI_CHECK(cuptiGetTimestamp(&e.end));
    const cudaGraphLaunch_v10000_params *p = (const cudaGraphLaunch_v10000_params *)info->functionParams;
    uint32_t id = 0;
    // checked, but not fatal: without its id the range still marks a graph launch
    if (!p->graphExec || cuptiGetGraphExecId((CUgraphExec)p->graphExec, &id) != CUPTI_SUCCESS) id = 0;
    e.graph = id ? id : UINT32_MAX;  // 0 would read as "no graph"
    pthread_mutex_lock(&g.lock);
    if (thread_track < 0) thread_track = tl_find_track(&g.tl, "thread", TL_TRACK_THREAD);
    e.track = thread_track;
    tl_add(&g.tl, &e);
    pthread_mutex_unlock(&g.lock);
}

// Callbacks on two functions (not an activity record for every API call, which
// costs about a microsecond each): cudaGraphLaunch (above), and cudaEventQuery,
// which CUPTI reports as an event synchronisation too: their ids are remembered,
// to drop their records at the end.
static void CUPTIAPI on_api_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    const CUpti_CallbackData *info = (const CUpti_CallbackData *)data;
    (void)userdata, (void)domain;
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) {
        record_graph_launch(info);
        return;
    }
    if (info->callbackSite != CUPTI_API_EXIT) return;
    pthread_mutex_lock(&g.lock);
    if (g.nqueries == g.cap_queries) {
        int cap = g.cap_queries ? 2 * g.cap_queries : 1024;
        uint32_t *grown = realloc(g.queries, sizeof(uint32_t) * (size_t)cap);
        if (grown) {
            g.queries = grown;
            g.cap_queries = cap;
        }
    }
    if (g.nqueries < g.cap_queries) g.queries[g.nqueries++] = info->correlationId;
    pthread_mutex_unlock(&g.lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);  // records must be 8-byte aligned
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

// "_Z16fma_chain_kernelPKfPfii" -> "fma_chain_kernel". Of a nested name
// ("_ZN7cutlass7Kernel2I...") the last part before any template arguments.
static void short_name(const char *mangled, char *out, size_t size)
{
    const char *p = mangled, *last = NULL;
    long last_len = 0;
    if (strncmp(p, "_Z", 2) == 0) {
        p += 2;
        int nested = *p == 'N';
        if (nested) p++;
        while (*p == 'K' || *p == 'V' || *p == 'r') p++;  // qualifiers
        while (*p >= '0' && *p <= '9') {
            char *end;
            long len = strtol(p, &end, 10);
            if (len <= 0 || (long)strlen(end) < len) break;
            last = end;
            last_len = len;
            p = end + len;
            if (!nested) break;
        }
    }
    if (last)
        snprintf(out, size, "%.*s", (int)(last_len < (long)size - 1 ? last_len : (long)size - 1), last);
    else
        snprintf(out, size, "%s", mangled);
}

static int stream_track(uint32_t id)  // call with the lock held
{
    for (int i = 0; i < g.nstreams; i++)
        if (g.streams[i].id == id) return g.streams[i].track;
    char name[32];
    snprintf(name, sizeof name, "stream %u", id);
    return tl_find_track(&g.tl, name, 0);
}

static void add_record(const CUpti_Activity *record)
{
    tl_event e;
    memset(&e, 0, sizeof e);
    e.batch = -1;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
        e.kind = TL_KERNEL;
        e.graph = k->graphId;  // 0 unless a graph launch ran it
        short_name(k->name, e.name, sizeof e.name);
        e.start = k->start;
        e.end = k->end;
        e.track = stream_track(k->streamId);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)record;
        e.kind = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? TL_H2D
                 : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? TL_D2H
                                                                  : TL_COPY;
        e.bytes = (long long)m->bytes;
        e.pageable = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
                     m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
        snprintf(e.name, sizeof e.name, "%s %.2f MiB%s",
                 e.kind == TL_H2D ? "copy to GPU" : e.kind == TL_D2H ? "copy to host" : "copy",
                 m->bytes / 1048576.0, e.pageable ? " (pageable)" : "");
        e.start = m->start;
        e.end = m->end;
        e.track = stream_track(m->streamId);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)record;
        if (s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) return;  // not a host wait
        e.kind = TL_SYNC;
        e.correlation = s->correlationId;
        snprintf(e.name, sizeof e.name, "%s",
                 s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE    ? "cudaEventSynchronize"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ? "cudaStreamSynchronize"
                                                                                     : "cudaDeviceSynchronize");
        e.start = s->start;
        e.end = s->end;
        e.track = -1;
    } else {
        return;
    }
    tl_add(&g.tl, &e);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&g.lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) add_record(record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        g.tl.dropped += (long long)dropped;
    pthread_mutex_unlock(&g.lock);
    (void)size;
    free(buffer);
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// Removes the synchronisation records that were cudaEventQuery calls: the host
// did not wait in them. Call with the lock held, after the last flush.
static void drop_queries(void)
{
    qsort(g.queries, (size_t)g.nqueries, sizeof(uint32_t), compare_u32);
    int kept = 0;
    for (int i = 0; i < g.tl.nevents; i++) {
        const tl_event *e = &g.tl.events[i];
        if (e->kind == TL_SYNC &&
            bsearch(&e->correlation, g.queries, (size_t)g.nqueries, sizeof(uint32_t), compare_u32))
            continue;
        g.tl.events[kept++] = *e;
    }
    g.tl.nevents = kept;
    free(g.queries);
    g.queries = NULL;
    g.nqueries = g.cap_queries = 0;
}

// ----------------------------------------------------------------------------
// the interface

void trace_start(const char *prog, const char *json_path, int timeline_on)
{
    if (!json_path && !timeline_on) return;
    if (json_path) {
        g.json = fopen(json_path, "w");
        if (!g.json) usage_error(prog, "--trace %s: cannot write that file", json_path);
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;  // gpu_open reports it
    tl_init(&g.tl, prog);
    g.json_path = json_path;
    g.timeline = timeline_on;
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
    CUPTI_CHECK(cuptiSubscribe(&g.subscriber, on_api_call, NULL));
    CUPTI_CHECK(cuptiEnableCallback(1, g.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020));
    CUPTI_CHECK(cuptiEnableCallback(1, g.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
    g.on = 1;
}

int trace_on(void) { return g.on; }

static void set_activities(int enable)
{
    CUpti_ActivityKind kinds[3] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                   CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
    for (int k = 0; k < 3; k++) CUPTI_CHECK(enable ? cuptiActivityEnable(kinds[k]) : cuptiActivityDisable(kinds[k]));
    CUPTI_CHECK(cuptiEnableCallback(enable, g.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020));
    CUPTI_CHECK(cuptiEnableCallback(enable, g.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
}

void trace_pause(void)
{
    if (!g.on || g.paused) return;
    set_activities(0);
    g.paused = 1;
}

void trace_resume(void)
{
    if (!g.on || !g.paused) return;
    set_activities(1);
    g.paused = 0;
}

void trace_add_window(const char *phase, int first_batch, int count)
{
    if (g.nwindows < MAX_WINDOWS) {
        g.windows[g.nwindows].phase = phase;
        g.windows[g.nwindows].first = first_batch;
        g.windows[g.nwindows].count = count;
        g.nwindows++;
    }
}

void trace_name_stream(cudaStream_t stream, const char *name)
{
    if (!g.on) return;
    uint32_t id = 0;
    CUPTI_CHECK(cuptiGetStreamIdEx(NULL, (CUstream)stream, 0, &id));
    pthread_mutex_lock(&g.lock);
    if (g.nstreams < MAX_STREAMS) {
        g.streams[g.nstreams].id = id;
        g.streams[g.nstreams].track = tl_find_track(&g.tl, name, 0);
        g.nstreams++;
    }
    pthread_mutex_unlock(&g.lock);
}

void trace_name_thread(const char *name, tl_track_kind kind)
{
    if (!g.on) return;
    pthread_mutex_lock(&g.lock);
    thread_track = tl_find_track(&g.tl, name, kind);
    pthread_mutex_unlock(&g.lock);
}

trace_range trace_begin(tl_range kind, const char *name, int batch)
{
    nvtxRangePushA(name);
    trace_range r = {kind, name, batch, 0};
    if (g.on && !g.paused) CUPTI_CHECK(cuptiGetTimestamp(&r.begin_ns));
    return r;
}

void trace_end(trace_range *r)
{
    nvtxRangePop();
    if (!g.on || g.paused || !r->begin_ns) return;
    tl_event e;
    memset(&e, 0, sizeof e);
    e.kind = TL_HOST;
    e.range = r->kind;
    snprintf(e.name, sizeof e.name, "%s", r->name);
    e.batch = r->batch;
    e.start = r->begin_ns;
    CUPTI_CHECK(cuptiGetTimestamp(&e.end));
    pthread_mutex_lock(&g.lock);
    if (thread_track < 0) thread_track = tl_find_track(&g.tl, "thread", TL_TRACK_THREAD);
    e.track = thread_track;
    tl_add(&g.tl, &e);
    pthread_mutex_unlock(&g.lock);
}

// The windows the report shows: each phase asked for, or every phase there is.
static void report(FILE *out)
{
    const timeline *t = &g.tl;
    fprintf(out, "trace: %d events recorded, %lld dropped%s%s\n", t->nevents, t->dropped,
            g.json_path ? ", written to " : "", g.json_path ? g.json_path : "");
    tl_print_figures_header(out);
    const char *seen[32];
    int nseen = 0, pageable = 0;
    for (int i = t->nevents - 1; i >= 0 && nseen < 32; i--) {  // the last occurrence of each phase
        const tl_event *e = &t->events[i];
        int known = 0;
        if (e->kind != TL_HOST || e->range != TL_RANGE_PHASE) continue;
        for (int k = 0; k < nseen; k++) known |= strcmp(seen[k], e->name) == 0;
        if (!known) seen[nseen++] = e->name;
    }
    for (int k = nseen - 1; k >= 0; k--) {
        uint64_t a, b;
        tl_phase_window(t, seen[k], &a, &b);
        tl_figures f = tl_analyse(t, a, b);
        tl_print_figures(out, seen[k], &f);
        pageable += f.pageable_copies;
    }
    if (pageable)
        fprintf(out, "  warning: %d copies in these windows came from or went to pageable memory: the driver "
                     "stages them, and they do not overlap\n", pageable);
    if (!g.timeline) return;
    double scale = 0;  // every window on the scale of the longest
    uint64_t a[MAX_WINDOWS], b[MAX_WINDOWS];
    int have[MAX_WINDOWS];
    for (int w = 0; w < g.nwindows; w++) {
        have[w] = tl_phase_window(t, g.windows[w].phase, &a[w], &b[w]);
        if (have[w] && g.windows[w].first >= 0) tl_batch_window(t, g.windows[w].first, g.windows[w].count, &a[w], &b[w]);
        if (have[w] && (b[w] - a[w]) / 89.0 > scale) scale = (b[w] - a[w]) / 89.0;
    }
    for (int w = 0; w < g.nwindows; w++) {
        if (!have[w]) continue;
        char title[128];
        if (g.windows[w].first >= 0)
            snprintf(title, sizeof title, "\ntimeline of %s, batches %d to %d", g.windows[w].phase,
                     g.windows[w].first, g.windows[w].first + g.windows[w].count - 1);
        else
            snprintf(title, sizeof title, "\ntimeline of %s", g.windows[w].phase);
        tl_render_text(t, a[w], b[w], 100, scale, title, out);
    }
}

void trace_finish(FILE *out)
{
    if (!g.on) return;
    trace_resume();
    CUDA_CHECK(cudaDeviceSynchronize());
    CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
    CUPTI_CHECK(cuptiUnsubscribe(g.subscriber));
    pthread_mutex_lock(&g.lock);
    drop_queries();
    tl_sort(&g.tl);
    if (g.json) {
        tl_write_json(&g.tl, g.json);
        if (fclose(g.json) != 0) fprintf(stderr, "trace: writing %s failed\n", g.json_path);
        g.json = NULL;
    }
    report(out);
    tl_free(&g.tl);
    g.on = 0;
    pthread_mutex_unlock(&g.lock);
}
