// train.c: the machinery around a training lesson's loop.
#include "train.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "memory.h"
#include "timing.h"

#define PROFILE_BATCHES 10

// Host preparation time of the current run, summed over every thread that prepares.
static pthread_mutex_t prep_lock = PTHREAD_MUTEX_INITIALIZER;
static double prep_ms_sum;
#define CPU_CHECK_TOLERANCE 1e-4  // relative, per batch loss

void train_options_default(train_options *o)
{
    memset(o, 0, sizeof *o);
    o->batches = 200;
    o->batch = 512;
    o->in_dim = 256;
    o->hidden = 4096;
    o->hidden_layers = 3;
    o->out_dim = 16;
    o->prep_work = 5;
    o->seed = 1234;
    o->lr = 0.02;
    o->reps = 3;
    o->warmup = 1;
    o->workers = 1;
}

int train_option_specs(train_options *o, arg_spec *s)
{
    int n = 0;
    s[n++] = (arg_spec){"batches", ARG_INT, &o->batches, 1, 1000000, "N", "batches per run"};
    s[n++] = (arg_spec){"batch", ARG_INT, &o->batch, 1, 65536, "N", "samples per batch"};
    s[n++] = (arg_spec){"in", ARG_INT, &o->in_dim, 1, 65536, "N", "input features"};
    s[n++] = (arg_spec){"hidden", ARG_INT, &o->hidden, 1, 65536, "N", "units per hidden layer"};
    s[n++] = (arg_spec){"layers", ARG_INT, &o->hidden_layers, 1, MLP_MAX_LAYERS - 1, "N", "hidden layers"};
    s[n++] = (arg_spec){"out", ARG_INT, &o->out_dim, 1, 65536, "N", "outputs"};
    s[n++] = (arg_spec){"prep-work", ARG_INT, &o->prep_work, 0, 100000, "N",
                        "smoothing rounds per sample: the host's work per batch"};
    s[n++] = (arg_spec){"lr", ARG_DOUBLE, &o->lr, 1e-6, 10, "X", "SGD learning rate"};
    s[n++] = (arg_spec){"seed", ARG_INT, &o->seed, 0, 2147483647, "N", "seed of the data and the weights"};
    s[n++] = (arg_spec){"reps", ARG_INT, &o->reps, 1, 100, "N", "timed runs (the median is reported)"};
    s[n++] = (arg_spec){"warmup", ARG_INT, &o->warmup, 0, 10, "N", "untimed runs first"};
    s[n++] = (arg_spec){"check-cpu", ARG_FLAG, &o->check_cpu, 0, 0, NULL,
                        "also compare the losses with a CPU reference (slow: small sizes)"};
    s[n++] = (arg_spec){"trace", ARG_STRING, &o->trace_path, 0, 0, "FILE", "write a Chrome/Perfetto trace"};
    s[n++] = (arg_spec){"timeline", ARG_FLAG, &o->timeline, 0, 0, NULL, "print a per-stream timeline"};
    s[n++] = (arg_spec){"json", ARG_FLAG, &o->json, 0, 0, NULL, "print the results as one JSON object on stdout"};
    return n;
}

static FILE *human(const trainer *t) { return t->opt.json ? stderr : stdout; }

// The course's kernels and cuBLAS take int sizes: refuse shapes whose matrices
// have more elements than an int can count, before touching the GPU.
static void check_shape(const char *prog, const train_options *o)
{
    struct {
        const char *what;
        long long rows, cols;
    } m[] = {
        {"--in x --batch (a batch of features)", o->in_dim, o->batch},
        {"--hidden x --batch (one layer's activations)", o->hidden, o->batch},
        {"--out x --batch (the outputs)", o->out_dim, o->batch},
        {"--hidden x --in (the first weight matrix)", o->hidden, o->in_dim},
        {"--hidden x --hidden (a hidden weight matrix)", o->hidden, o->hidden},
        {"--out x --hidden (the last weight matrix)", o->out_dim, o->hidden},
    };
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++)
        if (m[k].rows * m[k].cols > 2147483647LL)
            usage_error(prog, "%s has %lld elements; the course indexes with int, so at most 2147483647",
                        m[k].what, m[k].rows * m[k].cols);
}

