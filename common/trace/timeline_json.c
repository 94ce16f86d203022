// timeline_json.c: a timeline written as Chrome Trace Event JSON, and read back.
#define _POSIX_C_SOURCE 200809L
#include "common/trace/timeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"  // json_write_string

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

static const char *const TRACK_KINDS[] = {"stream", "main", "thread"};

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
    // A stream runs one thing at a time: an event that starts before the last one on its stream has
    // ended is written as starting at that end (no partial overlap). Shifted, it may start after
    // events that came below it (a graph's kernels, CUPTI's clock against the host's), so the events
    // are sorted again after the shift: the file stays in order of start, as tracestat --check wants.
    tl_event *events = malloc(sizeof(tl_event) * (size_t)(t->nevents > 0 ? t->nevents : 1));
    if (!events || !last_end) {
        stderr_line("tl_write_json: out of memory for %d events", t->nevents);
        exit(EXIT_FAILURE);
    }
    if (t->nevents > 0) memcpy(events, t->events, sizeof(tl_event) * (size_t)t->nevents);
    for (int i = 0; i < t->nevents; i++) {
        tl_event *e = &events[i];
        if (e->kind == TL_SYNC || tl_is_host(t, e->track)) continue;
        if (e->start < last_end[e->track]) e->start = last_end[e->track];
        if (e->end < e->start) e->end = e->start;
        last_end[e->track] = e->end;
    }
    timeline shifted = *t;
    shifted.events = events;
    tl_sort(&shifted);

    fputs("{\"traceEvents\":[", out);
    for (int p = 0; p < t->nprocesses; p++) {
        fprintf(out,
                "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", p ? "," : "",
                p + 1);
        json_write_string(out, t->processes[p]);
        fputs("}}", out);
    }
    for (int k = 0; k < t->ntracks; k++) {
        int pid = t->tracks[k].process + 1;
        fprintf(out, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, k + 1);
        json_write_string(out, t->tracks[k].name);
        fprintf(out, ",\"kind\":\"%s\"}}", TRACK_KINDS[t->tracks[k].kind]);
        fprintf(out,
                ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, k + 1, (tl_is_host(t, k) ? 0 : TL_MAX_TRACKS) + k + 1);  // host threads on top
    }
    for (int i = 0; i < t->nevents; i++) {
        const tl_event *e = &events[i];
        uint64_t start = e->start, end = e->end;
        if (e->kind == TL_SYNC) {
            fputs(",\n{\"name\":", out);
            json_write_string(out, e->name);
            fprintf(out,
                    ",\"cat\":\"cuda_sync\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%.3f,\"pid\":1,\"tid\":0,"
                    "\"args\":{\"waited_us\":%.3f}}",
                    (end - base) / 1e3, (end - start) / 1e3);
            continue;
        }
        fputs(",\n{\"name\":", out);
        json_write_string(out, e->name);
        fprintf(out,
                ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"batch\":%d,\"bytes\":%lld,\"pageable\":%d",
                category(e), (start - base) / 1e3, (end - start) / 1e3, t->tracks[e->track].process + 1, e->track + 1,
                e->batch, e->bytes, e->pageable);
        if (e->graph) fprintf(out, ",\"graph\":%u", e->graph);  // only when nonzero: older traces read the same
        fputs("}}", out);
    }
    fprintf(out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":");
    json_write_string(out, t->program);
    fprintf(out, ",\"dropped\":%lld,\"base_ns\":%llu}}\n", t->dropped, (unsigned long long)(t->base_ns + base));
    free(last_end);
    free(events);
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

// The "otherData" line: the program, the records dropped, the clock at time 0.
static void read_other_data(timeline *t, const char *line)
{
    double v;
    read_string(strstr(line, "\"otherData\""), "program", t->program, sizeof t->program);
    if (read_number(line, "dropped", &v)) t->dropped = (long long)v;
    const char *b = after_key(line, "base_ns");  // read whole: a double would round it
    unsigned long long base = 0;
    if (b && sscanf(b, "%llu", &base) == 1) t->base_ns = base;
}

