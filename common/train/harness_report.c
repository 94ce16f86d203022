// harness_report.c: step 5 of the harness (harness.h): where the report goes (one process, or
// one rank of several), the figures of every variant (medians, spreads, the bound, the
// efficiency), printed and in --json. The bottom of the harness: harness_check.c and harness.c
// stand on it.
#include "common/train/harness_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu/memory.h"  // host_alloc, device_bytes_peak, pinned_bytes_peak

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

FILE *harness_human(const trainer *t) { return t->human ? t->human : t->opt.json ? stderr_by_lines() : stdout; }

// "t.json" becomes "t.rank1.json", any other name gains ".rank1", with several ranks.
static void rank_path(int rank, int world, const char *path, char *out, size_t size)
{
    size_t n = strlen(path);
    if (world == 1)
        snprintf(out, size, "%s", path);
    else if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        snprintf(out, size, "%.*s.rank%d.json", (int)(n - 5), path, rank);
    else
        snprintf(out, size, "%s.rank%d", path, rank);
}

rank_outputs harness_rank_outputs(const char *name, int rank, int world, const train_options *o)
{
    rank_outputs r;
    memset(&r, 0, sizeof r);
    r.json = o->json && rank == 0;  // rank 0 writes the JSON, with every rank's figures in it
    if (o->trace_path) rank_path(rank, world, o->trace_path, r.trace_path, sizeof r.trace_path);
    if (rank == 0) {
        // rank 0 reports for every rank; on stderr a line at a time, another rank's line never inside
        r.report = r.human = o->json ? stderr_by_lines() : stdout;
        return r;
    }
    r.human = fopen("/dev/null", "w");
    if (!r.human) {
        stderr_line("%s: cannot open /dev/null", name);
        exit(EXIT_FAILURE);
    }
    return r;
}

void harness_summarise(trainer *t, variant_result *r, const stage_times *st)
{
    int reps = t->opt.reps;
    double *x = (double *)host_alloc(sizeof(double) * (size_t)reps, "statistics");
#define SUMMARY(field, out)                                        \
    do {                                                           \
        for (int k = 0; k < reps; k++) x[k] = r->samples[k].field; \
        r->out = stats_of(x, reps);                                \
    } while (0)
    SUMMARY(step_ms, step);
    SUMMARY(cpu_ms, cpu);
    SUMMARY(prep_ms, prep);
    SUMMARY(blocked_ms, blocked);
    SUMMARY(busy_ms, busy);
    SUMMARY(issue_ms, issue);
#undef SUMMARY
    free(x);
    // The bound: the slowest of what each party must do per batch. The main thread
    // must do its own work (prep, when it prepares, and issuing); loader threads
    // share the preparation; the GPU must run the step and the copy engine the copy.
    int w = t->opt.workers;
    r->host_ms = w == 0 ? r->busy.median : fmax(r->prep.median / w, r->busy.median);
    r->bound_ms = fmax(r->host_ms, fmax(st->gpu_ms, st->h2d_ms));
}

void harness_print_header(trainer *t)
{
    FILE *out = harness_human(t);
    const train_options *o = &t->opt;
    const mlp_shape *s = &t->model.shape;
    fprintf(out, "%s: %d batches of %d samples, MLP %d", t->prog, o->batches, o->batch, s->dims[0]);
    for (int l = 1; l <= s->layers; l++) fprintf(out, "-%d", s->dims[l]);
    fprintf(out, ", prep work %d, ", o->prep_work);
    if (o->workers)
        fprintf(out, "%d loader thread%s\n", o->workers, o->workers == 1 ? "" : "s");
    else
        fprintf(out, "the main thread prepares\n");
    if (o->delay_us)
        fprintf(out, "test delay: %d us of spinning before each %s\n", o->delay_us,
                o->delay_on == DELAY_COPY ? "copy" : "forward and each backward pass");
    device_report(out, &t->dev);
}

