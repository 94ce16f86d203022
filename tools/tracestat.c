// tracestat: read a trace written by --trace and print what it shows.
//
//   tracestat TRACE.json [--window PHASE] [--from-batch FIRST [--batches COUNT]]
//             [--text [--width N]] [--svg FILE.svg [--title T] [--ms-axis MS]]
//   tracestat TRACE.json --check        the file's structure: whole (it ends with its
//             closing line), events sorted by time, every track named, no two events on
//             a stream track partly overlapping, host ranges nested; exit 1 on the first
//             problem
//   tracestat TRACE.json --rewrite OUT  read it and write it again (tests the writer)
//   tracestat --merge OUT.json A.json B.json ...   one trace of several ranks (lesson 12),
//             given in rank order: each input's process becomes one process row (Perfetto),
//             its tracks prefixed "r0 ", "r1 ", ...; the inputs' clocks line up as they
//             were recorded (CUPTI stamps with CLOCK_REALTIME: exact on one machine,
//             across machines only as good as their clocks' agreement)
//
// Without --text or --svg it prints key=value lines for the window (the last
// host range named PHASE, or the whole trace): counts of kernels and copies,
// GPU busy fraction, copy time hidden under kernels, host blocked, host prep
// under GPU work, the largest GPU idle gap, NCCL's kernel time and the share of it
// hidden under other kernels (comm_hidden; per process too when there are several), split
// kernel by kernel into exposed and hidden time (comm_exposed_ms; with --comm-groups N the
// last of every N, a step's last bucket, apart: comm_last_ms, comm_hidden_hideable), the
// share of the window with a kernel other than NCCL's running (compute_busy, per process
// too: 1 minus it is a pipeline stage's bubble), and the overlap of every pair of stream
// tracks. The tests and `make timelines` use it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"  // defines: arg_spec, arg_int, arg_string, args_parse_files, usage_error, arg_double,
                               //          arg_flag, arg_exit_codes
#include "common/trace/timeline.h"  // defines: timeline, tl_read_json, tl_write_json, tl_analyse, tl_comm_hidden,
                                    //          tl_compute_busy, tl_find_track_in, tl_render_text, tl_render_svg,
                                    //          TL_MAX_PROCESSES, TL_MAX_TRACKS, TL_NAME, tl_add, tl_batch_window,
                                    //          tl_comm_exposed, tl_free, tl_init, tl_is_host, tl_phase_window, tl_sort,
                                    //          tl_track_overlap_ms, tl_fold_unnamed_streams

// Checks what tl_write_json promises, on the events in file order.
static int check(const timeline *t)
{
    uint64_t prev = 0;
    for (int k = 0; k < t->ntracks; k++)
        if (!t->tracks[k].name[0]) {
            printf("track %d has no name\n", k);
            return 0;
        }
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        if (e->kind == TL_SYNC) continue;  // instant events, on no track
        if (!e->name[0]) {
            printf("event %d has no name\n", i);
            return 0;
        }
        if (e->start < prev) {
            printf("event %d (%s) starts before the one above it\n", i, e->name);
            return 0;
        }
        prev = e->start;
        for (int j = i - 1; j >= 0; j--) {  // the latest earlier event on the same track
            const tl_event *d = &t->events[j];
            if (d->kind == TL_SYNC || d->track != e->track) continue;
            // a host range may nest in the one above it; on a stream only a point may stand inside
            // another (a record the writer moved to where the one before ended, with nothing left of it)
            int nested = (tl_is_host(t, e->track) || e->end == e->start) && e->end <= d->end;
            if (e->start < d->end && !nested) {
                printf("events %d (%s) and %d (%s) on track %s overlap without nesting\n", j, d->name, i, e->name,
                       t->tracks[e->track].name);
                return 0;
            }
            if (!tl_is_host(t, e->track) || e->start >= d->end) break;
        }
    }
    printf("ok: %d events on %d tracks\n", t->nevents, t->ntracks);
    return 1;
}

// Reads a trace; 0 (after one line on stderr) when it cannot.
static int read_trace(const char *path, timeline *t)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "tracestat: cannot open '%s'\n", path);
        return 0;
    }
    int status = tl_read_json(t, in);
    fclose(in);
    if (status == TL_READ_CUT_SHORT)
        fprintf(stderr, "tracestat: %s is cut short: it ends before the trace's last line (was its writer stopped?)\n",
                path);
    else if (status != TL_READ_OK)
        fprintf(stderr, "tracestat: %s is not a trace written by --trace\n", path);
    return status == TL_READ_OK;
}

