// STUDENT VERSION of solutions/09_four_stream_pipeline/train.cu, made by `make lessons` (checksum 2713911363): fill in every TODO.
// 09_four_stream_pipeline: the seeds' four streams, with every dependency an event.
//
// build: make build/solutions/09_four_stream_pipeline
// run:   build/solutions/09_four_stream_pipeline [--batches 200] [--unsafe] [--json]
//
// Streams: two copy streams taking turns (batch i on copy[i % 2], so that the copy
// of the batch after next can start while the next one is still landing), a
// forward stream and a backward stream (which also applies the update). Three
// device slots and three pinned host slots. Every ordering is an event:
//   forward(i)  after copy(i)                      copied[slot]
//   backward(i) after forward(i)                   forwarded
//   forward(i+1) after update(i)                   done[slot of i]   (the seed forgot)
//   copy into a device slot after the backward that read it  done[slot] (forgotten too)
//   a pinned host slot refilled after its copy     copied[slot], waited by the host
// Synchronous SGD allows no more: forward(i+1) needs the weights update(i) writes,
// so forward and backward of consecutive batches never overlap. The extra streams
// buy deeper prefetch: two copies in flight under the compute.
//
// --unsafe drops the two forgotten orderings and delays each backward pass (by
// --backward-delay-us, 2000 by default in that mode) so that the race shows: the
// next forward reads weights before the update, and the next copies overwrite the
// batch the backward pass is still reading. The losses then diverge from the safe run.
#include <stdio.h>
#include <stdlib.h>

#include "common/args.h"     // defines: arg_spec, args_parse
#include "common/check.h"    // defines: CUDA_CHECK
#include "common/kernels.h"  // defines: launch_spin
#include "common/model.h"    // defines: mlp_forward, mlp_backward
#include "common/train.h"    // defines: trainer, trainer_init, trainer_run, trainer_prepare, trainer_wait_slot,
                             //          loss_ring, loss_ring_queue, loss_ring_sync, batch_features, batch_targets

static const char *PROG = "09_four_stream_pipeline";

#define SLOTS 3  // device and host batch slots: batch i computes while i+1 and i+2 are copied in

static struct {
    int sync_interval, unsafe, backward_delay_us;
    cudaStream_t copy[2], forward, backward;
    cudaEvent_t copied[SLOTS];  // batch in slot s has landed on the device (host slot s is free again)
    cudaEvent_t forwarded;      // the latest forward pass has finished
    cudaEvent_t done[SLOTS];    // the backward pass and update of the batch in slot s have finished
    loss_ring losses;           // lesson 08's loss ring, from common/train.c
} ev;

// ----------------------------------------------------------------------------
// the training loop

static void train_loop(trainer *t)
{
    ev.losses.next = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        cudaStream_t copy = ev.copy[i % 2];
        if (i >= SLOTS) trainer_wait_slot(t, ev.copied[s]);  // host slot s fed the copy of batch i-3
        trainer_prepare(t, i, h_batch);

        // TODO(09-slot-free): device slot s still holds batch i-3: unless --unsafe, make this copy stream wait until that batch's backward pass has finished reading it
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, copy));
        CUDA_CHECK(cudaEventRecord(ev.copied[s], copy));

        // TODO(09-forward-waits): forward(i) needs its batch, and (unless --unsafe) the weights that update(i-1) writes
        mlp_forward(&t->model, batch_features(d_batch), ev.forward);
        CUDA_CHECK(cudaEventRecord(ev.forwarded, ev.forward));

        // TODO(09-backward-wait): backward(i) reads the activations forward(i) wrote: order it after the forward pass
        if (ev.backward_delay_us > 0) launch_spin(1, 32, 1000LL * ev.backward_delay_us, ev.backward);
        mlp_backward(&t->model, batch_features(d_batch), batch_targets(t, d_batch), trainer_loss_slot(t, i),
                     ev.backward);
        CUDA_CHECK(cudaEventRecord(ev.done[s], ev.backward));

        loss_ring_queue(&ev.losses, t, i, ev.backward);  // losses as in 08: a ring drained at each interval
        if ((i + 1) % ev.sync_interval == 0 || i == t->opt.batches - 1) loss_ring_sync(&ev.losses, t, i);
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    ev.sync_interval = 10;
    ev.backward_delay_us = -1;
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = (arg_spec){"sync-interval", ARG_INT, &ev.sync_interval, 1, 1000000, "N",
                            "batches between two host synchronisations"};
    specs[n++] = (arg_spec){"unsafe", ARG_FLAG, &ev.unsafe, 0, 0, NULL,
                            "drop the orderings the seed forgot (a race; the check should catch it)"};
    specs[n++] = (arg_spec){"backward-delay-us", ARG_INT, &ev.backward_delay_us, 0, 100000, "US",
                            "spin this long before each backward pass (default: 2000 with --unsafe, else 0)"};
    args_parse(argc, argv, PROG, "Train an MLP on four streams: two copy, forward, backward.", specs, n);
    if (ev.backward_delay_us < 0) ev.backward_delay_us = ev.unsafe ? 2000 : 0;

    trainer t;
    trainer_init(&t, PROG, &o, SLOTS, SLOTS, ev.sync_interval);
    const char *names[4] = {"copy A", "copy B", "forward", "backward"};
    cudaStream_t *streams[4] = {&ev.copy[0], &ev.copy[1], &ev.forward, &ev.backward};
    for (int k = 0; k < 4; k++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(streams[k], cudaStreamNonBlocking));
        trace_name_stream(*streams[k], names[k]);
    }
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&ev.copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&ev.done[s], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&ev.forwarded, cudaEventDisableTiming));
    loss_ring_create(&ev.losses, &t);

    int ok = trainer_run(&t, train_loop);
    FILE *out = o.json ? stderr : stdout;
    if (ev.unsafe)
        fprintf(out, "--unsafe with a %d us delay before each backward pass: %s\n", ev.backward_delay_us,
                ok ? "the race did not show this time (it can look fine for a long time)"
                   : "the race showed: the losses diverge from the safe run");
    if (o.json) {
        json_int(&t.js, "sync_interval", ev.sync_interval);
        json_bool(&t.js, "unsafe", ev.unsafe);
        json_int(&t.js, "backward_delay_us", ev.backward_delay_us);
    }

    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(ev.copied[s]));
        CUDA_CHECK(cudaEventDestroy(ev.done[s]));
    }
    CUDA_CHECK(cudaEventDestroy(ev.forwarded));
    loss_ring_destroy(&ev.losses, &t);
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaStreamDestroy(*streams[k]));
    return trainer_finish(&t, ok);
}
