// STUDENT VERSION of solutions/07_event_sync/train.cu, made by `make lessons` (checksum 1342099649)
// Fill in its 2 TODOs.
// 07_event_sync: the same loop, ordered with events instead of stream synchronisation.
//
// build: make build/lessons/07_event_sync
// run:   build/lessons/07_event_sync [--batches 200] [--prep-work 5] [--json]
//
// Two changes from 06. The compute stream waits for the copy on the device
// (cudaStreamWaitEvent): the host no longer waits for the copy. And the host
// waits for an event recorded after the step (cudaEventSynchronize) where 06
// synchronised the compute stream. That second wait sits at the same point, so it
// costs what 06's cost: events say *what* to wait for, the gain comes in 08 from
// waiting less often. The loop runs in two variants, round-robin: the host spinning
// in its wait (the default) and sleeping in it (cudaEventBlockingSync), to show
// what each costs in CPU time and in step time. The rest of the loop and the start of
// main repeat 06's on purpose, line for line, so that `diff solutions/06_per_batch_sync
// solutions/07_event_sync` shows the two changes and little else.
#include "common/base/args.h"      // defines: arg_spec, args_parse
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/train/harness.h"  // defines: train_variant, harness_run, harness_finish
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_prepare, trainer_step, trainer_loss_slot,
                                   //          trainer_take_loss, test_delay, HOST_SYNC

static const char *PROG = "07_event_sync";

#define LOSS_READ_INTERVAL 10  // the seeds read the loss back every 10 batches

typedef struct {
    cudaEvent_t copied;   // the batch has landed in d_batch
    cudaEvent_t stepped;  // the step (and the loss copy) has finished
} event_sync;

// `wait_flags` is 0 (the host spins while it waits) or cudaEventBlockingSync (it sleeps).
static void create_events(event_sync *sync, unsigned wait_flags)
{
    // events used only for ordering and waiting need no timestamps
    CUDA_CHECK(cudaEventCreateWithFlags(&sync->copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&sync->stepped, cudaEventDisableTiming | wait_flags));
}

static void destroy_events(event_sync *sync)
{
    CUDA_CHECK(cudaEventDestroy(sync->copied));
    CUDA_CHECK(cudaEventDestroy(sync->stepped));
}

// ----------------------------------------------------------------------------
// the training loop

static int train_loop(trainer *t, void *ctx)
{
    event_sync *sync = (event_sync *)ctx;
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    for (long i = 0; i < t->opt.batches; i++) {
        trainer_prepare(t, i, h_batch);  // the host's work: generate, augment, normalise
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        // TODO(07-copy-event): order the step after the copy on the device, not on the
        // host: mark the copy's end with sync->copied, and find the call that makes another stream
        // wait for an event
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, t->compute_stream));
        // TODO(07-step-event): where 06 synchronised the compute stream, record
        // sync->stepped after the loss copy and wait for that event instead (inside HOST_SYNC, as in
        // 06)
        if ((i + 1) % LOSS_READ_INTERVAL == 0 || i == t->opt.batches - 1)
            for (long k = i - i % LOSS_READ_INTERVAL; k <= i; k++) trainer_take_loss(t, k);
    }
    return 0;
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    args_parse(argc, argv, PROG, "Train an MLP, ordering copy and step with CUDA events.", specs, n);

    trainer t;
    trainer_init(&t, PROG, &o, 1, 1, LOSS_READ_INTERVAL);
    // spin or sleep: the same loop, only the host's way of waiting changes
    event_sync spin, sleep;
    create_events(&spin, 0);
    create_events(&sleep, cudaEventBlockingSync);
    train_variant variants[2] = {{"spin", train_loop, &spin}, {"blocking", train_loop, &sleep}};
    int ok = harness_run(&t, variants, 2);
    destroy_events(&spin);
    destroy_events(&sleep);
    return harness_finish(&t, ok);
}