// --merge: the inputs, in rank order, as the processes of one trace.
static int merge(const char *out_path, const char **paths, int n, int fold)
{
    timeline m, in[TL_MAX_PROCESSES];
    tl_init(&m, "");
    m.nprocesses = 0;
    uint64_t base = UINT64_MAX;
    int tracks = 0;
    for (int k = 0; k < n; k++) {
        if (!read_trace(paths[k], &in[k])) return EXIT_FAILURE;
        if (fold) tl_fold_unnamed_streams(&in[k]);
        if (in[k].base_ns < base) base = in[k].base_ns;
        tracks += in[k].ntracks;
        if (m.nprocesses + in[k].nprocesses > TL_MAX_PROCESSES || tracks > TL_MAX_TRACKS) {
            fprintf(stderr, "tracestat: --merge takes at most %d processes and %d tracks in all\n", TL_MAX_PROCESSES,
                    TL_MAX_TRACKS);
            return EXIT_FAILURE;
        }
        m.nprocesses += in[k].nprocesses;
    }
    snprintf(m.program, sizeof m.program, "%.40s (+%d merged)", in[0].program, n - 1);
    m.base_ns = base;
    m.nprocesses = 0;
    for (int k = 0; k < n; k++) {
        int first = m.nprocesses, map[TL_MAX_TRACKS];
        for (int p = 0; p < in[k].nprocesses; p++)
            snprintf(m.processes[first + p], TL_NAME, "%s", in[k].processes[p][0] ? in[k].processes[p] : in[k].program);
        m.nprocesses += in[k].nprocesses;
        for (int j = 0; j < in[k].ntracks; j++) {
            char name[TL_NAME];
            snprintf(name, sizeof name, "r%d %.50s", k, in[k].tracks[j].name);
            map[j] = tl_find_track_in(&m, first + in[k].tracks[j].process, name, in[k].tracks[j].kind);
        }
        uint64_t shift = in[k].base_ns - base;  // this input's time 0 on the merged clock
        for (int i = 0; i < in[k].nevents; i++) {
            tl_event e = in[k].events[i];
            e.start += shift;
            e.end += shift;
            if (e.track >= 0) e.track = map[e.track];
            tl_add(&m, &e);
        }
        m.dropped += in[k].dropped;
        tl_free(&in[k]);
    }
    tl_sort(&m);
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "tracestat: cannot write %s\n", out_path);
        tl_free(&m);
        return EXIT_FAILURE;
    }
    tl_write_json(&m, out);
    int bad = fclose(out) != 0;
    printf("merged %d traces into %s: %d processes, %d tracks, %d events\n", n, out_path, m.nprocesses, m.ntracks,
           m.nevents);
    tl_free(&m);
    return bad ? EXIT_FAILURE : 0;
}

// The window to measure or draw: the whole trace, or the last phase of that name,
// or batches of it. Returns 0 (after one line on stderr) when there is no such phase.
static int window_of(const timeline *t, const char *path, const char *phase, int first, int count, uint64_t *start,
                     uint64_t *end)
{
    *start = UINT64_MAX;
    *end = 0;
    for (int i = 0; i < t->nevents; i++) {
        if (t->events[i].start < *start) *start = t->events[i].start;
        if (t->events[i].end > *end) *end = t->events[i].end;
    }
    if (phase && !tl_phase_window(t, phase, start, end)) {
        fprintf(stderr, "tracestat: %s has no phase named '%s'\n", path, phase);
        return 0;
    }
    if (first >= 0) tl_batch_window(t, first, count, start, end);
    return 1;
}

// --rewrite: the trace read, written again.
static int rewrite_trace(const timeline *t, const char *out_path)
{
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "tracestat: cannot write %s\n", out_path);
        return EXIT_FAILURE;
    }
    tl_write_json(t, out);
    fclose(out);
    return 0;
}

// --svg: the window as an SVG picture.
static int draw_svg(const timeline *t, uint64_t start, uint64_t end, double ms_axis, const char *heading,
                    const char *svg)
{
    FILE *out = fopen(svg, "w");
    if (!out) {
        fprintf(stderr, "tracestat: cannot write %s\n", svg);
        return EXIT_FAILURE;
    }
    tl_render_svg(t, start, end, ms_axis, heading, out);
    fclose(out);
    return 0;
}

