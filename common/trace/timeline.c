// timeline.c: the model and its store: tracks, events, sorting, the windows a
// report measures, and what a kernel is by its name. Writing and reading JSON are
// in timeline_json.c, the figures in timeline_figures.c, the drawings in
// timeline_draw.c (one header for all: timeline.h).
#define _POSIX_C_SOURCE 200809L
#include "common/trace/timeline.h"

#include <stdlib.h>
#include <string.h>

static const char *const RANGE_NAMES[TL_RANGE_KINDS] = {"host", "phase",     "prep",       "issue",
                                                        "sync", "slot_wait", "loader_wait"};

const char *tl_range_name(tl_range r) { return r >= 0 && r < TL_RANGE_KINDS ? RANGE_NAMES[r] : "host"; }

void tl_init(timeline *t, const char *program)
{
    memset(t, 0, sizeof *t);
    snprintf(t->program, sizeof t->program, "%s", program ? program : "");
    snprintf(t->processes[0], sizeof t->processes[0], "%s", t->program);
    t->nprocesses = 1;
}

void tl_free(timeline *t)
{
    free(t->events);
    t->events = NULL;
    t->nevents = t->capacity = 0;
}

int tl_find_track_in(timeline *t, int process, const char *name, tl_track_kind kind)
{
    for (int i = 0; i < t->ntracks; i++)
        if (t->tracks[i].process == process && t->tracks[i].kind == kind && strcmp(t->tracks[i].name, name) == 0)
            return i;
    if (t->ntracks == TL_MAX_TRACKS) return TL_MAX_TRACKS - 1;  // share the last track rather than fail
    tl_track *k = &t->tracks[t->ntracks];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->kind = kind;
    k->process = process;
    return t->ntracks++;
}

int tl_find_track(timeline *t, const char *name, tl_track_kind kind) { return tl_find_track_in(t, 0, name, kind); }

int tl_is_host(const timeline *t, int track) { return t->tracks[track].kind != TL_TRACK_STREAM; }

void tl_add(timeline *t, const tl_event *e)
{
    if (t->nevents == t->capacity) {
        int cap = t->capacity ? 2 * t->capacity : 4096;
        tl_event *grown = realloc(t->events, sizeof(tl_event) * (size_t)cap);
        if (!grown) return;  // out of memory: the event is lost, like a dropped record
        t->events = grown;
        t->capacity = cap;
    }
    t->events[t->nevents++] = *e;
}

static int by_start(const void *a, const void *b)
{
    const tl_event *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1;  // the enclosing range first
    return x->track - y->track;
}

void tl_sort(timeline *t)
{
    if (t->nevents > 1) qsort(t->events, (size_t)t->nevents, sizeof(tl_event), by_start);
}

// ----------------------------------------------------------------------------
// folding the streams the program did not name

int tl_fold_unnamed_streams(timeline *t)
{
    int folded[TL_MAX_TRACKS] = {0}, map[TL_MAX_TRACKS], n = 0, nold = t->ntracks;
    for (int k = 0; k < nold; k++)
        if (t->tracks[k].kind == TL_TRACK_STREAM && strncmp(t->tracks[k].name, "stream ", 7) == 0) {
            folded[k] = 1;
            n++;
        }
    if (n == 0) return 0;
    tl_sort(t);  // by start: each event then goes onto the first lane already free at its start
    tl_track old[TL_MAX_TRACKS];
    memcpy(old, t->tracks, sizeof old);
    t->ntracks = 0;
    for (int k = 0; k < nold; k++)
        if (!folded[k]) map[k] = tl_find_track_in(t, old[k].process, old[k].name, old[k].kind);
    uint64_t lane_end[TL_MAX_PROCESSES][TL_MAX_TRACKS];
    int lanes[TL_MAX_PROCESSES] = {0};
    for (int i = 0; i < t->nevents; i++) {
        tl_event *e = &t->events[i];
        if (e->track < 0) continue;  // a synchronisation: on no track
        if (!folded[e->track]) {
            e->track = map[e->track];
            continue;
        }
        int p = old[e->track].process, l = 0;
        while (l < lanes[p] && lane_end[p][l] > e->start) l++;
        if (l == lanes[p] && lanes[p] < TL_MAX_TRACKS) lane_end[p][lanes[p]++] = 0;
        if (l == lanes[p]) l--;  // no lane left: share the last one
        if (e->end > lane_end[p][l]) lane_end[p][l] = e->end;
        char name[TL_NAME];
        snprintf(name, sizeof name, "lane %d", l + 1);
        e->track = tl_find_track_in(t, p, name, TL_TRACK_STREAM);
    }
    tl_sort(t);
    return n;
}

// ----------------------------------------------------------------------------
// windows

int tl_phase_window(const timeline *t, const char *phase, uint64_t *start, uint64_t *end)
{
    int found = 0;
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->kind == TL_HOST && e->range == TL_RANGE_PHASE && strcmp(e->name, phase) == 0 &&
            (!found || e->start >= *start)) {
            *start = e->start;
            *end = e->end;
            found = 1;
        }
    }
    return found;
}

static int prep_start(const timeline *t, int batch, uint64_t lo, uint64_t hi, uint64_t *at)
{
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->kind == TL_HOST && e->range == TL_RANGE_PREP && e->batch == batch && e->start >= lo && e->start < hi) {
            *at = e->start;
            return 1;
        }
    }
    return 0;
}

void tl_batch_window(const timeline *t, int first, int count, uint64_t *start, uint64_t *end)
{
    uint64_t lo = *start, hi = *end, at;
    if (prep_start(t, first, lo, hi, &at)) *start = at;
    if (prep_start(t, first + count, lo, hi, &at)) *end = at;
}

// ----------------------------------------------------------------------------
// kernels by name

// NCCL's kernels: "ncclDevKernel_...", and with one rank its copy kernel, whose name
// CUPTI gives as "oneRankReduce" or, file-static, "__nv_static_..._onerank_cu_...".
int tl_comm_kernel(const char *name)
{
    return strncmp(name, "nccl", 4) == 0 || strstr(name, "oneRankReduce") || strstr(name, "onerank_cu");
}

int tl_library_kernel(const char *name)
{
    return strstr(name, "gemm") || strstr(name, "splitK") || strstr(name, "cutlass") || strncmp(name, "Kernel", 6) == 0;
}
