// trainer.c: the trainer the lessons work with (trainer.h).
#include "common/train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu/kernels.h"  // launch_spin
#include "common/gpu/memory.h"   // device_alloc, pinned_alloc, host_calloc, host_memory_bytes
#include "common/base/timing.h"  // host_now_ms

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
    o->delay_on = DELAY_COMPUTE;
}

int train_option_specs(train_options *o, arg_spec *s)
{
    int n = 0;
    s[n++] = arg_int("batches", &o->batches, 1, 1000000, "N", "batches per run");
    s[n++] = arg_int("batch", &o->batch, 1, 65536, "N", "samples per batch");
    s[n++] = arg_int("in", &o->in_dim, 1, 65536, "N", "input features");
    s[n++] = arg_int("hidden", &o->hidden, 1, 65536, "N", "units per hidden layer");
    s[n++] = arg_int("layers", &o->hidden_layers, 1, MLP_MAX_LAYERS - 1, "N", "hidden layers");
    s[n++] = arg_int("out", &o->out_dim, 1, 65536, "N", "outputs");
    s[n++] = arg_int("prep-work", &o->prep_work, 0, 100000, "N",
                     "smoothing rounds per sample: the host's work per batch");
    s[n++] = arg_double("lr", &o->lr, 1e-6, 10, "X", "SGD learning rate");
    s[n++] = arg_int("seed", &o->seed, 0, 2147483647, "N", "seed of the data and the weights");
    s[n++] = arg_int("reps", &o->reps, 1, 100, "N", "timed runs of each variant, round-robin (the median is reported)");
    s[n++] = arg_int("warmup", &o->warmup, 0, 10, "N", "untimed (but checked) runs first");
    s[n++] = arg_flag("check-cpu", &o->check_cpu, "also compare the losses with a CPU reference (slow: small sizes)");
    s[n++] = arg_int("delay-us", &o->delay_us, 0, 100000, "US",
                     "test hook: spin this long at each --delay-on point, so that a missing wait shows");
    s[n++] = arg_choice("delay-on", &o->delay_on, "copy|compute", "where --delay-us holds work back");
    s[n++] = arg_string("trace", &o->trace_path, "FILE", "write a Chrome/Perfetto trace");
    s[n++] = arg_flag("timeline", &o->timeline, "print a per-stream timeline");
    s[n++] = arg_flag("trace-overhead", &o->trace_overhead,
                      "with --trace: also time every run with tracing paused, round-robin, and report the cost");
    s[n++] = arg_flag("json", &o->json, "print the results as one JSON object on stdout");
    return n;
}

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
        {"--out x --in (the data's teacher)", o->out_dim, o->in_dim},
    };
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++)
        if (m[k].rows * m[k].cols > 2147483647LL)
            usage_error(prog, "%s has %lld elements; the course indexes with int, so at most 2147483647", m[k].what,
                        m[k].rows * m[k].cols);
}

// What the host must hold: the teacher, the initial weights once, the pinned
// slots, and (with --check-cpu) the CPU reference's doubles. Checked against the
// machine's memory before anything is allocated.
static void check_host_memory(const char *prog, const train_options *o, const mlp_shape *s, size_t batch_bytes,
                              int host_slots)
{
    double need = 4.0 * o->out_dim * o->in_dim + 4.0 * s->nparams + (double)batch_bytes * (host_slots + 1);
    if (o->check_cpu) need += 20.0 * s->nparams + 8.0 * 4 * s->max_dim * (double)o->batch;
    size_t have = host_memory_bytes();
    if (have && need > 0.8 * have)
        usage_error(prog,
                    "these sizes need %.2f GiB of host memory; the limit is 80%% of this machine's %.2f GiB, "
                    "%.2f GiB",
                    need / 1073741824.0, have / 1073741824.0, 0.8 * have / 1073741824.0);
}