// The communication a step shows (see tl_comm_exposed), for `process` (-1: all), its keys
// ending in `suffix` ("" or "[NAME]").
static void print_comm_split(const timeline *t, int process, const char *suffix, uint64_t start, uint64_t end,
                             int groups)
{
    tl_comm_split c = tl_comm_exposed(t, process, start, end, groups);
    printf("comm_exposed_ms%s=%.6f\n", suffix, c.exposed_ms);
    if (groups <= 0) return;
    printf("comm_whole_groups%s=%d\ncomm_last_ms%s=%.6f\ncomm_last_exposed_ms%s=%.6f\n", suffix, c.whole_groups, suffix,
           c.last_ms, suffix, c.last_exposed_ms);
    printf("comm_hideable_ms%s=%.6f\ncomm_hideable_exposed_ms%s=%.6f\ncomm_hidden_hideable%s=%.6f\n", suffix,
           c.hideable_ms, suffix, c.hideable_exposed_ms, suffix,
           c.hideable_ms > 0 ? 1 - c.hideable_exposed_ms / c.hideable_ms : 0);
}

// The window's figures, as key=value lines.
static void print_figures(const timeline *t, const char *phase, uint64_t start, uint64_t end, int groups)
{
    tl_figures f = tl_analyse(t, start, end);
    printf("program=%s\nwindow=%s\nspan_ms=%.6f\n", t->program, phase ? phase : "all", f.span_ms);
    // other_copies: neither to nor from the host (device to device, memsets)
    printf(
        "kernels=%d\nown_kernels=%d\nh2d=%d\nd2h=%d\ncopies=%d\nother_copies=%d\npageable_copies=%d\nhost_syncs=%d\n",
        f.kernels, f.own_kernels, f.h2d, f.d2h, f.copies, f.copies - f.h2d - f.d2h, f.pageable_copies, f.host_syncs);
    // kernels that ran as nodes of a CUDA graph, and the cudaGraphLaunch calls that launched them (lesson 11)
    printf("graph_kernels=%d\ngraph_launches=%d\n", f.graph_kernels, f.graph_launches);
    printf("gpu_busy=%.6f\ncopy_hidden=%.6f\nh2d_hidden=%.6f\nkernel_copy_overlap_ms=%.6f\nhost_blocked=%.6f\n",
           f.gpu_busy, f.copy_hidden, f.h2d_hidden, f.kernel_copy_overlap_ms, f.host_blocked);
    printf("prep_under_gpu=%.6f\nlargest_gap_ms=%.6f\ndropped=%lld\n", f.prep_under_gpu, f.largest_gap_ms, t->dropped);
    // NCCL's kernels, and the share of their time with a kernel of the same process that is not NCCL's (lesson 12)
    printf("comm_kernels=%d\ncomm_ms=%.6f\ncomm_hidden=%.6f\n", f.comm_kernels, f.comm_ms, f.comm_hidden);
    for (int p = 0; p < t->nprocesses && t->nprocesses > 1; p++) {
        double ms = 0, hidden = tl_comm_hidden(t, p, start, end, &ms);
        printf("comm_ms[%s]=%.6f\ncomm_hidden[%s]=%.6f\n", t->processes[p], ms, t->processes[p], hidden);
    }
    // the same time split into exposed and hidden kernel by kernel; with --comm-groups N, the
    // last bucket of each step apart from the ones that can hide
    print_comm_split(t, -1, "", start, end, groups);
    for (int p = 0; p < t->nprocesses && t->nprocesses > 1; p++) {
        char suffix[96];
        snprintf(suffix, sizeof suffix, "[%s]", t->processes[p]);
        print_comm_split(t, p, suffix, start, end, groups);
    }
    // the share of the window a kernel other than NCCL's ran, per process: 1 minus it is a
    // pipeline stage's bubble (lesson 13)
    printf("compute_busy=%.6f\n", tl_compute_busy(t, -1, start, end));
    for (int p = 0; p < t->nprocesses && t->nprocesses > 1; p++)
        printf("compute_busy[%s]=%.6f\n", t->processes[p], tl_compute_busy(t, p, start, end));
}

// How many times each kernel ran in the window, by name, in the order of their first run.
static void print_kernel_counts(const timeline *t, uint64_t start, uint64_t end)
{
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &t->events[i];
        int seen = 0, count = 0;
        if (e->kind != TL_KERNEL || e->start < start || e->start >= end) continue;
        for (int j = 0; j < i && !seen; j++)
            seen = t->events[j].kind == TL_KERNEL && t->events[j].start >= start && t->events[j].start < end &&
                   strcmp(t->events[j].name, e->name) == 0;
        if (seen) continue;
        for (int j = i; j < t->nevents; j++)
            count += t->events[j].kind == TL_KERNEL && t->events[j].start >= start && t->events[j].start < end &&
                     strcmp(t->events[j].name, e->name) == 0;
        printf("kernel_count[%s]=%d\n", e->name, count);
    }
}

