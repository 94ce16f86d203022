// trainer.h: what the training lessons (06 and later) work with: the model and its data,
// batch slots, the step, the host waits they count, and the pinned slots of the losses (lesson 08's
// ring of them, loss_ring.cu, is lesson 08's library).
//
// A lesson builds a trainer in main, keeps its own state (events, streams, slots)
// in a struct of its own, and writes its loop over the batches as a function
// `int loop(trainer *t, void *ctx)`. The harness (harness.h) runs that loop, times
// it and checks it; nothing in this file decides when to wait: the lessons do.
#ifndef COMMON_TRAINER_H
#define COMMON_TRAINER_H

#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/base/args.h"    // arg_spec
#include "common/base/check.h"   // CUDA_CHECK
#include "common/model/data.h"   // dataset
#include "common/gpu/device.h"   // device_info
#include "common/base/json.h"    // json_writer
#include "common/model/model.h"  // mlp_model
#include "common/trace/trace.h"  // trace_range

#ifdef __cplusplus
extern "C" {
#endif

// Where --delay-us holds work back (test_delay): before each batch's copy, or
// before each step's kernels.
typedef enum { DELAY_COPY, DELAY_COMPUTE } delay_target;

typedef struct {
    int batches, batch, in_dim, hidden, hidden_layers, out_dim, prep_work, seed;
    double lr;
    int reps, warmup;
    int check_cpu;  // compare the lesson's losses with a CPU reference (small sizes only)
    int json;
    const char *trace_path;  // --trace FILE.json
    int timeline;            // --timeline
    int trace_overhead;      // --trace-overhead: each variant also runs with tracing paused, round-robin
    int delay_us;            // --delay-us: spin this long at each test_delay point of --delay-on
    int delay_on;            // a delay_target
    int workers;             // loader threads that prepare batches (lesson 10); 0: the main thread does
} train_options;

// Fills the defaults: the balanced configuration (README, notes/06).
void train_options_default(train_options *o);

// Writes the options every training lesson takes into specs[]; returns how many.
// A lesson appends its own after them.
int train_option_specs(train_options *o, arg_spec *specs);

// What one run of a loop did. The harness clears it before every run.
typedef struct {
    double *losses;       // losses[i] once taken
    int *taken;           // how often batch i's loss was taken (must end at 1)
    long syncs;           // HOST_SYNC waits
    long slot_waits;      // SLOT_WAIT waits
    double blocked_ms;    // main-thread time inside those waits
    double prep_ms;       // preparation time, every thread together
    double main_prep_ms;  // of which on the main thread
} run_counters;

typedef struct {
    const char *prog;
    train_options opt;
    device_info dev;
    dataset data;
    mlp_model model;
    size_t batch_bytes;  // one prepared batch: features then targets
    cudaStream_t copy_stream, compute_stream;

    int host_slots, device_slots;  // pinned host batches, device batches
    float **h_batch, **d_batch;
    int loss_slots;          // the loss ring: batch i's loss goes to slot i % loss_slots
    float *d_loss, *h_loss;  // device ring, pinned host ring

    run_counters run;      // what the current run did
    pthread_mutex_t lock;  // guards run.prep_ms (loader threads prepare too)
    pthread_t main_thread;
    int delays_on;    // test_delay acts only in the lesson's own runs
    char error[256];  // why a loop returned -1
    json_writer js;
    FILE *human;  // where the human-readable report goes; NULL: stdout (stderr with --json) (harness.h)
} trainer;

// Checks the sizes (exit code 2 when they cannot work: too large for an int index,
// for the GPU's memory or for the host's), opens the GPU (exit code 3 when there
// is none), builds model and data, and allocates the slots.
void trainer_init(trainer *t, const char *prog, const train_options *o, int host_slots, int device_slots,
                  int loss_slots);
void trainer_destroy(trainer *t);

// The batch's features and targets inside a slot.
static inline float *batch_features(float *slot) { return slot; }
float *batch_targets(const trainer *t, float *slot);

// Host work: prepares batch i into a pinned slot (a prep range on the timeline). Any thread.
void trainer_prepare(trainer *t, long i, float *h_slot);

// One training step on `stream`: forward, loss into trainer_loss_slot(t, i),
// backward, SGD update. trainer_forward + trainer_backward, for lessons that put
// the two on different streams.
void trainer_step(trainer *t, long i, float *d_slot, cudaStream_t stream);
void trainer_forward(trainer *t, float *d_slot, cudaStream_t stream);
void trainer_backward(trainer *t, long i, float *d_slot, cudaStream_t stream);
float *trainer_loss_slot(trainer *t, long i);  // &d_loss[i % loss_slots]

// A test hook: with --delay-us, and --delay-on naming `where`, queues a spin kernel
// here, so that what follows on this stream starts late. A missing wait then shows
// as wrong bits every time, not only when the host happens to outrun the GPU.
// trainer_forward and trainer_backward begin with a DELAY_COMPUTE point; lessons
// put the DELAY_COPY one before each batch's copy.
void test_delay(trainer *t, delay_target where, cudaStream_t stream);

// Counted host waits. The lesson writes the CUDA call it waits in; the macro times
// it, counts it, and marks it on the timeline:
//   HOST_SYNC(t, cudaStreamSynchronize(stream));     a synchronisation (run.syncs)
//   SLOT_WAIT(t, cudaEventSynchronize(slot_free));   a wait for a buffer (run.slot_waits)
// Both are HOST_WAIT, given what the wait counts as: the kind of its range (which
// counter host_wait_end adds to) and the range's name.
typedef struct {
    trace_range range;
    double t0;
} host_wait;
host_wait host_wait_begin(tl_range kind, const char *name);
void host_wait_end(trainer *t, host_wait *w);
#define HOST_WAIT(t, kind, name, call)                   \
    do {                                                 \
        host_wait hw_ = host_wait_begin((kind), (name)); \
        CUDA_CHECK(call);                                \
        host_wait_end((t), &hw_);                        \
    } while (0)
#define HOST_SYNC(t, call) HOST_WAIT(t, TL_RANGE_SYNC, "sync", call)
#define SLOT_WAIT(t, call) HOST_WAIT(t, TL_RANGE_SLOT_WAIT, "slot wait", call)

// cudaEventQuery as a yes/no: 1 while the event's work is still queued or running,
// 0 once it has completed. Any other answer is an error (exit, as CUDA_CHECK).
int event_pending(cudaEvent_t event);

// Takes batch i's loss from the pinned ring (the caller knows its copy has landed).
void trainer_take_loss(trainer *t, long i);

// How the host waits for an event: cudaEventSynchronize, or a wait of the lesson's own (12: one
// that polls, and gives up when another rank has failed). Lesson 08's loss ring takes one.
typedef cudaError_t (*event_wait_fn)(void *ctx, cudaEvent_t event);

#ifdef __cplusplus
}
#endif
#endif