void trainer_init(trainer *t, const char *prog, const train_options *o, int host_slots,
                  int device_slots, int loss_slots)
{
    memset(t, 0, sizeof *t);
    t->prog = prog;
    t->opt = *o;
    check_shape(prog, o);
    trace_start(prog, o->trace_path, o->timeline);
    trace_add_window("run", o->batches > 12 ? 10 : 0, o->batches > 12 ? 3 : (o->batches < 3 ? o->batches : 3));
    gpu_open(prog, &t->dev);

    mlp_shape shape;
    mlp_shape_init(&shape, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    dataset_init(&t->data, o->batch, o->in_dim, o->out_dim, o->prep_work, (uint64_t)o->seed);
    t->batch_bytes = sizeof(float) * (size_t)dataset_batch_floats(&t->data);
    size_t need = mlp_model_device_bytes(&shape) + (size_t)device_slots * t->batch_bytes +
                  sizeof(float) * (size_t)loss_slots;
    if (need + (256u << 20) > t->dev.mem_free)
        usage_error(prog, "this model and batch need %.2f GiB of device memory; the GPU has %.2f GiB free",
                    need / 1073741824.0, t->dev.mem_free / 1073741824.0);
    mlp_model_create(&t->model, &shape, (float)o->lr, (uint64_t)o->seed);

    CUDA_CHECK(cudaStreamCreateWithFlags(&t->copy_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&t->compute_stream, cudaStreamNonBlocking));
    trace_name_stream(t->copy_stream, "copy");
    trace_name_stream(t->compute_stream, "compute");
    trace_name_thread("main");

    t->host_slots = host_slots;
    t->device_slots = device_slots;
    t->h_batch = (float **)calloc((size_t)host_slots, sizeof(float *));
    t->d_batch = (float **)calloc((size_t)device_slots, sizeof(float *));
    for (int s = 0; s < host_slots; s++) t->h_batch[s] = (float *)pinned_alloc(t->batch_bytes);
    for (int s = 0; s < device_slots; s++) t->d_batch[s] = (float *)device_alloc(t->batch_bytes);
    t->loss_slots = loss_slots;
    t->d_loss = (float *)device_alloc(sizeof(float) * (size_t)loss_slots);
    t->h_loss = (float *)pinned_alloc(sizeof(float) * (size_t)loss_slots);
    t->losses = (double *)calloc((size_t)o->batches, sizeof(double));
    t->extracted = (int *)calloc((size_t)o->batches, sizeof(int));
    if (o->json) json_begin(&t->js, stdout);
}

void trainer_destroy(trainer *t)
{
    for (int s = 0; s < t->host_slots; s++) pinned_free(t->h_batch[s]);
    for (int s = 0; s < t->device_slots; s++) device_free(t->d_batch[s]);
    free(t->h_batch);
    free(t->d_batch);
    device_free(t->d_loss);
    pinned_free(t->h_loss);
    free(t->losses);
    free(t->extracted);
    mlp_model_destroy(&t->model);
    dataset_free(&t->data);
    CUDA_CHECK(cudaStreamDestroy(t->copy_stream));
    CUDA_CHECK(cudaStreamDestroy(t->compute_stream));
}

float *batch_targets(const trainer *t, float *slot) { return slot + (size_t)t->opt.batch * t->opt.in_dim; }

void trainer_prepare(trainer *t, long i, float *h_slot)
{
    trace_range r = trace_begin("prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare(&t->data, i, h_slot);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    pthread_mutex_lock(&prep_lock);
    prep_ms_sum += ms;
    pthread_mutex_unlock(&prep_lock);
}

float *trainer_loss_slot(trainer *t, long i) { return t->d_loss + i % t->loss_slots; }

void trainer_step(trainer *t, long i, float *d_slot, cudaStream_t stream)
{
    mlp_forward(&t->model, batch_features(d_slot), stream);
    mlp_backward(&t->model, batch_features(d_slot), batch_targets(t, d_slot), trainer_loss_slot(t, i), stream);
}

void trainer_sync_stream(trainer *t, cudaStream_t stream)
{
    trace_range r = trace_begin("sync", -1);
    double t0 = host_now_ms();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    t->blocked_ms += host_now_ms() - t0;
    t->syncs++;
    trace_end(&r);
}

void trainer_sync_event(trainer *t, cudaEvent_t event)
{
    trace_range r = trace_begin("sync", -1);
    double t0 = host_now_ms();
    CUDA_CHECK(cudaEventSynchronize(event));
    t->blocked_ms += host_now_ms() - t0;
    t->syncs++;
    trace_end(&r);
}

int event_done(cudaEvent_t event)
{
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaErrorNotReady) return 0;
    CUDA_CHECK(err);
    return 1;
}

void trainer_wait_slot(trainer *t, cudaEvent_t event)
{
    if (event_done(event)) return;
    trace_range r = trace_begin("slot wait", -1);
    double t0 = host_now_ms();
    CUDA_CHECK(cudaEventSynchronize(event));
    t->blocked_ms += host_now_ms() - t0;
    t->slot_waits++;
    trace_end(&r);
}

void trainer_take_loss(trainer *t, long i)
{
    if (i < 0 || i >= t->opt.batches) return;
    t->losses[i] = t->h_loss[i % t->loss_slots];
    t->extracted[i]++;
}

void loss_ring_create(loss_ring *r, const trainer *t)
{
    r->ready = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * (size_t)t->loss_slots);
    for (int k = 0; k < t->loss_slots; k++) CUDA_CHECK(cudaEventCreateWithFlags(&r->ready[k], cudaEventDisableTiming));
    r->next = 0;
}