// The tracks, and the overlap of every pair of stream tracks.
static void print_track_overlaps(const timeline *t, uint64_t start, uint64_t end)
{
    printf("tracks=");
    for (int k = 0; k < t->ntracks; k++) printf("%s%s", k ? "," : "", t->tracks[k].name);
    printf("\n");
    for (int a = 0; a < t->ntracks; a++) {
        if (tl_is_host(t, a)) continue;
        for (int b = a + 1; b < t->ntracks; b++)
            if (!tl_is_host(t, b))
                printf("overlap_ms[%s,%s]=%.6f\nkernel_overlap_ms[%s,%s]=%.6f\n", t->tracks[a].name, t->tracks[b].name,
                       tl_track_overlap_ms(t, a, b, start, end, 0), t->tracks[a].name, t->tracks[b].name,
                       tl_track_overlap_ms(t, a, b, start, end, 1));
    }
}

int main(int argc, char **argv)
{
    const char *phase = NULL, *svg = NULL, *title = NULL, *rewrite = NULL, *merged = NULL;
    const char *files[TL_MAX_PROCESSES] = {NULL};
    int first = -1, count = 3, text = 0, width = 100, checking = 0, groups = 0, fold = 0;
    double ms_axis = 0;
    const arg_spec specs[] = {
        arg_string("window", &phase, "PHASE", "measure (or draw) the last phase of that name, e.g. run"),
        arg_int("from-batch", &first, -1, 1000000, "N",
                "within the window, start at batch N's preparation; -1: all of it"),
        arg_int("batches", &count, 1, 1000000, "N", "with --from-batch: this many batches"),
        arg_int("comm-groups", &groups, 0, 1000, "N",
                "NCCL kernels come N to a step (12: its buckets): count each step's last apart; 0: no groups"),
        arg_flag("text", &text, "draw the window as a text Gantt chart"),
        arg_int("width", &width, 20, 1000, "N", "columns of the text chart"),
        arg_string("svg", &svg, "FILE", "draw the window as an SVG picture"),
        arg_string("title", &title, "T", "the drawing's title"),
        arg_double("ms-axis", &ms_axis, 0, 1e9, "MS", "the SVG's time axis in ms (0: the window's span)"),
        arg_flag("check", &checking, "check the file's structure (sorted, named, nested); exit 1 on a problem"),
        arg_string("rewrite", &rewrite, "OUT", "read the trace and write it again (tests the writer)"),
        arg_string("merge", &merged, "OUT", "merge the traces given (one per rank, in rank order) into OUT"),
        arg_flag("fold-streams", &fold,
                 "the streams the program did not name (a graph's own) on as few lanes as their overlap needs"),
        arg_exit_codes("0 success, 1 a trace unreadable or cut short, a problem --check found, an unwritable output, "
                       "2 bad usage"),
    };
    int nfiles = args_parse_files(argc, argv, "tracestat", "Read a trace written by --trace and print what it shows.",
                                  specs, (int)(sizeof specs / sizeof specs[0]), "TRACE.json", files, TL_MAX_PROCESSES);
    if (merged) {
        if (nfiles < 1) usage_error("tracestat", "--merge: give the ranks' traces to merge, in rank order");
        return merge(merged, files, nfiles, fold);
    }
    if (nfiles != 1) usage_error("tracestat", "give one trace file (try --help)");
    const char *path = files[0];
    timeline t;
    if (!read_trace(path, &t)) return EXIT_FAILURE;
    if (checking) return check(&t) ? 0 : 1;
    if (fold) tl_fold_unnamed_streams(&t);
    tl_sort(&t);
    if (rewrite) return rewrite_trace(&t, rewrite);
    uint64_t start, end;
    if (!window_of(&t, path, phase, first, count, &start, &end)) return EXIT_FAILURE;
    char heading[160];
    snprintf(heading, sizeof heading, "%s: %s", title ? title : t.program, phase ? phase : "whole trace");
    if (text) tl_render_text(&t, start, end, width, 0, heading, stdout);
    if (svg && draw_svg(&t, start, end, ms_axis, heading, svg) != 0) return EXIT_FAILURE;
    if (text || svg) return 0;
    print_figures(&t, phase, start, end, groups);
    print_kernel_counts(&t, start, end);
    print_track_overlaps(&t, start, end);
    tl_free(&t);
    return 0;
}
