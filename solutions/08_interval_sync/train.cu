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
//   - a loss is read only after its copy has landed (its ring slot's event), from a
//     ring of pinned slots drained at each synchronisation (loss_ring.cu: later lessons
//     link it as this lesson's library).
// At the end of an interval the host waits for the loss of the batch before the
// newest one: the newest step stays queued, so the GPU trains while the host
// prepares the next batch. That costs one more ring slot (N + 1). The loop runs a
// second variant that waits for the newest loss instead ("newest"), round-robin,
// to measure what the GPU loses when its queue runs empty once per interval.
// Step time becomes max(prep, GPU) instead of prep + GPU.

#include "common/base/args.h"      // defines: arg_spec, arg_int, args_parse
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/train/harness.h"  // defines: train_variant, harness_run, harness_finish
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_prepare, trainer_step, test_delay, event_pending,
                                   //          SLOT_WAIT, json_int
#include "loss_ring.h"             // the loss ring (exercise 08-interval)

static const char *PROG = "08_interval_sync";

#define SLOTS 2  // host and device batch slots: one being filled while the other is used

typedef struct {
    int sync_interval;           // --sync-interval: batches between two host synchronisations
    cudaEvent_t copied[SLOTS];   // slot s's copy has finished: host slot free, device slot ready
    cudaEvent_t stepped[SLOTS];  // the step that read device slot s has finished
    loss_ring losses;            // sync_interval + 1 slots; its lag 1 waits for batch i-1's loss, 0 for batch i's
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
        // BEGIN SOLUTION(08-host-slot): host slot s still feeds the copy of batch i-2: if that copy
        // has not left it yet (event_pending), wait for its event, counted as a slot wait
        // (SLOT_WAIT)
        if (i >= SLOTS && event_pending(sync->copied[s])) SLOT_WAIT(t, cudaEventSynchronize(sync->copied[s]));
        // END SOLUTION
        trainer_prepare(t, i, h_batch);  // runs while the GPU trains on batch i-1
        // BEGIN SOLUTION(08-device-slot): device slot s is still read by the step of batch i-2:
        // make the copy stream (not the host) wait for it
        if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, sync->stepped[s], 0));
        // END SOLUTION
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(sync->copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, sync->copied[s], 0));
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaEventRecord(sync->stepped[s], t->compute_stream));
        loss_ring_queue(&sync->losses, t, i, t->compute_stream);
        loss_ring_interval(&sync->losses, t, i, sync->sync_interval, &next_loss);  // loss_ring.cu: 08-interval
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
}

static void destroy_events(interval_sync *sync)
{
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(sync->copied[s]));
        CUDA_CHECK(cudaEventDestroy(sync->stepped[s]));
    }
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    interval_sync lagged = {.sync_interval = 10};
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("sync-interval", &lagged.sync_interval, 1, 1000000, "N",
                         "batches between two host synchronisations");
    args_parse(argc, argv, PROG, "Train an MLP, synchronising the host every N batches.", specs, n);

    // batch j's loss is taken at the first interval end at or after batch j + lag,
    // before the copy of batch j + N + 1, the next to use its slot: N + 1 slots do
    trainer t;
    trainer_init(&t, PROG, &o, SLOTS, SLOTS, lagged.sync_interval + 1);
    create_events(&lagged);
    loss_ring_create(&lagged.losses, &t, 0);  // as many slots as the trainer's ring, lag 1
    interval_sync newest = lagged;            // the same events, waiting for the newest loss
    newest.losses.lag = 0;
    train_variant variants[2] = {{"lagged", train_loop, &lagged}, {"newest", train_loop, &newest}};
    int ok = harness_run(&t, variants, 2);
    if (o.json) json_int(&t.js, "sync_interval", lagged.sync_interval);
    loss_ring_destroy(&lagged.losses);
    destroy_events(&lagged);
    return harness_finish(&t, ok);
}