void loss_ring_destroy(loss_ring *r, const trainer *t)
{
    for (int k = 0; k < t->loss_slots; k++) CUDA_CHECK(cudaEventDestroy(r->ready[k]));
    free(r->ready);
}

void loss_ring_queue(loss_ring *r, trainer *t, long i, cudaStream_t stream)
{
    int slot = (int)(i % t->loss_slots);
    CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[slot], trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost,
                               stream));
    CUDA_CHECK(cudaEventRecord(r->ready[slot], stream));
}

void loss_ring_sync(loss_ring *r, trainer *t, long i)
{
    trainer_sync_event(t, r->ready[i % t->loss_slots]);
    for (; r->next <= i; r->next++) {
        trainer_wait_slot(t, r->ready[r->next % t->loss_slots]);  // done already: it came before batch i's
        trainer_take_loss(t, r->next);
    }
}

// ----------------------------------------------------------------------------
// runs

static uint64_t fnv1a(const void *data, size_t bytes, uint64_t h)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 0x100000001b3ull;
    return h;
}

// FNV-1a over the losses' float bits, in batch order.
static uint64_t loss_checksum(const double *losses, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        float f = (float)losses[i];
        h = fnv1a(&f, sizeof f, h);
    }
    return h;
}

typedef struct {
    double prep_ms, h2d_ms, gpu_ms;
} stage_times;

// Each stage alone, batch after batch, nothing overlapped: what the bound is made of.
static stage_times profile_stages(trainer *t)
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
        float ms_copy = 0, ms_step = 0;
        CUDA_CHECK(cudaEventRecord(a, t->copy_stream));
        CUDA_CHECK(cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice,
                                   t->copy_stream));
        CUDA_CHECK(cudaEventRecord(b, t->copy_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms_copy, a, b));
        CUDA_CHECK(cudaEventRecord(a, t->compute_stream));
        trainer_step(t, batch, t->d_batch[0], t->compute_stream);
        CUDA_CHECK(cudaEventRecord(b, t->compute_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms_step, a, b));
        if (i >= 0) {
            prep[i] = t1 - t0;
            h2d[i] = ms_copy;
            gpu[i] = ms_step;
        }
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    stage_times s = {stats_of(prep, n).median, stats_of(h2d, n).median, stats_of(gpu, n).median};
    return s;
}

