// timeline.c: storing, writing, reading, measuring and drawing a timeline.
#define _POSIX_C_SOURCE 200809L
#include "timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"  // host_alloc
#include "json.h"  // json_write_string

static const char *const RANGE_NAMES[TL_RANGE_KINDS] = {"host", "phase", "prep", "issue", "sync", "slot_wait",
                                                        "loader_wait"};
static const char *const TRACK_KINDS[] = {"stream", "main", "thread"};

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
// JSON

static const char *category(const tl_event *e)
{
    switch (e->kind) {
    case TL_KERNEL: return "kernel";
    case TL_H2D: return "h2d";
    case TL_D2H: return "d2h";
    case TL_COPY: return "copy";
    case TL_HOST: return tl_range_name(e->range);
    case TL_SYNC: return "cuda_sync";
    }
    return "?";
}

void tl_write_json(const timeline *t, FILE *out)
{
    uint64_t base = UINT64_MAX;
    for (int i = 0; i < t->nevents; i++)
        if (t->events[i].start < base) base = t->events[i].start;
    if (base == UINT64_MAX) base = 0;
    uint64_t *last_end = calloc((size_t)t->ntracks + 1, sizeof(uint64_t));

    fputs("{\"traceEvents\":[", out);
    for (int p = 0; p < t->nprocesses; p++) {
        fprintf(out, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
                p ? "," : "", p + 1);
        json_write_string(out, t->processes[p]);
        fputs("}}", out);
    }
    for (int k = 0; k < t->ntracks; k++) {
        int pid = t->tracks[k].process + 1;
        fprintf(out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid,
                k + 1);
        json_write_string(out, t->tracks[k].name);
        fprintf(out, ",\"kind\":\"%s\"}}", TRACK_KINDS[t->tracks[k].kind]);
        fprintf(out, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, k + 1, (tl_is_host(t, k) ? 0 : TL_MAX_TRACKS) + k + 1);  // host threads on top
    }
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        uint64_t start = e->start, end = e->end;
        if (e->kind == TL_SYNC) {
            fputs(",\n{\"name\":", out);
            json_write_string(out, e->name);
            fprintf(out, ",\"cat\":\"cuda_sync\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%.3f,\"pid\":1,\"tid\":0,"
                         "\"args\":{\"waited_us\":%.3f}}",
                    (end - base) / 1e3, (end - start) / 1e3);
            continue;
        }
        if (!tl_is_host(t, e->track)) {  // a stream runs one thing at a time: no partial overlap
            if (start < last_end[e->track]) start = last_end[e->track];
            if (end < start) end = start;
            last_end[e->track] = end;
        }
        fputs(",\n{\"name\":", out);
        json_write_string(out, e->name);
        fprintf(out, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                     "\"args\":{\"batch\":%d,\"bytes\":%lld,\"pageable\":%d",
                category(e), (start - base) / 1e3, (end - start) / 1e3, t->tracks[e->track].process + 1,
                e->track + 1, e->batch, e->bytes, e->pageable);
        if (e->graph) fprintf(out, ",\"graph\":%u", e->graph);  // only when nonzero: older traces read the same
        fputs("}}", out);
    }
    fprintf(out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":");
    json_write_string(out, t->program);
    fprintf(out, ",\"dropped\":%lld,\"base_ns\":%llu}}\n", t->dropped, (unsigned long long)(t->base_ns + base));
    free(last_end);
}

// Finds "key": in a line and returns a pointer just after the colon, or NULL.
static const char *after_key(const char *line, const char *key)
{
    char pattern[80];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(line, pattern);
    return p ? p + strlen(pattern) : NULL;
}

static int read_string(const char *line, const char *key, char *out, size_t size)
{
    const char *p = after_key(line, key);
    if (!p || *p != '"') return 0;
    size_t n = 0;
    for (p++; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            p++;
            c = *p == 'n' ? '\n' : *p;
            if (*p == 'u') {  // \u00XX: only control characters are written so
                unsigned v = 0;
                if (sscanf(p + 1, "%4x", &v) == 1) p += 4;
                c = (char)v;
            }
        }
        if (n + 1 < size) out[n++] = c;
    }
    out[n] = '\0';
    return *p == '"';
}

