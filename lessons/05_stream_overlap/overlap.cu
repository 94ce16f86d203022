// STUDENT VERSION of solutions/05_stream_overlap/overlap.cu, made by `make lessons` (checksum 2519912551)
// Fill in its 2 TODOs.
// overlap.cu: part 3, copy-in, kernel and copy-out in order on one stream, then
// cut into chunks over several streams in two issue orders. Every buffer is
// pinned, on both sides, so the difference is the overlap alone; the results
// must match the sequential run bit for bit, and the times are compared with the
// shortest time any schedule of these chunks could take (the bound).
#include <stdio.h>  // fprintf

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/device.h"   // defines: device_info
#include "common/base/timing.h"  // defines: stats
#include "overlap.h"             // defines: workload, variant, report, stage_times, launch_fma_chain, the stages,
                                 //          time_round_robin

static size_t chunk_begin(const workload *w, int c) { return (size_t)w->n * c / w->chunks; }
static int chunk_len(const workload *w, int c) { return (int)(chunk_begin(w, c + 1) - chunk_begin(w, c)); }

// Issue order 1, per chunk: copy-in, kernel, copy-out of chunk c on stream c % nstreams.
static void run_overlapped_per_chunk(void *arg)
{
    // TODO(05-per-chunk): every chunk goes through copy-in, kernel and copy-out on one
    // stream, and the chunks take turns over the streams; chunk_begin and chunk_len give a chunk's
    // range
    (void)arg;  // nothing issued yet: every chunk of the output stays poisoned
}

// Issue order 2, stage by stage: in rounds of nstreams chunks, all copy-ins of the
// round, then all its kernels, then all its copy-outs. Each stream sees the same
// sequence as in order 1; only the order in which the host issues them changes.
static void run_overlapped_by_stage(void *arg)
{
    // TODO(05-by-stage): in rounds of nstreams chunks, issue every copy-in of the round,
    // then every kernel, then every copy-out, each chunk on the same stream as in order 1
    (void)arg;  // nothing issued yet: every chunk of the output stays poisoned
}

// ----------------------------------------------------------------------------
// The copies as the overlapped runs issue them, without the kernels: chunk by
// chunk, one direction alone or both at once. Copies in chunks may move at another
// rate than whole ones, so the bound takes each direction, and both at once, at the
// fastest rate measured, whole or in chunks: a lower bound on time must (a bound of
// whole copies alone was beaten by 8% on an H100: notes/05).

static void copy_chunks(workload *w, cudaMemcpyKind kind, cudaStream_t s)
{
    for (int c = 0; c < w->chunks; c++) {
        size_t at = chunk_begin(w, c);
        size_t bytes = sizeof(float) * (size_t)chunk_len(w, c);
        if (kind == cudaMemcpyHostToDevice)
            CUDA_CHECK(cudaMemcpyAsync(w->d_in + at, w->h_in + at, bytes, kind, s));
        else
            CUDA_CHECK(cudaMemcpyAsync(w->h_out + at, w->d_out + at, bytes, kind, s));
    }
}

static void h2d_in_chunks(void *arg)
{
    workload *w = (workload *)arg;
    copy_chunks(w, cudaMemcpyHostToDevice, w->streams[0]);
}

static void d2h_in_chunks(void *arg)
{
    workload *w = (workload *)arg;
    copy_chunks(w, cudaMemcpyDeviceToHost, w->streams[0]);
}

// every copy-in on streams[0] and every copy-out on streams[1], at once
static void both_in_chunks(void *arg)
{
    workload *w = (workload *)arg;
    copy_chunks(w, cudaMemcpyHostToDevice, w->streams[0]);
    copy_chunks(w, cudaMemcpyDeviceToHost, w->streams[1]);
}

// ----------------------------------------------------------------------------
// The bound: no schedule of these chunks can be shorter than any of these terms.

typedef enum { LIMIT_STREAMS, LIMIT_KERNELS, LIMIT_COPY_INS, LIMIT_COPY_OUTS, LIMIT_COPIES, LIMIT_COUNT } bound_limit;
static const char *const LIMIT_NAMES[LIMIT_COUNT] = {"streams", "kernels", "copy-ins", "copy-outs", "copies"};

static const char *limit_why(bound_limit limit, int engines)
{
    switch (limit) {
    case LIMIT_STREAMS: return "each stream runs its chunks one after another";
    case LIMIT_KERNELS: return "the kernels back to back, after the first copy-in, before the last copy-out";
    case LIMIT_COPY_INS: return "the copy-ins back to back, then the last chunk's kernel and copy-out";
    case LIMIT_COPY_OUTS: return "the first chunk's copy-in and kernel, then the copy-outs back to back";
    default:
        return engines >= 2   ? "the first copy-in and the last copy-out alone, the rest in pairs at the two-way rate"
               : engines == 1 ? "one copy engine serves both directions, one copy at a time"
                              : "no copy engine: no copy overlaps a kernel";
    }
}