// The reference every lesson must match bit for bit: the same training, with the
// host waiting for each operation before it issues the next.
static uint64_t reference_run(trainer *t, double *losses)
{
    mlp_model_reset(&t->model, t->compute_stream);
    CUDA_CHECK(cudaStreamSynchronize(t->compute_stream));
    trace_range phase = trace_begin("reference", TRACE_PHASE);
    for (long i = 0; i < t->opt.batches; i++) {
        dataset_prepare(&t->data, i, t->h_batch[0]);
        CUDA_CHECK(cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice,
                                   t->compute_stream));
        trainer_step(t, i, t->d_batch[0], t->compute_stream);
        CUDA_CHECK(cudaMemcpyAsync(t->h_loss, trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost,
                                   t->compute_stream));
        CUDA_CHECK(cudaStreamSynchronize(t->compute_stream));
        losses[i] = t->h_loss[0];
    }
    trace_end(&phase);
    return mlp_weights_checksum(&t->model);
}

// One run of the loop from the initial weights, with poisoned loss buffers so that
// a loss read before its copy lands cannot pass.
static double run_once(trainer *t, train_loop_fn loop, double *cpu_ms, double *prep_ms)
{
    memset(t->extracted, 0, sizeof(int) * (size_t)t->opt.batches);
    for (int i = 0; i < t->opt.batches; i++) t->losses[i] = NAN;
    t->syncs = t->slot_waits = 0;
    t->blocked_ms = 0;
    prep_ms_sum = 0;
    mlp_model_reset(&t->model, t->compute_stream);
    CUDA_CHECK(cudaMemsetAsync(t->d_loss, 0xFF, sizeof(float) * (size_t)t->loss_slots, t->compute_stream));
    memset(t->h_loss, 0xFF, sizeof(float) * (size_t)t->loss_slots);
    CUDA_CHECK(cudaDeviceSynchronize());

    trace_range phase = trace_begin("run", TRACE_PHASE);
    double cpu0 = process_cpu_ms(), t0 = host_now_ms();
    loop(t);
    double elapsed = host_now_ms() - t0;
    trace_end(&phase);
    *cpu_ms = process_cpu_ms() - cpu0;
    *prep_ms = prep_ms_sum / t->opt.batches;
    // not part of the loop's time or its sync count: a loop that ends with work in
    // flight shows up as losses never taken, not as a crash below
    CUDA_CHECK(cudaDeviceSynchronize());
    return elapsed;
}

run_result trainer_time_loop(trainer *t, train_loop_fn loop, int reps)
{
    double *step = (double *)malloc(sizeof(double) * (size_t)reps);
    double *cpu = (double *)malloc(sizeof(double) * (size_t)reps);
    double *blocked = (double *)malloc(sizeof(double) * (size_t)reps);
    run_result r = {0, 0, 0, 0, 0, 1};
    for (int k = -t->opt.warmup; k < reps; k++) {
        double cpu_ms, prep_ms;
        double ms = run_once(t, loop, &cpu_ms, &prep_ms);
        if (k < 0) continue;
        step[k] = ms / t->opt.batches;
        cpu[k] = cpu_ms / t->opt.batches;
        blocked[k] = t->blocked_ms / t->opt.batches;
    }
    r.step_ms = stats_of(step, reps).median;
    r.cpu_ms_per_step = stats_of(cpu, reps).median;
    r.blocked_ms_per_batch = stats_of(blocked, reps).median;
    r.syncs = t->syncs;
    r.slot_waits = t->slot_waits;
    free(step);
    free(cpu);
    free(blocked);
    return r;
}

// Compares a run's losses with the reference; prints the first few differences.
static long compare_losses(const trainer *t, const double *ref, FILE *out)
{
    long bad = 0;
    for (int i = 0; i < t->opt.batches; i++) {
        float got = (float)t->losses[i], want = (float)ref[i];
        if (memcmp(&got, &want, sizeof got) == 0) continue;
        if (bad++ < 3) {
            if (t->extracted[i] == 0)
                fprintf(out, "  batch %d: loss never taken from the ring\n", i);
            else if (isnan(got))
                fprintf(out, "  batch %d: loss read before its copy landed (still poisoned)\n", i);
            else
                fprintf(out, "  batch %d: loss %.9g, the synchronous run gives %.9g\n", i, got, want);
        }
    }
    return bad;
}