static int read_number(const char *line, const char *key, double *out)
{
    const char *p = after_key(line, key);
    return p && sscanf(p, "%lf", out) == 1;
}

int tl_read_json(timeline *t, FILE *in)
{
    tl_init(t, "");
    char line[4096];
    t->nprocesses = 1;
    int tid_track[TL_MAX_TRACKS + 1];
    for (int k = 0; k <= TL_MAX_TRACKS; k++) tid_track[k] = -1;
    int saw_header = 0;
    while (fgets(line, sizeof line, in)) {
        if (strstr(line, "\"traceEvents\"")) saw_header = 1;
        char ph[8] = "", name[TL_NAME] = "", cat[16] = "";
        double v;
        if (strstr(line, "\"otherData\"")) {
            read_string(strstr(line, "\"otherData\""), "program", t->program, sizeof t->program);
            if (read_number(line, "dropped", &v)) t->dropped = (long long)v;
            const char *b = after_key(line, "base_ns");  // read whole: a double would round it
            unsigned long long base = 0;
            if (b && sscanf(b, "%llu", &base) == 1) t->base_ns = base;
            continue;
        }
        if (!read_string(line, "ph", ph, sizeof ph)) continue;
        read_string(line, "name", name, sizeof name);
        double tid = 0, pid = 1;
        read_number(line, "tid", &tid);
        read_number(line, "pid", &pid);
        if (pid < 1 || pid > TL_MAX_PROCESSES) return 1;
        if (strcmp(ph, "M") == 0) {
            char value[TL_NAME] = "", kind[16] = "";
            const char *args = after_key(line, "args");
            if (strcmp(name, "process_name") == 0) {
                if (!args || !read_string(args, "name", value, sizeof value)) return 1;
                snprintf(t->processes[(int)pid - 1], TL_NAME, "%s", value);
                if ((int)pid > t->nprocesses) t->nprocesses = (int)pid;
                continue;
            }
            if (strcmp(name, "thread_name") != 0) continue;
            if (!args || !read_string(args, "name", value, sizeof value)) return 1;
            read_string(args, "kind", kind, sizeof kind);
            if (tid < 1 || tid > TL_MAX_TRACKS) return 1;
            tl_track_kind k = TL_TRACK_STREAM;
            for (int i = 0; i < 3; i++)
                if (strcmp(kind, TRACK_KINDS[i]) == 0) k = (tl_track_kind)i;
            tid_track[(int)tid] = tl_find_track_in(t, (int)pid - 1, value, k);
            continue;
        }
        read_string(line, "cat", cat, sizeof cat);
        tl_event e;
        memset(&e, 0, sizeof e);
        snprintf(e.name, sizeof e.name, "%s", name);
        double ts = 0, dur = 0;
        if (!read_number(line, "ts", &ts)) return 1;
        if (strcmp(ph, "i") == 0) {
            read_number(line, "waited_us", &dur);
            e.kind = TL_SYNC;
            e.track = -1;
            e.end = (uint64_t)llround(ts * 1e3);
            e.start = e.end - (uint64_t)llround(dur * 1e3);
            tl_add(t, &e);
            continue;
        }
        if (strcmp(ph, "X") != 0 || !read_number(line, "dur", &dur)) return 1;
        if (tid < 1 || tid > TL_MAX_TRACKS || tid_track[(int)tid] < 0) return 1;
        e.track = tid_track[(int)tid];
        e.kind = strcmp(cat, "kernel") == 0 ? TL_KERNEL
                 : strcmp(cat, "h2d") == 0  ? TL_H2D
                 : strcmp(cat, "d2h") == 0  ? TL_D2H
                 : strcmp(cat, "copy") == 0 ? TL_COPY
                                            : TL_HOST;
        for (int r = 0; r < TL_RANGE_KINDS && e.kind == TL_HOST; r++)
            if (strcmp(cat, RANGE_NAMES[r]) == 0) e.range = (tl_range)r;
        e.start = (uint64_t)llround(ts * 1e3);
        e.end = e.start + (uint64_t)llround(dur * 1e3);
        const char *args = after_key(line, "args");
        if (args) {
            if (read_number(args, "batch", &v)) e.batch = (int)v;
            if (read_number(args, "bytes", &v)) e.bytes = (long long)v;
            if (read_number(args, "pageable", &v)) e.pageable = (int)v;
            if (read_number(args, "graph", &v)) e.graph = (uint32_t)v;
        }
        tl_add(t, &e);
    }
    return saw_header ? 0 : 1;
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
        if (e->kind == TL_HOST && e->range == TL_RANGE_PREP && e->batch == batch && e->start >= lo &&
            e->start < hi) {
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
// overlap

typedef struct {
    uint64_t a, b;
} span;

enum { GPU_WORK = 1, COPIES = 2, KERNELS = 4, PREP = 8, BLOCKED = 16, H2D = 32, COMM = 64, COMPUTE = 128 };

static int matches(const timeline *t, const tl_event *e, int what, int track)
{
    if (track >= 0 && e->track != track) return 0;
    if (track <= -2 && (e->track < 0 || t->tracks[e->track].process != -2 - track)) return 0;  // a process
    switch (e->kind) {
    case TL_KERNEL:
        if ((what & (GPU_WORK | KERNELS)) != 0) return 1;
        return (what & (tl_comm_kernel(e->name) ? COMM : COMPUTE)) != 0;
    case TL_H2D: return (what & (GPU_WORK | COPIES | H2D)) != 0;
    case TL_D2H:
    case TL_COPY: return (what & (GPU_WORK | COPIES)) != 0;
    case TL_HOST:
        if ((what & PREP) && e->range == TL_RANGE_PREP) return 1;
        return (what & BLOCKED) && t->tracks[e->track].kind == TL_TRACK_MAIN &&
               (e->range == TL_RANGE_SYNC || e->range == TL_RANGE_SLOT_WAIT);
    case TL_SYNC: return 0;
    }
    return 0;
}

static int by_span_start(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

// The union of the matching events' intervals inside [lo, hi), merged and sorted.
static int union_of(const timeline *t, int what, int track, uint64_t lo, uint64_t hi, span **out)
{
    span *s = host_alloc(sizeof(span) * (size_t)(t->nevents + 1), "the timeline's analysis");
    int n = 0;
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (!matches(t, e, what, track) || e->end <= lo || e->start >= hi) continue;
        s[n].a = e->start < lo ? lo : e->start;
        s[n].b = e->end > hi ? hi : e->end;
        n++;
    }
    qsort(s, (size_t)n, sizeof(span), by_span_start);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && s[i].a <= s[m - 1].b) {
            if (s[i].b > s[m - 1].b) s[m - 1].b = s[i].b;
        } else {
            s[m++] = s[i];
        }
    }
    *out = s;
    return m;
}

