// timeline_figures.c: what a window of a timeline measures: GPU busy, copies hidden
// under kernels, the host blocked, communication hidden under compute, ...
#define _POSIX_C_SOURCE 200809L
#include "common/trace/timeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/host_memory.h"  // host_alloc

typedef struct {  // [a, b), in nanoseconds
    uint64_t a, b;
} span;

// What matches() picks out of a timeline, one bit each: a union of them picks any.
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
        if (x[i].b < y[j].b)
            i++;
        else
            j++;
    }
    return sum;
}

static double overlap_of(const timeline *t, int what_a, int track_a, int what_b, int track_b, uint64_t lo, uint64_t hi,
                         uint64_t *total_a)
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

// The part of [a, b) that the sorted, merged spans s[0..n) cover.
static uint64_t covered(const span *s, int n, uint64_t a, uint64_t b)
{
    uint64_t sum = 0;
    for (int i = 0; i < n && s[i].a < b; i++) {
        uint64_t x = s[i].a > a ? s[i].a : a, y = s[i].b < b ? s[i].b : b;
        if (y > x) sum += y - x;
    }
    return sum;
}

// One process's NCCL kernels that start in [lo, hi), in issue order, added to *c.
static void split_process(const timeline *t, int p, uint64_t lo, uint64_t hi, int groups, tl_comm_split *c)
{
    span *compute;
    int n = union_of(t, COMPUTE, -2 - p, 0, UINT64_MAX, &compute);
    int j = 0;
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (!matches(t, e, COMM, -2 - p) || e->start < lo || e->start >= hi) continue;
        double ms = (e->end - e->start) / 1e6;
        double exposed = ms - covered(compute, n, e->start, e->end) / 1e6;
        int last = groups > 0 && j % groups == groups - 1;
        c->kernels++;
        c->comm_ms += ms;
        c->exposed_ms += exposed;
        c->last_ms += last ? ms : 0;
        c->last_exposed_ms += last ? exposed : 0;
        c->hideable_ms += last ? 0 : ms;
        c->hideable_exposed_ms += last ? 0 : exposed;
        j++;
    }
    if (groups > 0 && j % groups != 0) c->whole_groups = 0;
    free(compute);
}

tl_comm_split tl_comm_exposed(const timeline *t, int process, uint64_t start, uint64_t end, int groups)
{
    tl_comm_split c;
    memset(&c, 0, sizeof c);
    c.whole_groups = groups > 0;
    for (int p = 0; p < t->nprocesses; p++)
        if (process < 0 || p == process) split_process(t, p, start, end, groups, &c);
    return c;
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
        case TL_H2D:
            f.h2d++;
            f.copies++;
            f.pageable_copies += e->pageable;
            break;
        case TL_D2H:
            f.d2h++;
            f.copies++;
            f.pageable_copies += e->pageable;
            break;
        case TL_COPY: f.copies++; break;
        case TL_SYNC: f.host_syncs++; break;
        case TL_HOST: f.graph_launches += e->range == TL_RANGE_ISSUE && e->graph != 0; break;
        }
    }
    return f;
}

void tl_print_figures_header(FILE *out)
{
    fprintf(out, "  %-12s %10s %8s %8s %8s %8s %9s\n", "window", "span", "GPU busy", "copies", "host", "prep",
            "largest");
    fprintf(out, "  %-12s %10s %8s %8s %8s %8s %9s\n", "", "", "", "hidden", "blocked", "under GPU", "GPU gap");
}

void tl_print_figures(FILE *out, const char *label, const tl_figures *f)
{
    fprintf(out, "  %-12s %7.2f ms %7.0f%% %7.0f%% %7.0f%% %7.0f%% %6.3f ms\n", label, f->span_ms, 100 * f->gpu_busy,
            100 * f->copy_hidden, 100 * f->host_blocked, 100 * f->prep_under_gpu, f->largest_gap_ms);
}
