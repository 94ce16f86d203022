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
//     SYNC_INTERVAL pinned slots that is drained at each synchronisation.
// Step time becomes max(prep, GPU) instead of prep + GPU.
#include <stdio.h>
#include <stdlib.h>

#include "common/args.h"   // defines: arg_spec, args_parse
#include "common/check.h"  // defines: CUDA_CHECK
#include "common/train.h"  // defines: trainer, trainer_init, trainer_run, trainer_prepare, trainer_step,
                           //          trainer_sync_event, trainer_wait_slot, trainer_take_loss

static const char *PROG = "08_interval_sync";

#define SLOTS 2  // host and device batch slots: one being filled while the other is used

static struct {
    int sync_interval;           // SYNC_INTERVAL: batches between two host synchronisations
    cudaEvent_t copied[SLOTS];   // slot s's copy has finished: host slot free, device slot ready
    cudaEvent_t stepped[SLOTS];  // the step that read device slot s has finished
    cudaEvent_t *loss_ready;     // one per loss ring slot: that loss has landed in pinned memory
    long next_loss;              // the first batch whose loss has not been taken yet
} ev;

// ----------------------------------------------------------------------------
// the training loop

static void train_loop(trainer *t)
{
    ev.next_loss = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        // BEGIN SOLUTION(08-host-slot): host slot s still feeds the copy of batch i-2: wait (only if needed) until that copy has left it
        if (i >= SLOTS) trainer_wait_slot(t, ev.copied[s]);
        // END SOLUTION
        trainer_prepare(t, i, h_batch);  // runs while the GPU trains on batch i-1
        // BEGIN SOLUTION(08-device-slot): device slot s is still read by the step of batch i-2: make the copy stream (not the host) wait for it
        if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, ev.stepped[s], 0));
        // END SOLUTION
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        CUDA_CHECK(cudaEventRecord(ev.copied[s], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, ev.copied[s], 0));
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaEventRecord(ev.stepped[s], t->compute_stream));
        int slot = (int)(i % t->loss_slots);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[slot], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, t->compute_stream));
        // BEGIN SOLUTION(08-interval): mark each loss copy with its ring slot's event; every sync_interval batches (and after the last) make one counted wait that covers everything so far, then take every loss not yet taken, each only once its own event says it landed
        CUDA_CHECK(cudaEventRecord(ev.loss_ready[slot], t->compute_stream));
        if ((i + 1) % ev.sync_interval == 0 || i == t->opt.batches - 1) {
            // the newest loss event comes after batch i's step on this stream: one wait covers both
            trainer_sync_event(t, ev.loss_ready[slot]);
            for (; ev.next_loss <= i; ev.next_loss++) {
                trainer_wait_slot(t, ev.loss_ready[ev.next_loss % t->loss_slots]);  // done already: no wait
                trainer_take_loss(t, ev.next_loss);
            }
        }
        // END SOLUTION
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    ev.sync_interval = 10;
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = (arg_spec){"sync-interval", ARG_INT, &ev.sync_interval, 1, 1000000, "N",
                            "batches between two host synchronisations"};
    args_parse(argc, argv, PROG, "Train an MLP, synchronising the host every N batches.", specs, n);

    trainer t;
    // the loss ring holds one interval: batch i+N's loss lands in batch i's slot only
    // after the sync that ended batch i's interval has taken it
    trainer_init(&t, PROG, &o, SLOTS, SLOTS, ev.sync_interval);
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&ev.copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&ev.stepped[s], cudaEventDisableTiming));
    }
    ev.loss_ready = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * ev.sync_interval);
    for (int k = 0; k < ev.sync_interval; k++)
        CUDA_CHECK(cudaEventCreateWithFlags(&ev.loss_ready[k], cudaEventDisableTiming));

    int ok = trainer_run(&t, train_loop);
    if (o.json) json_int(&t.js, "sync_interval", ev.sync_interval);

    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(ev.copied[s]));
        CUDA_CHECK(cudaEventDestroy(ev.stepped[s]));
    }
    for (int k = 0; k < ev.sync_interval; k++) CUDA_CHECK(cudaEventDestroy(ev.loss_ready[k]));
    free(ev.loss_ready);
    return trainer_finish(&t, ok);
}