static uint64_t total(const span *s, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += s[i].b - s[i].a;
    return sum;
}

static uint64_t intersection(const span *x, int nx, const span *y, int ny)
{
    uint64_t sum = 0;
    for (int i = 0, j = 0; i < nx && j < ny;) {
        uint64_t a = x[i].a > y[j].a ? x[i].a : y[j].a;
        uint64_t b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a) sum += b - a;
        if (x[i].b < y[j].b) i++;
        else j++;
    }
    return sum;
}

static double overlap_of(const timeline *t, int what_a, int track_a, int what_b, int track_b, uint64_t lo,
                         uint64_t hi, uint64_t *total_a)
{
    span *a, *b;
    int na = union_of(t, what_a, track_a, lo, hi, &a), nb = union_of(t, what_b, track_b, lo, hi, &b);
    uint64_t both = intersection(a, na, b, nb);
    if (total_a) *total_a = total(a, na);
    free(a);
    free(b);
    return (double)both;
}

double tl_track_overlap_ms(const timeline *t, int a, int b, uint64_t start, uint64_t end, int kernels_only)
{
    int what = kernels_only ? KERNELS : GPU_WORK;
    return overlap_of(t, what, a, what, b, start, end, NULL) / 1e6;
}

// NCCL's kernels: "ncclDevKernel_...", and with one rank its copy kernel, whose name
// CUPTI gives as "oneRankReduce" or, file-static, "__nv_static_..._onerank_cu_...".
int tl_comm_kernel(const char *name)
{
    return strncmp(name, "nccl", 4) == 0 || strstr(name, "oneRankReduce") || strstr(name, "onerank_cu");
}