void harness_print_results(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd)
{
    FILE *out = harness_human(t);
    int n = t->opt.batches;
    fprintf(out, "stages alone (median of %d batches): host prep %.3f ms, copy %.3f ms, GPU step %.3f ms\n",
            n < PROFILE_BATCHES ? n : PROFILE_BATCHES, st->prep_ms, st->h2d_ms, st->gpu_ms);
    fprintf(out, "runs (medians of %d, round-robin; per batch, in ms):\n", t->opt.reps);
    fprintf(out, "  %-16s %8s %17s %6s %7s %7s %7s %7s %7s %6s %6s\n", "variant", "step", "(min - max)", "bound",
            "effic.", "prep", "issue", "blocked", "CPU", "syncs", "waits");
    for (int k = 0; k < nr; k++)
        fprintf(out, "  %-16s %8.3f  (%6.3f - %6.3f) %6.3f %7.2f %7.3f %7.3f %7.3f %7.3f %6ld %6ld\n", r[k].name,
                r[k].step.median, r[k].step.min, r[k].step.max, r[k].bound_ms, r[k].bound_ms / r[k].step.median,
                r[k].prep.median, r[k].issue.median, r[k].blocked.median, r[k].cpu.median, r[k].syncs, r[k].slot_waits);
    fprintf(out, "  bound = max(host, copy, GPU step); host = %s\n",
            t->opt.workers ? "max(prep / loader threads, the main thread's own work)"
                           : "the main thread's own work (prep + issue)");
    fprintf(out, "  host syncs %ld (%.2f per batch), slot waits %ld, host blocked %.3f ms per batch\n", r[0].syncs,
            (double)r[0].syncs / n, r[0].slot_waits, r[0].blocked.median);
    fprintf(out, "checks: %ld runs (warm-up included), every loss taken exactly once: %s\n", vd->runs,
            vd->once ? "yes" : "NO");
    fprintf(out, "  bit-identical to the synchronous reference run: %s\n", vd->match ? "yes" : "NO");
    if (vd->bad_runs) fprintf(out, "  %ld runs failed; the first: %s\n", vd->bad_runs, vd->first_problem);
    if (!vd->identical) fprintf(out, "  the runs did NOT all give the same bits\n");
    fprintf(out, "losses: first %.6f, last %.6f; checksums: losses %016llx, weights %016llx\n", vd->lesson_losses[0],
            vd->lesson_losses[n - 1], (unsigned long long)vd->first_losses, (unsigned long long)vd->first_weights);
    fprintf(out, "memory: device %.1f MiB, pinned host %.2f MiB\n", device_bytes_peak() / 1048576.0,
            pinned_bytes_peak() / 1048576.0);
}

static void json_variant(json_writer *js, const char *prefix, const variant_result *r)
{
    char key[96];
#define KEY(name) (snprintf(key, sizeof key, "%s%s", prefix, name), key)
    json_num(js, KEY("step_ms"), r->step.median);
    json_num(js, KEY("step_min_ms"), r->step.min);
    json_num(js, KEY("step_max_ms"), r->step.max);
    json_num(js, KEY("prep_ms"), r->prep.median);
    json_num(js, KEY("issue_ms"), r->issue.median);
    json_num(js, KEY("host_ms"), r->host_ms);
    json_num(js, KEY("bound_ms"), r->bound_ms);
    json_num(js, KEY("efficiency"), r->bound_ms / r->step.median);
    json_num(js, KEY("blocked_ms_per_batch"), r->blocked.median);
    json_num(js, KEY("cpu_ms_per_step"), r->cpu.median);
    json_int(js, KEY("syncs"), r->syncs);
    json_int(js, KEY("slot_waits"), r->slot_waits);
#undef KEY
}

void harness_write_json(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd, double cpu_rel)
{
    json_writer *js = &t->js;
    const train_options *o = &t->opt;
    json_str(js, "lesson", t->prog);
    json_str(js, "device", t->dev.name);
    json_int(js, "batches", o->batches);
    json_int(js, "batch", o->batch);
    json_int(js, "prep_work", o->prep_work);
    json_int(js, "workers", o->workers);
    json_int(js, "delay_us", o->delay_us);
    json_str(js, "delay_on", o->delay_on == DELAY_COPY ? "copy" : "compute");
    json_num(js, "prep_alone_ms", st->prep_ms);
    json_num(js, "h2d_ms", st->h2d_ms);
    json_num(js, "gpu_ms", st->gpu_ms);
    json_num(js, "serial_ms", r[0].prep.median + st->h2d_ms + st->gpu_ms);
    json_variant(js, "", &r[0]);
    for (int k = 0; k < nr; k++) {
        char prefix[72];
        snprintf(prefix, sizeof prefix, "%s_", r[k].name);
        json_variant(js, prefix, &r[k]);
    }
    if (nr > 1 && r[nr - 1].untraced) {  // the untraced twin of the lesson's own loop is r[nr / 2]
        json_num(js, "untraced_step_ms", r[nr / 2].step.median);
        json_num(js, "trace_overhead", r[0].step.median / r[nr / 2].step.median - 1);
    }
    json_int(js, "runs_checked", vd->runs);
    json_bool(js, "losses_once", vd->once);
    long taken = 0;
    for (int i = 0; i < o->batches; i++) taken += t->run.taken[i] > 0;
    json_int(js, "losses_taken", taken);
    json_num(js, "loss_first", vd->lesson_losses[0]);
    json_num(js, "loss_last", vd->lesson_losses[o->batches - 1]);
    json_hex(js, "loss_checksum", vd->first_losses);
    json_hex(js, "weights_checksum", vd->first_weights);
    json_bool(js, "matches_reference", vd->match);
    json_bool(js, "runs_identical", vd->identical);
    if (o->check_cpu) json_num(js, "cpu_check_max_rel", cpu_rel);
    json_int(js, "device_bytes", (long long)device_bytes_peak());
    json_int(js, "pinned_bytes", (long long)pinned_bytes_peak());
}
