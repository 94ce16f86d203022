// trace_report.c: what a traced program prints at its end: the figures of every
// phase (timeline_figures.c), and on --timeline the windows asked for, drawn.
#define _POSIX_C_SOURCE 200809L
#include "common/trace/trace_internal.h"

#include <string.h>

// The figures of each phase, at its last occurrence, in the order phases first ended.
static void report_phases(FILE *out, const timeline *t, const char *json_path)
{
    fprintf(out, "trace: %d events recorded, %lld dropped%s%s\n", t->nevents, t->dropped,
            json_path ? ", written to " : "", json_path ? json_path : "");
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
        fprintf(out,
                "  warning: %d copies in these windows came from or went to pageable memory: the driver "
                "stages them, and they do not overlap\n",
                pageable);
}

// The terminal timeline of each window, every one on the scale of the longest.
static void draw_windows(FILE *out, const timeline *t, const trace_window *windows, int nwindows)
{
    double scale = 0;
    uint64_t a[TRACE_MAX_WINDOWS], b[TRACE_MAX_WINDOWS];
    int have[TRACE_MAX_WINDOWS];
    for (int w = 0; w < nwindows; w++) {
        have[w] = tl_phase_window(t, windows[w].phase, &a[w], &b[w]);
        if (have[w] && windows[w].first >= 0) tl_batch_window(t, windows[w].first, windows[w].count, &a[w], &b[w]);
        if (have[w] && (b[w] - a[w]) / 89.0 > scale) scale = (b[w] - a[w]) / 89.0;
    }
    for (int w = 0; w < nwindows; w++) {
        if (!have[w]) continue;
        char title[128];
        if (windows[w].first >= 0)
            snprintf(title, sizeof title, "\ntimeline of %s, batches %d to %d", windows[w].phase, windows[w].first,
                     windows[w].first + windows[w].count - 1);
        else
            snprintf(title, sizeof title, "\ntimeline of %s", windows[w].phase);
        tl_render_text(t, a[w], b[w], 100, scale, title, out);
    }
}

void trace_report(FILE *out, const timeline *t, const char *json_path, int draw, const trace_window *windows,
                  int nwindows)
{
    report_phases(out, t, json_path);
    if (draw) draw_windows(out, t, windows, nwindows);
}