double tl_comm_hidden(const timeline *t, int process, uint64_t start, uint64_t end, double *comm_ms)
{
    uint64_t comm = 0, hidden = 0;
    for (int p = 0; p < t->nprocesses; p++) {
        if (process >= 0 && p != process) continue;
        uint64_t mine = 0;
        hidden += (uint64_t)overlap_of(t, COMM, -2 - p, COMPUTE, -2 - p, start, end, &mine);
        comm += mine;
    }
    if (comm_ms) *comm_ms = comm / 1e6;
    return comm ? (double)hidden / comm : 0;
}

double tl_compute_busy(const timeline *t, int process, uint64_t start, uint64_t end)
{
    if (end <= start) return 0;
    span *s;
    int n = union_of(t, COMPUTE, process >= 0 ? -2 - process : -1, start, end, &s);
    uint64_t busy = total(s, n);
    free(s);
    return (double)busy / (double)(end - start);
}

int tl_library_kernel(const char *name)
{
    return strstr(name, "gemm") || strstr(name, "splitK") || strstr(name, "cutlass") ||
           strncmp(name, "Kernel", 6) == 0;
}

tl_figures tl_analyse(const timeline *t, uint64_t lo, uint64_t hi)
{
    tl_figures f;
    memset(&f, 0, sizeof f);
    if (hi <= lo) return f;
    double span_ns = (double)(hi - lo);
    f.span_ms = span_ns / 1e6;

    span *gpu;
    int ng = union_of(t, GPU_WORK, -1, lo, hi, &gpu);
    f.gpu_busy = total(gpu, ng) / span_ns;
    uint64_t cursor = lo, gap = 0;
    for (int i = 0; i < ng; i++) {
        if (gpu[i].a - cursor > gap) gap = gpu[i].a - cursor;
        cursor = gpu[i].b;
    }
    if (hi - cursor > gap) gap = hi - cursor;
    f.largest_gap_ms = gap / 1e6;
    free(gpu);

    uint64_t copy_ns = 0, prep_ns = 0, blocked_ns = 0;
    double hidden = overlap_of(t, COPIES, -1, KERNELS, -1, lo, hi, &copy_ns);
    f.kernel_copy_overlap_ms = hidden / 1e6;
    f.copy_hidden = copy_ns ? hidden / copy_ns : 0;
    uint64_t h2d_ns = 0;
    double h2d_under = overlap_of(t, H2D, -1, KERNELS, -1, lo, hi, &h2d_ns);
    f.h2d_hidden = h2d_ns ? h2d_under / h2d_ns : 0;
    double prep_busy = overlap_of(t, PREP, -1, GPU_WORK, -1, lo, hi, &prep_ns);
    f.prep_under_gpu = prep_ns ? prep_busy / prep_ns : 0;
    span *blocked;
    int nb = union_of(t, BLOCKED, -1, lo, hi, &blocked);
    blocked_ns = total(blocked, nb);
    free(blocked);
    f.host_blocked = blocked_ns / span_ns;
    f.comm_hidden = tl_comm_hidden(t, -1, lo, hi, &f.comm_ms);

    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->start < lo || e->start >= hi) continue;
        switch (e->kind) {
        case TL_KERNEL:
            f.kernels++;
            f.own_kernels += !tl_library_kernel(e->name);
            f.comm_kernels += tl_comm_kernel(e->name);
            f.graph_kernels += e->graph != 0;
            break;
        case TL_H2D: f.h2d++; f.copies++; f.pageable_copies += e->pageable; break;
        case TL_D2H: f.d2h++; f.copies++; f.pageable_copies += e->pageable; break;
        case TL_COPY: f.copies++; break;
        case TL_SYNC: f.host_syncs++; break;
        case TL_HOST: f.graph_launches += e->range == TL_RANGE_ISSUE && e->graph != 0; break;
        }
    }
    return f;
}

void tl_print_figures_header(FILE *out)
{
    fprintf(out, "  %-12s %10s %8s %8s %8s %8s %9s\n", "window", "span", "GPU busy", "copies", "host",
            "prep", "largest");
    fprintf(out, "  %-12s %10s %8s %8s %8s %8s %9s\n", "", "", "", "hidden", "blocked", "under GPU",
            "GPU gap");
}