int trainer_run(trainer *t, train_loop_fn loop)
{
    FILE *out = human(t);
    const train_options *o = &t->opt;
    const mlp_shape *s = &t->model.shape;
    fprintf(out, "%s: %d batches of %d samples, MLP %d", t->prog, o->batches, o->batch, s->dims[0]);
    for (int l = 1; l <= s->layers; l++) fprintf(out, "-%d", s->dims[l]);
    fprintf(out, ", prep work %d, %d loader thread%s\n", o->prep_work, o->workers, o->workers == 1 ? "" : "s");
    device_report(out, &t->dev);

    stage_times st = profile_stages(t);

    double *ref = (double *)malloc(sizeof(double) * (size_t)o->batches);
    uint64_t ref_weights = reference_run(t, ref);
    uint64_t ref_losses = loss_checksum(ref, o->batches);

    // the timed runs, each checked against the reference and against the first
    int reps = o->reps, ok = 1, runs_identical = 1;
    double *step = (double *)malloc(sizeof(double) * (size_t)reps);
    double *cpu = (double *)malloc(sizeof(double) * (size_t)reps);
    double *prep = (double *)malloc(sizeof(double) * (size_t)reps);
    uint64_t first_losses = 0, first_weights = 0, weights = 0;
    long bad = 0;
    int once = 1;
    for (int k = -o->warmup; k < reps; k++) {
        double cpu_ms, prep_ms;
        double ms = run_once(t, loop, &cpu_ms, &prep_ms);
        uint64_t lsum = loss_checksum(t->losses, o->batches);
        weights = mlp_weights_checksum(&t->model);
        if (k < 0) continue;
        step[k] = ms / o->batches;
        cpu[k] = cpu_ms / o->batches;
        prep[k] = prep_ms;
        if (k == 0) {
            first_losses = lsum;
            first_weights = weights;
            for (int i = 0; i < o->batches; i++)
                if (t->extracted[i] != 1) once = 0;
            bad = compare_losses(t, ref, out);
        } else if (lsum != first_losses || weights != first_weights) {
            runs_identical = 0;
        }
    }
    stats st_step = stats_of(step, reps);
    double cpu_step = stats_of(cpu, reps).median;
    // the bound takes the host's preparation time as measured in the runs (one
    // process's profile can be far off on a shared machine), spread over the workers
    double prep_run = stats_of(prep, reps).median;
    double prep_share = prep_run / o->workers;
    double bound = prep_share > st.gpu_ms ? prep_share : st.gpu_ms;
    if (st.h2d_ms > bound) bound = st.h2d_ms;
    double serial = prep_run + st.h2d_ms + st.gpu_ms;
    long taken = 0;
    for (int i = 0; i < o->batches; i++) taken += t->extracted[i] > 0;

    fprintf(out, "stages alone (median of %d batches): host prep %.3f ms, copy %.3f ms, GPU step %.3f ms\n",
            o->batches < PROFILE_BATCHES ? o->batches : PROFILE_BATCHES, st.prep_ms, st.h2d_ms, st.gpu_ms);
    fprintf(out, "  host prep in the runs %.3f ms per batch; bound max(prep%s, copy, GPU) %.3f ms, serial sum %.3f ms\n",
            prep_run, o->workers > 1 ? " / workers" : "", bound, serial);
    fprintf(out, "run: step %.3f ms (median of %d; min %.3f, max %.3f), efficiency (bound / step) %.2f\n",
            st_step.median, reps, st_step.min, st_step.max, bound / st_step.median);
    fprintf(out, "  host syncs %ld (%.2f per batch), slot waits %ld, host blocked %.3f ms per batch\n",
            t->syncs, (double)t->syncs / o->batches, t->slot_waits, t->blocked_ms / o->batches);
    fprintf(out, "  CPU time per step %.3f ms (all threads)\n", cpu_step);
    fprintf(out, "losses: %ld of %d taken, %s; first %.6f, last %.6f\n", taken, o->batches,
            once ? "each exactly once" : "NOT each exactly once", t->losses[0], t->losses[o->batches - 1]);
    fprintf(out, "  checksums: losses %016llx, weights %016llx\n", (unsigned long long)first_losses,
            (unsigned long long)first_weights);
    int match = bad == 0 && first_weights == ref_weights && first_losses == ref_losses;
    fprintf(out, "  bit-identical to the synchronous reference run: %s\n", match ? "yes" : "NO");
    if (bad) {
        int from = 0;
        for (; from < o->batches - 1; from++) {
            float got = (float)t->losses[from], want = (float)ref[from];
            if (memcmp(&got, &want, sizeof got) != 0) break;
        }
        fprintf(out, "  the losses diverge from the synchronous reference run from batch %d on (%ld of %d differ)\n",
                from, bad, o->batches);
    }
    if (!match && bad == 0)
        fprintf(out, "  the losses match but the final weights differ from the synchronous run\n");
    if (!runs_identical) fprintf(out, "  the timed runs did NOT all give the same bits\n");
    fprintf(out, "memory: device %.1f MiB, pinned host %.2f MiB\n", device_bytes_peak() / 1048576.0,
            pinned_bytes_peak() / 1048576.0);
    ok = once && match && runs_identical;

    double cpu_rel = -1;
    if (o->check_cpu) {
        double *cpu_losses = (double *)malloc(sizeof(double) * (size_t)o->batches);
        mlp_cpu_reference(s, (float)o->lr, (uint64_t)o->seed, &t->data, o->batches, cpu_losses);
        cpu_rel = 0;
        for (int i = 0; i < o->batches; i++) {
            double rel = fabs(ref[i] - cpu_losses[i]) / fabs(cpu_losses[i]);
            if (!(rel <= cpu_rel)) cpu_rel = rel;  // NaN-safe: a NaN makes cpu_rel NaN
        }
        int cpu_ok = cpu_rel <= CPU_CHECK_TOLERANCE;
        fprintf(out, "  CPU reference: largest relative difference %.2e (%s %.0e)\n", cpu_rel,
                cpu_ok ? "within" : "NOT within", CPU_CHECK_TOLERANCE);
        ok = ok && cpu_ok;
        free(cpu_losses);
    }

    if (o->json) {
        json_writer *js = &t->js;
        json_str(js, "lesson", t->prog);
        json_str(js, "device", t->dev.name);
        json_int(js, "batches", o->batches);
        json_int(js, "batch", o->batch);
        json_int(js, "prep_work", o->prep_work);
        json_int(js, "workers", o->workers);
        json_num(js, "step_ms", st_step.median);
        json_num(js, "step_min_ms", st_step.min);
        json_num(js, "step_max_ms", st_step.max);
        json_num(js, "prep_ms", prep_run);
        json_num(js, "prep_alone_ms", st.prep_ms);
        json_num(js, "h2d_ms", st.h2d_ms);
        json_num(js, "gpu_ms", st.gpu_ms);
        json_num(js, "bound_ms", bound);
        json_num(js, "serial_ms", serial);
        json_num(js, "efficiency", bound / st_step.median);
        json_int(js, "syncs", t->syncs);
        json_int(js, "slot_waits", t->slot_waits);
        json_num(js, "blocked_ms", t->blocked_ms);
        json_num(js, "blocked_ms_per_batch", t->blocked_ms / o->batches);
        json_num(js, "cpu_ms_per_step", cpu_step);
        json_int(js, "losses_taken", taken);
        json_bool(js, "losses_once", once);
        json_num(js, "loss_first", t->losses[0]);
        json_num(js, "loss_last", t->losses[o->batches - 1]);
        char hex[32];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)first_losses);
        json_str(js, "loss_checksum", hex);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)first_weights);
        json_str(js, "weights_checksum", hex);
        json_bool(js, "matches_reference", match);
        json_bool(js, "runs_identical", runs_identical);
        if (o->check_cpu) json_num(js, "cpu_check_max_rel", cpu_rel);
        json_int(js, "device_bytes", (long long)device_bytes_peak());
        json_int(js, "pinned_bytes", (long long)pinned_bytes_peak());
    }
    free(ref);
    free(step);
    free(cpu);
    free(prep);
    return ok;
}

int trainer_finish(trainer *t, int ok)
{
    if (trace_on()) trace_finish(human(t));
    fprintf(human(t), "%s\n", ok ? "all checks passed" : "CHECKS FAILED");
    if (t->opt.json) {
        json_bool(&t->js, "verified", ok);
        json_end(&t->js);
    }
    trainer_destroy(t);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
