// harness.c: profile, reference run, timed and checked runs, report (harness.h).
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"  // host_alloc, device_bytes_peak, pinned_bytes_peak
#include "timing.h"  // host_now_ms, process_cpu_ms, stats_of, event_ms

#define PROFILE_BATCHES 10
#define CPU_CHECK_TOLERANCE 1e-4  // relative, per batch loss
#define MAX_SLOTS (2 * HARNESS_MAX_VARIANTS)

typedef struct {
    double prep_ms, h2d_ms, gpu_ms;  // each stage alone, per batch (medians)
} stage_times;

typedef struct {
    double *losses;
    uint64_t loss_sum, weights_sum;
} reference;

typedef struct {  // one run, per batch
    double step_ms, cpu_ms, prep_ms, blocked_ms, busy_ms, issue_ms;
} run_sample;

typedef struct {  // one variant, traced or (with --trace-overhead) not
    const train_variant *v;
    int untraced;
    char name[64];
    run_sample *samples;
    stats step, cpu, prep, blocked, busy, issue;
    double host_ms, bound_ms;
    long syncs, slot_waits;  // of its last run
} variant_result;

typedef struct {  // the verdict over every run
    long runs, bad_runs;
    int once, match, identical;
    uint64_t first_losses, first_weights;
    char first_problem[400];
    double *lesson_losses;  // the first checked run's losses, for --check-cpu
} verdict;

static FILE *report_to;  // harness_report_to: where the report goes instead

static FILE *human(const trainer *t) { return report_to ? report_to : t->opt.json ? stderr : stdout; }

void harness_report_to(FILE *out) { report_to = out; }

static uint64_t loss_checksum(const double *losses, int n)
{
    uint64_t h = FNV1A_START;
    for (int i = 0; i < n; i++) {
        float f = (float)losses[i];
        h = fnv1a(&f, sizeof f, h);
    }
    return h;
}

// ----------------------------------------------------------------------------
// 1. the profile, 2. the reference