void tl_print_figures(FILE *out, const char *label, const tl_figures *f)
{
    fprintf(out, "  %-12s %7.2f ms %7.0f%% %7.0f%% %7.0f%% %7.0f%% %6.3f ms\n", label, f->span_ms,
            100 * f->gpu_busy, 100 * f->copy_hidden, 100 * f->host_blocked, 100 * f->prep_under_gpu,
            f->largest_gap_ms);
}

// ----------------------------------------------------------------------------
// drawing

// The symbol a row shows for an event, or 0 for events not drawn (phases, "run").
static char symbol(const tl_event *e)
{
    switch (e->kind) {
    case TL_KERNEL: return '#';
    case TL_H2D: return '>';
    case TL_D2H: return '<';
    case TL_COPY: return '~';
    case TL_SYNC: return 0;
    case TL_HOST:
        switch (e->range) {
        case TL_RANGE_PREP: return '=';
        case TL_RANGE_ISSUE: return '-';
        case TL_RANGE_SYNC: return '.';
        case TL_RANGE_SLOT_WAIT:
        case TL_RANGE_LOADER_WAIT: return ',';
        default: return 0;
        }
    }
    return 0;
}

// Tracks in the order they are drawn: process by process, host threads first, then streams.
static int display_order(const timeline *t, int *order)
{
    int n = 0;
    for (int p = 0; p < t->nprocesses; p++)
        for (int host = 1; host >= 0; host--)
            for (int k = 0; k < t->ntracks; k++)
                if (t->tracks[k].process == p && tl_is_host(t, k) == host) order[n++] = k;
    return n;
}

static int track_in_window(const timeline *t, int k, uint64_t lo, uint64_t hi)
{
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->track == k && symbol(e) && e->end > lo && e->start < hi) return 1;
    }
    return 0;
}

void tl_render_text(const timeline *t, uint64_t lo, uint64_t hi, int width, double ns_per_column,
                    const char *title, FILE *out)
{
    const int label = 10;
    int cols = width - label - 1;
    if (cols < 10) cols = 10;
    if (ns_per_column <= 0) ns_per_column = (double)(hi - lo) / cols;
    int used = (int)ceil((hi - lo) / ns_per_column);
    if (used > cols) used = cols;
    if (used < 1) used = 1;
    fprintf(out, "%s: %.3f ms, one column = %.1f us\n", title, (hi - lo) / 1e6, ns_per_column / 1e3);
    char *row = host_alloc((size_t)cols + 1, "a timeline row");
    double *cover = host_alloc(sizeof(double) * 128, "a timeline row");
    int order[TL_MAX_TRACKS], ntracks = display_order(t, order);
    for (int o = 0; o < ntracks; o++) {
        int k = order[o];
        if (!track_in_window(t, k, lo, hi)) continue;
        for (int c = 0; c < used; c++) {
            double a = lo + c * ns_per_column, b = a + ns_per_column;
            memset(cover, 0, sizeof(double) * 128);
            for (int i = 0; i < t->nevents; i++) {
                const tl_event *e = &t->events[i];
                char s = e->track == k ? symbol(e) : 0;
                if (!s || e->end <= a || e->start >= b) continue;
                double x = e->start > a ? e->start : a, y = e->end < b ? e->end : b;
                cover[(int)s] += y - x;
            }
            char best = ' ';
            double most = 0;
            const char *order = "#><~=-.,";  // ties go to the first
            for (const char *p = order; *p; p++)
                if (cover[(int)*p] > most) {
                    most = cover[(int)*p];
                    best = *p;
                }
            row[c] = best;
        }
        row[used] = '\0';
        fprintf(out, "%-9.9s|%s\n", t->tracks[k].name, row);
    }
    // time axis: a label every 20 columns, in milliseconds from the window's start
    memset(row, ' ', (size_t)cols);
    row[cols] = '\0';
    for (int c = 0; c < used; c += 20) {
        char text[16];
        int n = snprintf(text, sizeof text, "%.2f", c * ns_per_column / 1e6);
        if (c + n <= cols) memcpy(row + c, text, (size_t)n);
    }
    int end = cols;
    while (end > 0 && row[end - 1] == ' ') end--;
    row[end] = '\0';
    fprintf(out, "%-9s|%s\n", "ms", row);
    fprintf(out, "legend: # kernel  > to GPU  < to host  = host prep  - issue  . host sync  , wait for a buffer\n");
    free(row);
    free(cover);
}