// The time of each stage over the whole array at its fastest measured rate: a copy
// whole or in chunks, whichever was faster; `duplex`, both directions at once.
static stage_times fastest_stages(double h2d, double h2d_chunks, double kernel, double d2h, double d2h_chunks,
                                  double duplex, double duplex_chunks)
{
    stage_times t = {.h2d = h2d < h2d_chunks ? h2d : h2d_chunks,
                     .kernel = kernel,
                     .d2h = d2h < d2h_chunks ? d2h : d2h_chunks,
                     .duplex = duplex < duplex_chunks ? duplex : duplex_chunks};
    return t;
}

// With two or more copy engines a copy-in and a copy-out share the host's link when
// they overlap, each slower than alone: only the first copy-in (nothing to copy out
// yet) and the last copy-out run alone, the rest at best in pairs at the two-way
// rate. With one engine every copy takes its turn on it; with none, nothing overlaps.
static double overlap_bound(const stage_times *t, int chunks, int streams, int engines, bound_limit *limit)
{
    double c = chunks, in = t->h2d, k = t->kernel, out = t->d2h, sum = in + k + out;
    double pairs = t->duplex < in + out ? t->duplex : in + out;
    double term[LIMIT_COUNT];
    term[LIMIT_STREAMS] = sum * ((chunks + streams - 1) / streams) / c;
    term[LIMIT_KERNELS] = in / c + k + out / c;
    term[LIMIT_COPY_INS] = in + (k + out) / c;
    term[LIMIT_COPY_OUTS] = (in + k) / c + out;
    term[LIMIT_COPIES] = engines >= 2 ? (in + out) / c + (1 - 1 / c) * pairs : engines == 1 ? in + out : sum;
    *limit = LIMIT_STREAMS;
    for (int l = 1; l < LIMIT_COUNT; l++)
        if (term[l] > term[*limit]) *limit = (bound_limit)l;
    return term[*limit];
}

static void print_order(report *r, const char *name, stats s, double seq, double bound, long bad)
{
    fprintf(r->out, "  %-16s %8.3f ms   (min %.3f, max %.3f)  speedup %.2fx  efficiency %.2f  %s\n", name, s.median,
            s.min, s.max, seq / s.median, bound / s.median, bad ? "DIFFERS" : "bit-identical");
}

enum {
    T_H2D,
    T_KERNEL,
    T_D2H,
    T_DUPLEX,
    T_H2D_CHUNKS,
    T_D2H_CHUNKS,
    T_DUPLEX_CHUNKS,
    T_SEQUENTIAL,
    T_PER_CHUNK,
    T_BY_STAGE,
    T_COUNT
};

// One issue order's figures in the JSON: NAME_ms, NAME_min_ms, NAME_max_ms, then speedup,
// efficiency and efficiency_best, each followed by SUFFIX.
static void report_order(report *r, const char *name, const char *suffix, stats s, double seq, double bound,
                         double bound_min)
{
    char key[64];
    const char *what[6] = {"%s_ms", "%s_min_ms", "%s_max_ms", "speedup%s", "efficiency%s", "efficiency_best%s"};
    double value[6] = {s.median, s.min, s.max, seq / s.median, bound / s.median, bound_min / s.min};
    for (int k = 0; k < 6; k++) {
        snprintf(key, sizeof key, what[k], k < 3 ? name : suffix);
        report_num(r, key, value[k]);
    }
}

// Part 3's figures in the JSON: each stage alone, the sequential run, the bound, both orders.
static void report_part3(report *r, const stats *t, double bound, double bound_min, bound_limit limit, long bad1,
                         long bad2)
{
    double seq = t[T_SEQUENTIAL].median;
    report_num(r, "h2d_ms", t[T_H2D].median);
    report_num(r, "kernel_ms", t[T_KERNEL].median);
    report_num(r, "d2h_ms", t[T_D2H].median);
    report_num(r, "duplex_ms", t[T_DUPLEX].median);
    report_num(r, "h2d_chunks_ms", t[T_H2D_CHUNKS].median);
    report_num(r, "d2h_chunks_ms", t[T_D2H_CHUNKS].median);
    report_num(r, "duplex_chunks_ms", t[T_DUPLEX_CHUNKS].median);
    report_num(r, "serial_sum_ms", t[T_H2D].median + t[T_KERNEL].median + t[T_D2H].median);
    report_num(r, "sequential_ms", seq);
    report_num(r, "bound_ms", bound);
    report_str(r, "bound_limit", LIMIT_NAMES[limit]);
    report_num(r, "bound_min_ms", bound_min);
    report_order(r, "per_chunk", "", t[T_PER_CHUNK], seq, bound, bound_min);
    report_order(r, "by_stage", "_by_stage", t[T_BY_STAGE], seq, bound, bound_min);
    report_bool(r, "per_chunk_verified", bad1 == 0);
    report_bool(r, "by_stage_verified", bad2 == 0);
    report_bool(r, "overlap_verified", bad1 == 0 && bad2 == 0);
}

