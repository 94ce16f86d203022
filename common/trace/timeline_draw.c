// timeline_draw.c: a window of a timeline drawn as a text Gantt chart and as SVG.
#define _POSIX_C_SOURCE 200809L
#include "common/trace/timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/host_memory.h"  // host_alloc

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

void tl_render_text(const timeline *t, uint64_t lo, uint64_t hi, int width, double ns_per_column, const char *title,
                    FILE *out)
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
        if (*s == '<')
            fputs("&lt;", out);
        else if (*s == '>')
            fputs("&gt;", out);
        else if (*s == '&')
            fputs("&amp;", out);
        else
            fputc(*s, out);
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
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"monospace\" font-size=\"12\">\n",
            width, height, width, height);
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
        fprintf(out, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f3f3f3\"/>\n", label, y, plot,
                row_h);
        for (int i = 0; i < t->nevents; i++) {
            const tl_event *e = &t->events[i];
            const char *colour = svg_colour(e);
            if (e->track != k || !symbol(e) || !colour || e->end <= lo || e->start >= hi) continue;
            uint64_t a = e->start < lo ? lo : e->start, b = e->end > hi ? hi : e->end;
            double x = label + (a - lo) * px_per_ns, w = (b - a) * px_per_ns;
            if (w < 0.5) w = 0.5;
            fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x, y, w, row_h,
                    colour);
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
    const char *names[] = {"our kernel", "cuBLAS kernel",          "copy to GPU", "copy to host", "host prep",
                           "host sync",  "host waits for a buffer"};
    const char *colours[] = {"#3f6fb5", "#86aee0", "#3a9d4a", "#e8890c", "#9e9e9e", "#d62f2f", "#f2a0b8"};
    int x = label;
    for (int i = 0; i < 7; i++) {
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, y + 30, colours[i]);
        fprintf(out, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 16, y + 40, names[i]);
        x += 22 + 8 * (int)strlen(names[i]);
    }
    fprintf(out, "</svg>\n");
}