static const char *svg_colour(const tl_event *e)
{
    switch (e->kind) {
    case TL_KERNEL: return tl_library_kernel(e->name) ? "#86aee0" : "#3f6fb5";
    case TL_H2D: return "#3a9d4a";
    case TL_D2H: return "#e8890c";
    case TL_COPY: return "#8d6e63";
    case TL_HOST:
        switch (e->range) {
        case TL_RANGE_PREP: return "#9e9e9e";
        case TL_RANGE_ISSUE: return "#7e57c2";
        case TL_RANGE_SYNC: return "#d62f2f";
        default: return "#f2a0b8";
        }
    case TL_SYNC: return NULL;
    }
    return NULL;
}

static double nice_step(double span_ms)
{
    double steps[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span_ms / steps[i] <= 10) return steps[i];
    return 1000;
}

static void svg_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", out);
        else if (*s == '>') fputs("&gt;", out);
        else if (*s == '&') fputs("&amp;", out);
        else fputc(*s, out);
    }
}

void tl_render_svg(const timeline *t, uint64_t lo, uint64_t hi, double ms_axis, const char *title, FILE *out)
{
    const int width = 960, label = 110, right = 20, top = 44, row_h = 18, gap = 6;
    int plot = width - label - right, rows = 0;
    for (int k = 0; k < t->ntracks; k++) rows += track_in_window(t, k, lo, hi);
    int height = top + rows * (row_h + gap) + 70;
    double window_ms = (hi - lo) / 1e6;
    if (ms_axis <= 0) ms_axis = window_ms;
    double px_per_ns = plot / (ms_axis * 1e6);
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "font-family=\"monospace\" font-size=\"12\">\n", width, height, width, height);
    fprintf(out, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-weight=\"bold\">",
            width, height);
    svg_text(out, title);
    fprintf(out, "</text>\n");
    int y = top;
    int order[TL_MAX_TRACKS], ntracks = display_order(t, order);
    for (int o = 0; o < ntracks; o++) {
        int k = order[o];
        if (!track_in_window(t, k, lo, hi)) continue;
        fprintf(out, "<text x=\"10\" y=\"%d\">", y + row_h - 5);
        svg_text(out, t->tracks[k].name);
        fprintf(out, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f3f3f3\"/>\n", label, y,
                plot, row_h);
        for (int i = 0; i < t->nevents; i++) {
            const tl_event *e = &t->events[i];
            const char *colour = svg_colour(e);
            if (e->track != k || !symbol(e) || !colour || e->end <= lo || e->start >= hi) continue;
            uint64_t a = e->start < lo ? lo : e->start, b = e->end > hi ? hi : e->end;
            double x = label + (a - lo) * px_per_ns, w = (b - a) * px_per_ns;
            if (w < 0.5) w = 0.5;
            fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x, y, w,
                    row_h, colour);
            svg_text(out, e->name);
            if (e->batch >= 0) fprintf(out, " (batch %d)", e->batch);
            fprintf(out, ": %.1f us</title></rect>\n", (e->end - e->start) / 1e3);
        }
        y += row_h + gap;
    }
    double step = nice_step(ms_axis);
    for (double ms = 0; ms <= ms_axis + 1e-9; ms += step) {
        double x = label + ms * 1e6 * px_per_ns;
        fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#bbb\"/>\n", x, top - 4, x, y);
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, y + 14, ms);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">ms</text>\n", label - 6, y + 14);
    const char *names[] = {"our kernel", "cuBLAS kernel", "copy to GPU", "copy to host", "host prep", "host sync",
                           "host waits for a buffer"};
    const char *colours[] = {"#3f6fb5", "#86aee0", "#3a9d4a", "#e8890c", "#9e9e9e", "#d62f2f", "#f2a0b8"};
    int x = label;
    for (int i = 0; i < 7; i++) {
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, y + 30, colours[i]);
        fprintf(out, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 16, y + 40, names[i]);
        x += 22 + 8 * (int)strlen(names[i]);
    }
    fprintf(out, "</svg>\n");
}
