// 09_four_stream_pipeline: the seeds' four streams, with every dependency an event.
//
// build: make build/solutions/09_four_stream_pipeline
// run:   build/solutions/09_four_stream_pipeline [--batches 200] [--json]
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
// buy deeper prefetch: two copies in flight under the compute. Losses as in 08:
// lesson 08's ring, from its library (the Makefile's STANDS_ON).
//
// To see what a forgotten ordering does, leave one of the waits out and run with
// --delay-us 2000 --delay-on compute (or copy): the losses diverge from the
// synchronous run, every time. The tests do exactly that to each missing wait.
#include "common/base/args.h"            // defines: arg_spec, arg_int, args_parse
#include "common/base/check.h"           // defines: CUDA_CHECK
#include "common/train/harness.h"        // defines: harness_run_loop, harness_finish
#include "common/train/trainer.h"        // defines: trainer, train_options, train_options_default, train_option_specs,
                                         //          trainer_init, trainer_prepare, trainer_forward, trainer_backward,
                                         //          test_delay, event_pending, SLOT_WAIT, json_int, trace_name_stream
#include "08_interval_sync/loss_ring.h"  // defines: loss_ring, loss_ring_create, loss_ring_destroy, loss_ring_queue,
                                         //          loss_ring_interval

static const char *PROG = "09_four_stream_pipeline";

#define SLOTS 3  // device and host batch slots: batch i computes while i+1 and i+2 are copied in

typedef struct {
    int sync_interval;
    cudaStream_t copy[2], forward, backward;
    cudaEvent_t copied[SLOTS];  // batch in slot s has landed on the device (host slot s is free again)
    cudaEvent_t forwarded;      // the latest forward pass has finished
    cudaEvent_t done[SLOTS];    // the backward pass and update of the batch in slot s have finished
    loss_ring losses;           // lesson 08's loss ring, from its library
} four_streams;

// ----------------------------------------------------------------------------
// the training loop

static int train_loop(trainer *t, void *ctx)
{
    four_streams *p = (four_streams *)ctx;
    long next_loss = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        int s = (int)(i % SLOTS);
        float *h_batch = t->h_batch[s], *d_batch = t->d_batch[s];
        cudaStream_t copy = p->copy[i % 2];
        // BEGIN SOLUTION(09-host-slot): host slot s still feeds the copy of batch i-3 (lesson 08's
        // host slot, now one of three): if that copy has not left it yet (event_pending), wait for
        // its event, counted as a slot wait (SLOT_WAIT)
        if (i >= SLOTS && event_pending(p->copied[s])) SLOT_WAIT(t, cudaEventSynchronize(p->copied[s]));
        // END SOLUTION
        trainer_prepare(t, i, h_batch);

        // BEGIN SOLUTION(09-slot-free): device slot s still holds batch i-3: make this copy stream
        // wait until that batch's backward pass has finished reading it
        if (i >= SLOTS) CUDA_CHECK(cudaStreamWaitEvent(copy, p->done[s], 0));
        // END SOLUTION
        test_delay(t, DELAY_COPY, copy);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, copy));
        CUDA_CHECK(cudaEventRecord(p->copied[s], copy));

        // BEGIN SOLUTION(09-forward-waits): forward(i) needs its batch, and the weights that
        // update(i-1) writes
        CUDA_CHECK(cudaStreamWaitEvent(p->forward, p->copied[s], 0));
        if (i > 0) CUDA_CHECK(cudaStreamWaitEvent(p->forward, p->done[(i - 1) % SLOTS], 0));
        // END SOLUTION
        trainer_forward(t, d_batch, p->forward);
        CUDA_CHECK(cudaEventRecord(p->forwarded, p->forward));

        // BEGIN SOLUTION(09-backward-wait): backward(i) reads the activations forward(i) wrote:
        // order it after the forward pass
        CUDA_CHECK(cudaStreamWaitEvent(p->backward, p->forwarded, 0));
        // END SOLUTION
        trainer_backward(t, i, d_batch, p->backward);
        CUDA_CHECK(cudaEventRecord(p->done[s], p->backward));

        loss_ring_queue(&p->losses, t, i, p->backward);  // losses as in 08
        loss_ring_interval(&p->losses, t, i, p->sync_interval, &next_loss);
    }
    return 0;
}

// ----------------------------------------------------------------------------

static void create_streams_and_events(four_streams *p)
{
    const char *names[4] = {"copy A", "copy B", "forward", "backward"};
    cudaStream_t *streams[4] = {&p->copy[0], &p->copy[1], &p->forward, &p->backward};
    for (int k = 0; k < 4; k++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(streams[k], cudaStreamNonBlocking));
        trace_name_stream(*streams[k], names[k]);
    }
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&p->copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->done[s], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&p->forwarded, cudaEventDisableTiming));
}

static void destroy_streams_and_events(four_streams *p)
{
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(p->copied[s]));
        CUDA_CHECK(cudaEventDestroy(p->done[s]));
    }
    CUDA_CHECK(cudaEventDestroy(p->forwarded));
    cudaStream_t streams[4] = {p->copy[0], p->copy[1], p->forward, p->backward};
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaStreamDestroy(streams[k]));
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    four_streams p = {.sync_interval = 10};
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("sync-interval", &p.sync_interval, 1, 1000000, "N",
                         "batches between two host synchronisations");
    args_parse(argc, argv, PROG, "Train an MLP on four streams: two copy, forward, backward.", specs, n);

    trainer t;
    trainer_init(&t, PROG, &o, SLOTS, SLOTS, p.sync_interval + 1);  // the ring of 08: one slot more than N
    create_streams_and_events(&p);
    loss_ring_create(&p.losses, &t, 0);
    int ok = harness_run_loop(&t, train_loop, &p);
    if (o.json) json_int(&t.js, "sync_interval", p.sync_interval);
    loss_ring_destroy(&p.losses);
    destroy_streams_and_events(&p);
    return harness_finish(&t, ok);
}