void trainer_init(trainer *t, const char *prog, const train_options *o, int host_slots, int device_slots,
                  int loss_slots)
{
    memset(t, 0, sizeof *t);
    t->prog = prog;
    t->opt = *o;
    t->main_thread = pthread_self();
    pthread_mutex_init(&t->lock, NULL);
    check_shape(prog, o);
    mlp_shape shape;
    mlp_shape_init(&shape, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    t->batch_bytes = sizeof(float) * (size_t)o->batch * (size_t)(o->in_dim + o->out_dim);
    check_host_memory(prog, o, &shape, t->batch_bytes, host_slots);
    trace_start(prog, o->trace_path, o->timeline);
    trace_add_window("run", o->batches > 12 ? 10 : 0, o->batches > 12 ? 3 : (o->batches < 3 ? o->batches : 3));
    gpu_open(prog, &t->dev);

    size_t need = mlp_model_device_bytes(&shape) + (size_t)device_slots * t->batch_bytes +
                  sizeof(float) * (size_t)loss_slots;
    if (need + (256u << 20) > t->dev.mem_free)
        usage_error(prog,
                    "this model and batch need %.2f GiB of device memory; the limit is the GPU's %.2f GiB free "
                    "less 0.25 GiB for CUDA's own use, %.2f GiB",
                    need / 1073741824.0, t->dev.mem_free / 1073741824.0,
                    t->dev.mem_free > (256u << 20) ? (t->dev.mem_free - (256u << 20)) / 1073741824.0 : 0.0);
    dataset_init(&t->data, o->batch, o->in_dim, o->out_dim, o->prep_work, (uint64_t)o->seed);
    mlp_model_create(&t->model, &shape, (float)o->lr, (uint64_t)o->seed);

    CUDA_CHECK(cudaStreamCreateWithFlags(&t->copy_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&t->compute_stream, cudaStreamNonBlocking));
    trace_name_stream(t->copy_stream, "copy");
    trace_name_stream(t->compute_stream, "compute");
    trace_name_thread("main", TL_TRACK_MAIN);

    t->host_slots = host_slots;
    t->device_slots = device_slots;
    t->h_batch = (float **)host_calloc((size_t)host_slots, sizeof(float *), "the host slots");
    t->d_batch = (float **)host_calloc((size_t)device_slots, sizeof(float *), "the device slots");
    for (int s = 0; s < host_slots; s++) t->h_batch[s] = (float *)pinned_alloc(t->batch_bytes);
    for (int s = 0; s < device_slots; s++) t->d_batch[s] = (float *)device_alloc(t->batch_bytes);
    t->loss_slots = loss_slots;
    t->d_loss = (float *)device_alloc(sizeof(float) * (size_t)loss_slots);
    t->h_loss = (float *)pinned_alloc(sizeof(float) * (size_t)loss_slots);
    t->run.losses = (double *)host_calloc((size_t)o->batches, sizeof(double), "the losses");
    t->run.taken = (int *)host_calloc((size_t)o->batches, sizeof(int), "the losses");
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
    free(t->run.losses);
    free(t->run.taken);
    mlp_model_destroy(&t->model);
    dataset_free(&t->data);
    CUDA_CHECK(cudaStreamDestroy(t->copy_stream));
    CUDA_CHECK(cudaStreamDestroy(t->compute_stream));
    pthread_mutex_destroy(&t->lock);
}

float *batch_targets(const trainer *t, float *slot) { return slot + (size_t)t->opt.batch * t->opt.in_dim; }

void trainer_prepare(trainer *t, long i, float *h_slot)
{
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare(&t->data, i, h_slot);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    pthread_mutex_lock(&t->lock);
    t->run.prep_ms += ms;
    if (pthread_equal(pthread_self(), t->main_thread)) t->run.main_prep_ms += ms;
    pthread_mutex_unlock(&t->lock);
}

float *trainer_loss_slot(trainer *t, long i) { return t->d_loss + i % t->loss_slots; }

void test_delay(trainer *t, delay_target where, cudaStream_t stream)
{
    if (t->delays_on && t->opt.delay_us > 0 && t->opt.delay_on == (int)where)
        launch_spin(1, 32, 1000LL * t->opt.delay_us, stream);
}

void trainer_forward(trainer *t, float *d_slot, cudaStream_t stream)
{
    test_delay(t, DELAY_COMPUTE, stream);
    mlp_forward(&t->model, batch_features(d_slot), stream);
}

void trainer_backward(trainer *t, long i, float *d_slot, cudaStream_t stream)
{
    test_delay(t, DELAY_COMPUTE, stream);
    mlp_backward(&t->model, batch_features(d_slot), batch_targets(t, d_slot), trainer_loss_slot(t, i), stream);
}

void trainer_step(trainer *t, long i, float *d_slot, cudaStream_t stream)
{
    trainer_forward(t, d_slot, stream);
    trainer_backward(t, i, d_slot, stream);
}

host_wait host_wait_begin(tl_range kind, const char *name)
{
    host_wait w;
    w.range = trace_begin(kind, name, -1);
    w.t0 = host_now_ms();
    return w;
}

void host_wait_end(trainer *t, host_wait *w)
{
    t->run.blocked_ms += host_now_ms() - w->t0;
    if (w->range.kind == TL_RANGE_SYNC)
        t->run.syncs++;
    else
        t->run.slot_waits++;
    trace_end(&w->range);
}

int event_pending(cudaEvent_t event)
{
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaErrorNotReady) return 1;
    CUDA_CHECK(err);
    return 0;
}

void trainer_take_loss(trainer *t, long i)
{
    if (i < 0 || i >= t->opt.batches) return;
    t->run.losses[i] = t->h_loss[i % t->loss_slots];
    t->run.taken[i]++;
}