// A metadata event ("ph":"M"): a process's name, or a track's name and kind, which
// tid_track maps to its index. Returns 1 when it cannot be read.
static int read_metadata(timeline *t, const char *line, const char *name, int pid, double tid, int *tid_track)
{
    char value[TL_NAME] = "", kind[16] = "";
    const char *args = after_key(line, "args");
    if (strcmp(name, "process_name") == 0) {
        if (!args || !read_string(args, "name", value, sizeof value)) return 1;
        snprintf(t->processes[pid - 1], TL_NAME, "%s", value);
        if (pid > t->nprocesses) t->nprocesses = pid;
        return 0;
    }
    if (strcmp(name, "thread_name") != 0) return 0;
    if (!args || !read_string(args, "name", value, sizeof value)) return 1;
    read_string(args, "kind", kind, sizeof kind);
    if (tid < 1 || tid > TL_MAX_TRACKS) return 1;
    tl_track_kind k = TL_TRACK_STREAM;
    for (int i = 0; i < 3; i++)
        if (strcmp(kind, TRACK_KINDS[i]) == 0) k = (tl_track_kind)i;
    tid_track[(int)tid] = tl_find_track_in(t, pid - 1, value, k);
    return 0;
}

// An event: a host synchronisation ("ph":"i"), or a range on a track named before
// it ("ph":"X"). Returns 1 when it cannot be read.
static int read_event(timeline *t, const char *line, const char *ph, const char *name, double tid, const int *tid_track)
{
    char cat[16] = "";
    double v;
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
        return 0;
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
        if (strcmp(cat, tl_range_name((tl_range)r)) == 0) e.range = (tl_range)r;
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
    return 0;
}

// 1 when a line ends as a whole event does, "}" or "},": one cut in the middle does not.
static int whole_line(const char *line)
{
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) n--;
    if (n > 0 && line[n - 1] == ',') n--;
    return n > 0 && line[n - 1] == '}';
}

int tl_read_json(timeline *t, FILE *in)
{
    tl_init(t, "");
    char line[4096];
    t->nprocesses = 1;
    int tid_track[TL_MAX_TRACKS + 1];
    for (int k = 0; k <= TL_MAX_TRACKS; k++) tid_track[k] = -1;
    int saw_header = 0, saw_end = 0;
    while (fgets(line, sizeof line, in)) {
        if (saw_end) {  // the "otherData" line closes the file: nothing may follow it
            if (strspn(line, " \t\r\n") != strlen(line)) return TL_READ_NOT_A_TRACE;
            continue;
        }
        if (strstr(line, "\"traceEvents\"")) saw_header = 1;
        if (strstr(line, "\"otherData\"")) {
            if (!whole_line(line)) return TL_READ_CUT_SHORT;
            read_other_data(t, line);
            saw_end = 1;
            continue;
        }
        char ph[8] = "", name[TL_NAME] = "";
        if (!read_string(line, "ph", ph, sizeof ph)) continue;
        if (!whole_line(line)) return TL_READ_CUT_SHORT;
        read_string(line, "name", name, sizeof name);
        double tid = 0, pid = 1;
        read_number(line, "tid", &tid);
        read_number(line, "pid", &pid);
        if (pid < 1 || pid > TL_MAX_PROCESSES) return TL_READ_NOT_A_TRACE;
        int bad = strcmp(ph, "M") == 0 ? read_metadata(t, line, name, (int)pid, tid, tid_track)
                                       : read_event(t, line, ph, name, tid, tid_track);
        if (bad) return TL_READ_NOT_A_TRACE;
    }
    if (!saw_header) return TL_READ_NOT_A_TRACE;
    return saw_end ? TL_READ_OK : TL_READ_CUT_SHORT;  // a trace ends with its "otherData" line
}
