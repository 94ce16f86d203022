// train.h: what the training lessons (06-10) share: options, the model and the
// data, batch slots, the loss ring, counted host synchronisations, and the run
// that times, checks and reports a lesson's training loop.
//
// A lesson supplies one function, its loop over the batches; everything around
// it (warm-up, repetitions, the synchronous reference run it must match bit for
// bit, the statistics) is here, so that the diff between two lessons is the loop.
#ifndef COMMON_TRAIN_H
#define COMMON_TRAIN_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "args.h"
#include "data.h"
#include "device.h"
#include "json.h"
#include "model.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int batches, batch, in_dim, hidden, hidden_layers, out_dim, prep_work, seed;
    double lr;
    int reps, warmup;
    int check_cpu;           // compare the loss curve with the CPU reference (small sizes only)
    int json;
    const char *trace_path;  // --trace FILE.json
    int timeline;            // --timeline
    int workers;             // host threads preparing batches (1 but in lesson 10)
} train_options;

// Fills the defaults: the balanced configuration (README, notes/06).
void train_options_default(train_options *o);

// Writes the options every training lesson takes into specs[]; returns how many.
// A lesson appends its own after them.
int train_option_specs(train_options *o, arg_spec *specs);

typedef struct trainer trainer;
typedef void (*train_loop_fn)(trainer *t);

struct trainer {
    const char *prog;
    train_options opt;
    device_info dev;
    dataset data;
    mlp_model model;
    size_t batch_bytes;              // one prepared batch: features then targets
    cudaStream_t copy_stream, compute_stream;

    int host_slots, device_slots;    // pinned host batches, device batches
    float **h_batch, **d_batch;
    int loss_slots;                  // the loss ring: batch i's loss goes to slot i % loss_slots
    float *d_loss, *h_loss;          // device ring, pinned host ring

    // what one run of the loop did
    double *losses;                  // losses[i] once extracted
    int *extracted;                  // how often batch i's loss was taken (must end at 1)
    long syncs;                      // host synchronisations the loop chose to make
    long slot_waits;                 // times the host found a buffer still busy and waited
    double blocked_ms;               // host time spent inside those waits
    json_writer js;
};

// Checks the sizes (exit EXIT_USAGE when they cannot work), opens the GPU (exit
// EXIT_NO_GPU when there is none), builds model and data, and allocates the slots.
void trainer_init(trainer *t, const char *prog, const train_options *o, int host_slots,
                  int device_slots, int loss_slots);
void trainer_destroy(trainer *t);

// The batch's features and targets inside a slot.
static inline float *batch_features(float *slot) { return slot; }
float *batch_targets(const trainer *t, float *slot);

// Host work: prepares batch i into a pinned slot (a "prep" range on the timeline).
void trainer_prepare(trainer *t, long i, float *h_slot);

// One training step on one stream: forward, loss into d_loss[i % loss_slots], backward, update.
void trainer_step(trainer *t, long i, float *d_slot, cudaStream_t stream);
float *trainer_loss_slot(trainer *t, long i);  // &d_loss[i % loss_slots]

// Host synchronisations, counted and timed (a "sync" range on the timeline).
void trainer_sync_stream(trainer *t, cudaStream_t stream);
void trainer_sync_event(trainer *t, cudaEvent_t event);
// Waits for a buffer's event only if it has not completed yet (a "slot wait").
void trainer_wait_slot(trainer *t, cudaEvent_t event);
// 1 when the event has completed, 0 when its work is still queued or running.
int event_done(cudaEvent_t event);

// Takes batch i's loss from the pinned ring (the caller knows its copy has landed).
void trainer_take_loss(trainer *t, long i);

// The loss ring as lesson 08 builds it, for the lessons after it: an event per ring
// slot, recorded after that slot's copy, and the first batch not yet taken.
typedef struct {
    cudaEvent_t *ready;
    long next;
} loss_ring;
void loss_ring_create(loss_ring *r, const trainer *t);
void loss_ring_destroy(loss_ring *r, const trainer *t);
// Queues the copy of batch i's loss into its pinned slot on `stream`, then the slot's event.
void loss_ring_queue(loss_ring *r, trainer *t, long i, cudaStream_t stream);
// The interval's one host synchronisation: waits for batch i's loss event (the newest;
// on its stream it comes after batch i's step), then takes every loss not yet taken.
void loss_ring_sync(loss_ring *r, trainer *t, long i);

// Runs the whole lesson: profile of the stages, the synchronous reference run,
// warm-up and timed runs of `loop`, the checks, the report. The bound divides
// the host's preparation time by opt.workers (the loader threads of lesson 10).
// Returns 1 when every check passed. Lesson-specific JSON keys may be added to
// t->js between trainer_run and trainer_finish.
int trainer_run(trainer *t, train_loop_fn loop);
// Ends the JSON object and the report; returns the exit code.
int trainer_finish(trainer *t, int ok);

// The timings of one run of the loop, for lessons that compare variants.
typedef struct {
    double step_ms, cpu_ms_per_step, blocked_ms_per_batch;
    long syncs, slot_waits;
    int ok;
} run_result;
run_result trainer_time_loop(trainer *t, train_loop_fn loop, int reps);

#ifdef __cplusplus
}
#endif
#endif
