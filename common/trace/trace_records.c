// trace_records.c: what a CUPTI activity record becomes on the timeline (trace.c
// hands over the records; this file reads them).
#define _POSIX_C_SOURCE 200809L
#include "common/trace/trace_internal.h"

#include <stdlib.h>
#include <string.h>

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

int trace_record_event(const CUpti_Activity *record, tl_event *e, uint32_t *stream_id)
{
    memset(e, 0, sizeof *e);
    e->batch = -1;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
        e->kind = TL_KERNEL;
        e->graph = k->graphId;  // 0 unless a graph launch ran it
        short_name(k->name, e->name, sizeof e->name);
        e->start = k->start;
        e->end = k->end;
        *stream_id = k->streamId;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)record;
        e->kind = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? TL_H2D
                  : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? TL_D2H
                                                                   : TL_COPY;
        e->bytes = (long long)m->bytes;
        e->pageable = m->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
                      m->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
        snprintf(e->name, sizeof e->name, "%s %.2f MiB%s",
                 e->kind == TL_H2D   ? "copy to GPU"
                 : e->kind == TL_D2H ? "copy to host"
                                     : "copy",
                 m->bytes / 1048576.0, e->pageable ? " (pageable)" : "");
        e->start = m->start;
        e->end = m->end;
        *stream_id = m->streamId;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)record;
        if (s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT) return 0;  // not a host wait
        e->kind = TL_SYNC;
        e->correlation = s->correlationId;
        snprintf(e->name, sizeof e->name, "%s",
                 s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE    ? "cudaEventSynchronize"
                 : s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE ? "cudaStreamSynchronize"
                                                                                     : "cudaDeviceSynchronize");
        e->start = s->start;
        e->end = s->end;
        e->track = -1;
    } else {
        return 0;
    }
    return 1;
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void trace_drop_syncs(timeline *t, uint32_t *ids, int n)
{
    qsort(ids, (size_t)n, sizeof(uint32_t), compare_u32);
    int kept = 0;
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->kind == TL_SYNC && bsearch(&e->correlation, ids, (size_t)n, sizeof(uint32_t), compare_u32)) continue;
        t->events[kept++] = *e;
    }
    t->nevents = kept;
}
