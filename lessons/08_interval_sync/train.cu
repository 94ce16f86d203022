// STUDENT VERSION of solutions/08_interval_sync/train.cu, made by `make lessons` (checksum 2603020140)
// Fill in its 3 TODOs.
// 08_interval_sync: the host synchronises once every N batches, not every batch.
//
// build: make build/solutions/08_interval_sync
// run:   build/solutions/08_interval_sync [--sync-interval 10] [--batches 200] [--json]
//
// Between two synchronisations the host runs ahead: it prepares batch i+1 while
// the GPU trains on batch i. That needs two of each buffer and an event for each
// way a buffer can still be busy:
//   - a pinned host slot is refilled only after its copy has left it (copied),
//   - a device slot is overwritten only after the step that read it (stepped),
//   - a loss is read only after its copy has landed (loss_ready), from a ring of
//     pinned slots drained at each synchronisation.
// At the end of an interval the host waits for the loss of the batch before the
// newest one: the newest step stays queued, so the GPU trains while the host
// prepares the next batch. That costs one more ring slot (N + 1). The loop runs a
// second variant that waits for the newest loss instead ("newest"), round-robin,
// to measure what the GPU loses when its queue runs empty once per interval.
// Step time becomes max(prep, GPU) instead of prep + GPU.
#include <stdlib.h>

#include "common/args.h"     // defines: arg_spec, arg_int, args_parse
#include "common/check.h"    // defines: CUDA_CHECK
#include "common/harness.h"  // defines: train_variant, harness_run, harness_finish
#include "common/memory.h"   // defines: host_calloc
#include "common/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                             //          trainer_init, trainer_prepare, trainer_step, trainer_loss_slot,
                             //          trainer_take_loss, test_delay, event_pending, HOST_SYNC, SLOT_WAIT, json_int

static const char *PROG = "08_interval_sync";

#define SLOTS 2  // host and device batch slots: one being filled while the other is used

typedef struct {
    int sync_interval;           // --sync-interval: batches between two host synchronisations
    int lag;                     // 1: wait for batch i-1's loss at the end of an interval; 0: batch i's
    cudaEvent_t copied[SLOTS];   // slot s's copy has finished: host slot free, device slot ready
    cudaEvent_t stepped[SLOTS];  // the step that read device slot s has finished
    int ring;                    // loss ring slots: sync_interval + 1
    cudaEvent_t *loss_ready;     // one per ring slot: that loss has landed in pinned memory
} interval_sync;

// ----------------------------------------------------------------------------
// the training loop

static int train_loop(trainer *t, void *ctx)
{
    interval_sync *sync = (interval_sync *)ctx;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        // TODO(08-host-slot): host slot s still feeds the copy of batch i-2: if that copy
        // has not left it yet (event_pending), wait for its event, counted as a slot wait
        // (SLOT_WAIT)
        trainer_prepare(t, i, h_batch);  // runs while the GPU trains on batch i-1
        // TODO(08-device-slot): device slot s is still read by the step of batch i-2:
        // make the copy stream (not the host) wait for it
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(sync->copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, sync->copied[s], 0));
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaEventRecord(sync->stepped[s], t->compute_stream));
        int slot = (int)(i % sync->ring);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[slot], trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost,
                                   t->compute_stream));
        CUDA_CHECK(cudaEventRecord(sync->loss_ready[slot], t->compute_stream));
        // TODO(08-interval): at the end of every interval, and after the last batch, wait
        // once (HOST_SYNC) for the loss of batch i - sync->lag (batch i after the last), unless no
        // loss up to it is new (an interval of 1 at batch 0), then take every loss not yet taken up
        // to it, each only once its own event says it landed
    }
    return 0;
}

// ----------------------------------------------------------------------------

static void create_events(interval_sync *sync)
{
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&sync->copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&sync->stepped[s], cudaEventDisableTiming));
    }
    sync->loss_ready = (cudaEvent_t *)host_calloc((size_t)sync->ring, sizeof(cudaEvent_t), "the loss ring's events");
    for (int k = 0; k < sync->ring; k++)
        CUDA_CHECK(cudaEventCreateWithFlags(&sync->loss_ready[k], cudaEventDisableTiming));
}

static void destroy_events(interval_sync *sync)
{
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(sync->copied[s]));
        CUDA_CHECK(cudaEventDestroy(sync->stepped[s]));
    }
    for (int k = 0; k < sync->ring; k++) CUDA_CHECK(cudaEventDestroy(sync->loss_ready[k]));
    free(sync->loss_ready);
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    interval_sync lagged = {.sync_interval = 10, .lag = 1};
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("sync-interval", &lagged.sync_interval, 1, 1000000, "N",
                         "batches between two host synchronisations");
    args_parse(argc, argv, PROG, "Train an MLP, synchronising the host every N batches.", specs, n);

    // batch j's loss is taken at the first interval end at or after batch j + lag,
    // before the copy of batch j + N + 1, the next to use its slot: N + 1 slots do
    lagged.ring = lagged.sync_interval + 1;
    trainer t;
    trainer_init(&t, PROG, &o, SLOTS, SLOTS, lagged.ring);
    create_events(&lagged);
    interval_sync newest = lagged;  // the same events, waiting for the newest loss
    newest.lag = 0;
    train_variant variants[2] = {{"lagged", train_loop, &lagged}, {"newest", train_loop, &newest}};
    int ok = harness_run(&t, variants, 2);
    if (o.json) json_int(&t.js, "sync_interval", lagged.sync_interval);
    destroy_events(&lagged);
    return harness_finish(&t, ok);
}