// Each stage alone, batch after batch, nothing overlapped: what the bound is made of.
static stage_times profile_stages(trainer *t, const harness_extras *x)
{
    int n = t->opt.batches < PROFILE_BATCHES ? t->opt.batches : PROFILE_BATCHES;
    double prep[PROFILE_BATCHES], h2d[PROFILE_BATCHES], gpu[PROFILE_BATCHES];
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = -1; i < n; i++) {  // batch -1 is a warm-up
        long batch = i < 0 ? 0 : i;
        double t0 = host_now_ms();
        dataset_prepare(&t->data, batch, t->h_batch[0]);
        double t1 = host_now_ms();
        CUDA_CHECK(cudaEventRecord(a, t->copy_stream));
        CUDA_CHECK(cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice,
                                   t->copy_stream));
        CUDA_CHECK(cudaEventRecord(b, t->copy_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        double copy = event_ms(a, b);
        CUDA_CHECK(cudaEventRecord(a, t->compute_stream));
        if (x && x->profile_step)
            x->profile_step(t, t->compute_stream, x->profile_ctx);
        else
            trainer_step(t, batch, t->d_batch[0], t->compute_stream);
        CUDA_CHECK(cudaEventRecord(b, t->compute_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        double step = event_ms(a, b);
        if (i >= 0) {
            prep[i] = t1 - t0;
            h2d[i] = copy;
            gpu[i] = step;
        }
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    stage_times s = {stats_of(prep, n).median, stats_of(h2d, n).median, stats_of(gpu, n).median};
    return s;
}

// The reference every run must match bit for bit: the same training, with the
// host waiting for each operation before it issues the next.
static void reference_run(trainer *t, reference *ref)
{
    cudaStream_t s = t->compute_stream;
    ref->losses = (double *)host_alloc(sizeof(double) * (size_t)t->opt.batches, "the reference losses");
    mlp_model_reset(&t->model, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    trace_range phase = trace_begin(TL_RANGE_PHASE, "reference", -1);
    for (long i = 0; i < t->opt.batches; i++) {
        dataset_prepare(&t->data, i, t->h_batch[0]);
        CUDA_CHECK(cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice, s));
        trainer_step(t, i, t->d_batch[0], s);
        CUDA_CHECK(cudaMemcpyAsync(t->h_loss, trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        ref->losses[i] = t->h_loss[0];
    }
    trace_end(&phase);
    ref->loss_sum = loss_checksum(ref->losses, t->opt.batches);
    ref->weights_sum = mlp_weights_checksum(&t->model, s);
}

// ----------------------------------------------------------------------------
// 3. one run of a loop, 4. its checks

// Clears the counters, puts the initial weights back and poisons the loss buffers,
// so that a loss read before its copy lands cannot pass.
static void start_run(trainer *t)
{
    run_counters *c = &t->run;
    int n = t->opt.batches;
    memset(c->taken, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) c->losses[i] = NAN;
    c->syncs = c->slot_waits = 0;
    c->blocked_ms = c->prep_ms = c->main_prep_ms = 0;
    t->error[0] = '\0';
    mlp_model_reset(&t->model, t->compute_stream);
    CUDA_CHECK(cudaMemsetAsync(t->d_loss, 0xFF, sizeof(float) * (size_t)t->loss_slots, t->compute_stream));
    memset(t->h_loss, 0xFF, sizeof(float) * (size_t)t->loss_slots);
    CUDA_CHECK(cudaDeviceSynchronize());
}

// One run from the initial weights (start_run). Returns the loop's answer.
static int run_once(trainer *t, const train_variant *v, const char *phase_name, run_sample *out)
{
    run_counters *c = &t->run;
    int n = t->opt.batches;
    start_run(t);

    trace_range phase = trace_begin(TL_RANGE_PHASE, phase_name, -1);
    t->delays_on = 1;
    double cpu0 = process_cpu_ms(), t0 = host_now_ms();
    int rc = v->loop(t, v->ctx);
    double elapsed = host_now_ms() - t0, cpu = process_cpu_ms() - cpu0;
    t->delays_on = 0;
    trace_end(&phase);
    // not part of the loop's time or its counts: a loop that ends with work in
    // flight shows up as losses never taken, not as a crash below
    CUDA_CHECK(cudaDeviceSynchronize());
    out->step_ms = elapsed / n;
    out->cpu_ms = cpu / n;
    out->prep_ms = c->prep_ms / n;
    out->blocked_ms = c->blocked_ms / n;
    out->busy_ms = (elapsed - c->blocked_ms) / n;  // the main thread's own work
    out->issue_ms = (elapsed - c->blocked_ms - c->main_prep_ms) / n;
    return rc;
}

// Describes the first wrong loss of the run into buf; returns how many are wrong.
static long compare_losses(const trainer *t, const reference *ref, char *buf, size_t size)
{
    long bad = 0;
    for (int i = 0; i < t->opt.batches; i++) {
        float got = (float)t->run.losses[i], want = (float)ref->losses[i];
        if (t->run.taken[i] == 1 && memcmp(&got, &want, sizeof got) == 0) continue;
        if (bad++ > 0) continue;
        if (t->run.taken[i] == 0)
            snprintf(buf, size, "batch %d: loss never taken from the ring", i);
        else if (t->run.taken[i] > 1)
            snprintf(buf, size, "batch %d: loss taken %d times", i, t->run.taken[i]);
        else if (isnan(got))
            snprintf(buf, size, "batch %d: loss read before its copy landed (still poisoned)", i);
        else
            snprintf(buf, size, "batch %d: loss %.9g, the synchronous run gives %.9g: the losses diverge", i, got,
                     want);
    }
    return bad;
}

static void check_run(trainer *t, const reference *ref, const char *name, int k, verdict *vd)
{
    int n = t->opt.batches;
    char problem[160] = "";
    long bad = compare_losses(t, ref, problem, sizeof problem);
    uint64_t lsum = loss_checksum(t->run.losses, n);
    uint64_t wsum = mlp_weights_checksum(&t->model, t->compute_stream);
    for (int i = 0; i < n; i++) vd->once = vd->once && t->run.taken[i] == 1;
    if (vd->runs == 0) {
        vd->first_losses = lsum;
        vd->first_weights = wsum;
        memcpy(vd->lesson_losses, t->run.losses, sizeof(double) * (size_t)n);
    } else if (lsum != vd->first_losses || wsum != vd->first_weights) {
        vd->identical = 0;
    }
    if (!bad && wsum != ref->weights_sum) snprintf(problem, sizeof problem, "the losses match but the final weights differ");
    vd->runs++;
    if (!problem[0]) return;
    vd->match = 0;
    if (vd->bad_runs++ == 0)
        snprintf(vd->first_problem, sizeof vd->first_problem, "%s, %s run %d: %s (%ld of %d losses wrong)", name,
                 k < 0 ? "warm-up" : "timed", k < 0 ? k + t->opt.warmup + 1 : k + 1, problem, bad, n);
}

// ----------------------------------------------------------------------------
// 5. figures and report

static void summarise(trainer *t, variant_result *r, const stage_times *st)
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

static void print_header(trainer *t)
{
    FILE *out = human(t);
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

static void print_results(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd)
{
    FILE *out = human(t);
    int n = t->opt.batches;
    fprintf(out, "stages alone (median of %d batches): host prep %.3f ms, copy %.3f ms, GPU step %.3f ms\n",
            n < PROFILE_BATCHES ? n : PROFILE_BATCHES, st->prep_ms, st->h2d_ms, st->gpu_ms);
    fprintf(out, "runs (medians of %d, round-robin; per batch, in ms):\n", t->opt.reps);
    fprintf(out, "  %-16s %8s %17s %6s %7s %7s %7s %7s %7s %6s %6s\n", "variant", "step", "(min - max)", "bound",
            "effic.", "prep", "issue", "blocked", "CPU", "syncs", "waits");
    for (int k = 0; k < nr; k++)
        fprintf(out, "  %-16s %8.3f  (%6.3f - %6.3f) %6.3f %7.2f %7.3f %7.3f %7.3f %7.3f %6ld %6ld\n", r[k].name,
                r[k].step.median, r[k].step.min, r[k].step.max, r[k].bound_ms, r[k].bound_ms / r[k].step.median,
                r[k].prep.median, r[k].issue.median, r[k].blocked.median, r[k].cpu.median, r[k].syncs,
                r[k].slot_waits);
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
    fprintf(out, "losses: first %.6f, last %.6f; checksums: losses %016llx, weights %016llx\n",
            vd->lesson_losses[0], vd->lesson_losses[n - 1], (unsigned long long)vd->first_losses,
            (unsigned long long)vd->first_weights);
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

static void write_json(trainer *t, const stage_times *st, variant_result *r, int nr, const verdict *vd,
                       double cpu_rel)
{
    json_writer *js = &t->js;
    const train_options *o = &t->opt;
    char hex[32];
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
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)vd->first_losses);
    json_str(js, "loss_checksum", hex);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)vd->first_weights);
    json_str(js, "weights_checksum", hex);
    json_bool(js, "matches_reference", vd->match);
    json_bool(js, "runs_identical", vd->identical);
    if (o->check_cpu) json_num(js, "cpu_check_max_rel", cpu_rel);
    json_int(js, "device_bytes", (long long)device_bytes_peak());
    json_int(js, "pinned_bytes", (long long)pinned_bytes_peak());
}

// The lesson's own losses (not the reference run's) against the CPU in double
// precision. Returns the largest relative difference (NaN if any loss is NaN).
static double cpu_check(trainer *t, const double *losses)
{
    const train_options *o = &t->opt;
    double *cpu = (double *)host_alloc(sizeof(double) * (size_t)o->batches, "the CPU reference's losses");
    mlp_cpu_reference(&t->model.shape, (float)o->lr, (uint64_t)o->seed, &t->data, o->batches, cpu);
    double worst = 0;
    for (int i = 0; i < o->batches; i++) {
        double rel = fabs(losses[i] - cpu[i]) / fabs(cpu[i]);
        if (!(rel <= worst)) worst = rel;  // NaN-safe: a NaN makes it NaN
    }
    free(cpu);
    fprintf(human(t), "  CPU reference: largest relative difference %.2e (%s %.0e)\n", worst,
            worst <= CPU_CHECK_TOLERANCE ? "within" : "NOT within", CPU_CHECK_TOLERANCE);
    return worst;
}

// ----------------------------------------------------------------------------

// Round-robin: warm-up rounds, then --reps rounds, one run of each (variant,
// traced or not) per round, every run checked. Returns 0 if a loop failed.
static int timed_runs(trainer *t, variant_result *r, int nr, const reference *ref, verdict *vd)
{
    for (int round = -t->opt.warmup; round < t->opt.reps; round++)
        for (int k = 0; k < nr; k++) {
            run_sample sample;
            if (r[k].untraced) trace_pause();
            // the lesson's own loop is the timeline's "run" phase; a variant's phase is its name
            int rc = run_once(t, r[k].v, k == 0 ? "run" : r[k].name, &sample);
            trace_resume();
            if (rc != 0) {
                fprintf(stderr, "%s: %s\n", t->prog, t->error[0] ? t->error : "the loop failed");
                return 0;
            }
            check_run(t, ref, r[k].name, round, vd);
            r[k].syncs = t->run.syncs;
            r[k].slot_waits = t->run.slot_waits;
            if (round >= 0) r[k].samples[round] = sample;
        }
    return 1;
}

// The lesson's own reference (harness_extras.reference), run once, with no test
// delay. A reference that fails or loses a loss is the course's error: the program stops.
static void own_reference_run(trainer *t, reference *ref, const train_variant *own)
{
    int n = t->opt.batches;
    ref->losses = (double *)host_alloc(sizeof(double) * (size_t)n, "the reference losses");
    start_run(t);
    trace_range phase = trace_begin(TL_RANGE_PHASE, "reference", -1);
    int rc = own->loop(t, own->ctx);
    trace_end(&phase);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n && rc == 0; i++)
        if (t->run.taken[i] != 1) {
            snprintf(t->error, sizeof t->error, "batch %d: the reference took its loss %d times", i, t->run.taken[i]);
            rc = -1;
        }
    if (rc != 0) {
        fprintf(stderr, "%s: the reference run failed: %s\n", t->prog, t->error[0] ? t->error : "its loop failed");
        exit(EXIT_FAILURE);
    }
    memcpy(ref->losses, t->run.losses, sizeof(double) * (size_t)n);
    ref->loss_sum = loss_checksum(ref->losses, n);
    ref->weights_sum = mlp_weights_checksum(&t->model, t->compute_stream);
}

int harness_run(trainer *t, const train_variant *variants, int nvariants)
{
    return harness_run_with(t, variants, nvariants, NULL);
}

int harness_run_with(trainer *t, const train_variant *variants, int nvariants, harness_extras *x)
{
    if (nvariants < 1 || nvariants > HARNESS_MAX_VARIANTS) {
        fprintf(stderr, "%s: harness_run takes 1 to %d variants, not %d\n", t->prog, HARNESS_MAX_VARIANTS, nvariants);
        exit(EXIT_FAILURE);
    }
    print_header(t);
    stage_times st = profile_stages(t, x);
    reference ref;
    if (x && x->reference)
        own_reference_run(t, &ref, x->reference);
    else
        reference_run(t, &ref);

    int twice = t->opt.trace_overhead && trace_on(), nr = nvariants * (twice ? 2 : 1);
    variant_result r[MAX_SLOTS];
    memset(r, 0, sizeof r);
    for (int k = 0; k < nr; k++) {
        r[k].v = &variants[k % nvariants];
        r[k].untraced = k >= nvariants;
        snprintf(r[k].name, sizeof r[k].name, "%s%s", r[k].v->name, r[k].untraced ? "_untraced" : "");
        r[k].samples = (run_sample *)host_calloc((size_t)t->opt.reps, sizeof(run_sample), "timings");
    }
    verdict vd;
    memset(&vd, 0, sizeof vd);
    vd.once = vd.match = vd.identical = 1;
    vd.lesson_losses = (double *)host_calloc((size_t)t->opt.batches, sizeof(double), "the losses");
    int ok = timed_runs(t, r, nr, &ref, &vd);
    if (ok) {
        for (int k = 0; k < nr; k++) summarise(t, &r[k], &st);
        if (x) {
            for (int k = 0; k < nvariants; k++) x->step_ms[k] = r[k].step.median;
            x->gpu_ms = st.gpu_ms;
        }
        print_results(t, &st, r, nr, &vd);
        double cpu_rel = t->opt.check_cpu ? cpu_check(t, vd.lesson_losses) : -1;
        ok = vd.once && vd.match && vd.identical && (!t->opt.check_cpu || cpu_rel <= CPU_CHECK_TOLERANCE);
        if (t->opt.json) write_json(t, &st, r, nr, &vd, cpu_rel);
    }
    for (int k = 0; k < nr; k++) free(r[k].samples);
    free(vd.lesson_losses);
    free(ref.losses);
    return ok;
}

int harness_run_loop(trainer *t, train_loop_fn loop, void *ctx)
{
    train_variant v = {"run", loop, ctx};
    return harness_run(t, &v, 1);
}

int harness_finish(trainer *t, int ok)
{
    FILE *out = human(t);
    if (trace_on()) trace_finish(out);
    trainer_destroy(t);
    if (blocks_in_use() != 0) {  // the lesson's own buffers are freed before this call
        fprintf(out, "memory: %ld device or pinned buffers were never freed\n", blocks_in_use());
        ok = 0;
    }
    fprintf(out, "%s\n", ok ? "all checks passed" : "CHECKS FAILED");
    if (t->opt.json) {
        json_bool(&t->js, "verified", ok);
        json_end(&t->js);
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
