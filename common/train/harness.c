// harness.c: the harness's runs (harness.h): profile, reference run, timed runs, in
// the order of harness_run_with; the checks are in harness_check.c, the report in
// harness_report.c.
#include "common/train/harness.h"
#include "common/train/harness_internal.h"  // the types and steps the harness's files share

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu/memory.h"   // host_alloc, host_calloc, blocks_in_use
#include "common/base/timing.h"  // host_now_ms, process_cpu_ms, stats_of, event_ms

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

#define MAX_SLOTS (2 * HARNESS_MAX_VARIANTS)  // every variant, traced and (--trace-overhead) not

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
        CUDA_CHECK(
            cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
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
    ref->loss_sum = harness_loss_checksum(ref->losses, t->opt.batches);
    ref->weights_sum = mlp_weights_checksum(&t->model, s);
}

// ----------------------------------------------------------------------------
// 3. one run of a loop (its checks, 4., are in harness_check.c; the report, 5., in
// harness_report.c)

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
                stderr_line("%s: %s", t->prog, t->error[0] ? t->error : "the loop failed");
                return 0;
            }
            harness_check_run(t, ref, r[k].name, round, vd);
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
        stderr_line("%s: the reference run failed: %s", t->prog, t->error[0] ? t->error : "its loop failed");
        exit(EXIT_FAILURE);
    }
    memcpy(ref->losses, t->run.losses, sizeof(double) * (size_t)n);
    ref->loss_sum = harness_loss_checksum(ref->losses, n);
    ref->weights_sum = mlp_weights_checksum(&t->model, t->compute_stream);
}

int harness_run(trainer *t, const train_variant *variants, int nvariants)
{
    return harness_run_with(t, variants, nvariants, NULL);
}

int harness_run_with(trainer *t, const train_variant *variants, int nvariants, harness_extras *x)
{
    if (nvariants < 1 || nvariants > HARNESS_MAX_VARIANTS) {
        stderr_line("%s: harness_run takes 1 to %d variants, not %d", t->prog, HARNESS_MAX_VARIANTS, nvariants);
        exit(EXIT_FAILURE);
    }
    harness_print_header(t);
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
        for (int k = 0; k < nr; k++) harness_summarise(t, &r[k], &st);
        if (x) {
            for (int k = 0; k < nvariants; k++) x->step_ms[k] = r[k].step.median;
            x->gpu_ms = st.gpu_ms;
        }
        harness_print_results(t, &st, r, nr, &vd);
        double cpu_rel = t->opt.check_cpu ? harness_cpu_check(t, vd.lesson_losses) : -1;
        ok = vd.once && vd.match && vd.identical && (!t->opt.check_cpu || cpu_rel <= CPU_CHECK_TOLERANCE);
        if (t->opt.json) harness_write_json(t, &st, r, nr, &vd, cpu_rel);
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
    FILE *out = harness_human(t);
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