int part3_overlap(workload *w, const device_info *dev, const options *o, report *r)
{
    long bad1 = check_variant("per chunk", run_overlapped_per_chunk, w, r->out);
    long bad2 = check_variant("by stage", run_overlapped_by_stage, w, r->out);
    variant v[T_COUNT] = {
        // in the order of the T_ names
        {.fn = h2d_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = kernel_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = d2h_only, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = both_copies, .ctx = w, .streams = w->streams, .nstreams = 2},
        {.fn = h2d_in_chunks, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = d2h_in_chunks, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = both_in_chunks, .ctx = w, .streams = w->streams, .nstreams = 2},
        {.fn = run_sequential, .ctx = w, .streams = w->streams, .nstreams = 1},
        {.fn = run_overlapped_per_chunk, .ctx = w, .streams = w->streams, .nstreams = w->nstreams},
        {.fn = run_overlapped_by_stage, .ctx = w, .streams = w->streams, .nstreams = w->nstreams},
    };
    stats t[T_COUNT];
    time_round_robin(v, T_COUNT, o, t);
    // the bound from the medians, and from each part's fastest repetition (to hold
    // against the fastest repetition of each order: a lower bound holds for every one)
    stage_times best = fastest_stages(t[T_H2D].median, t[T_H2D_CHUNKS].median, t[T_KERNEL].median, t[T_D2H].median,
                                      t[T_D2H_CHUNKS].median, t[T_DUPLEX].median, t[T_DUPLEX_CHUNKS].median);
    stage_times best_min = fastest_stages(t[T_H2D].min, t[T_H2D_CHUNKS].min, t[T_KERNEL].min, t[T_D2H].min,
                                          t[T_D2H_CHUNKS].min, t[T_DUPLEX].min, t[T_DUPLEX_CHUNKS].min);
    bound_limit limit, limit_of_min;
    double bound = overlap_bound(&best, w->chunks, w->nstreams, dev->copy_engines, &limit);
    double bound_min = overlap_bound(&best_min, w->chunks, w->nstreams, dev->copy_engines, &limit_of_min);
    double seq = t[T_SEQUENTIAL].median, sum = t[T_H2D].median + t[T_KERNEL].median + t[T_D2H].median;
    stats chunk = t[T_PER_CHUNK], stage = t[T_BY_STAGE];

    fprintf(r->out, "\npart 3: %d MiB in %d chunks over %d streams, kernel work %d (median of %d, round-robin)\n",
            o->size_mib, w->chunks, w->nstreams, w->work, o->reps);
    fprintf(r->out, "  stages alone:    copy-in %.3f ms, kernel %.3f ms, copy-out %.3f ms\n", t[T_H2D].median,
            t[T_KERNEL].median, t[T_D2H].median);
    fprintf(r->out, "  in %d chunks:    copy-in %.3f ms, copy-out %.3f ms\n", w->chunks, t[T_H2D_CHUNKS].median,
            t[T_D2H_CHUNKS].median);
    fprintf(r->out, "  both copies at once: %.3f ms whole, %.3f ms in chunks, on %d copy engine%s\n",
            t[T_DUPLEX].median, t[T_DUPLEX_CHUNKS].median, dev->copy_engines, dev->copy_engines == 1 ? "" : "s");
    fprintf(r->out, "  sequential run:  %8.3f ms = %.3f x the sum of the stages alone, %.3f ms\n", seq, seq / sum, sum);
    fprintf(r->out, "  bound:           %8.3f ms   set by the %s: %s (each copy at its fastest measured rate)\n", bound,
            LIMIT_NAMES[limit], limit_why(limit, dev->copy_engines));
    print_order(r, "per chunk:", chunk, seq, bound, bad1);
    print_order(r, "by stage:", stage, seq, bound, bad2);
    fprintf(r->out, "  fastest repetitions: bound %.3f ms, per chunk %.3f ms, by stage %.3f ms\n", bound_min, chunk.min,
            stage.min);
    fprintf(r->out, "  %s\n",
            dev->copy_engines >= 2
                ? "copy-ins and copy-outs run on different engines, so both issue orders can reach the bound"
                : "one engine serves both directions, so copy-outs queue behind copy-ins and the issue order matters");
    if (bad1 || bad2) fprintf(r->out, "  verification FAILED: the overlapped output differs from the sequential one\n");

    report_part3(r, t, bound, bound_min, limit, bad1, bad2);
    return bad1 == 0 && bad2 == 0;
}
