// trace.c: recording a timeline with CUPTI's Activity API, plus NVTX ranges.
//
// Kernels are recorded as CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (KIND_KERNEL
// would serialise every kernel), copies as MEMCPY, host waits as SYNCHRONIZATION
// (less the cudaEventQuery calls CUPTI also reports there, recognised through a
// callback on that one function), graph launches as issue ranges (a callback on
// cudaGraphLaunch; the kernels a graph runs carry its graphId). CUPTI hands
// records over in buffers, possibly from its own thread; host ranges are stamped
// with cuptiGetTimestamp, the clock of those records.
// What a record becomes is read in trace_records.c; the report printed at the end
// is trace_report.c's. This file records, and owns the state.
#define _POSIX_C_SOURCE 200809L
#include "common/trace/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>  // also the API calls' parameters (cudaGraphLaunch_v10000_params)
#include <cupti_runtime_cbid.h>
#include <nvtx3/nvToolsExt.h>

#include "common/base/args.h"  // usage_error
#include "common/base/check.h"
#include "common/trace/timeline.h"
#include "common/trace/trace_internal.h"  // trace_record_event, trace_drop_syncs, trace_report

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

#define CUPTI_CHECK(expr)                                                                 \
    do {                                                                                  \
        CUptiResult check_res_ = (expr);                                                  \
        if (check_res_ != CUPTI_SUCCESS) {                                                \
            const char *check_text_ = "unknown CUPTI error";                              \
            cuptiGetResultString(check_res_, &check_text_);                               \
            check_fail(CALL_TEXT(#expr), __FILE__, __LINE__, "CUptiResult", check_text_); \
        }                                                                                 \
    } while (0)

#define BUFFER_BYTES (8u << 20)
#define MAX_STREAMS 64

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
    trace_window windows[TRACE_MAX_WINDOWS];
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
static void CUPTIAPI on_api_call(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
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

static int stream_track(uint32_t id)  // call with the lock held
{
    for (int i = 0; i < g.nstreams; i++)
        if (g.streams[i].id == id) return g.streams[i].track;
    char name[32];
    snprintf(name, sizeof name, "stream %u", id);
    return tl_find_track(&g.tl, name, 0);
}

static void add_record(const CUpti_Activity *record)  // call with the lock held
{
    tl_event e;
    uint32_t stream_id = 0;
    if (!trace_record_event(record, &e, &stream_id)) return;
    if (e.kind != TL_SYNC) e.track = stream_track(stream_id);
    tl_add(&g.tl, &e);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid)
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

// Removes the synchronisation records that were cudaEventQuery calls: the host
// did not wait in them. Call with the lock held, after the last flush.
static void drop_queries(void)
{
    trace_drop_syncs(&g.tl, g.queries, g.nqueries);
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
    if (g.nwindows < TRACE_MAX_WINDOWS) {
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
        if (fclose(g.json) != 0) stderr_line("trace: writing %s failed", g.json_path);
        g.json = NULL;
    }
    trace_report(out, &g.tl, g.json_path, g.timeline, g.windows, g.nwindows);
    tl_free(&g.tl);
    g.on = 0;
    pthread_mutex_unlock(&g.lock);
}
