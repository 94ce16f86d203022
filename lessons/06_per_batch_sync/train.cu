// STUDENT VERSION of solutions/06_per_batch_sync/train.cu, made by `make lessons` (checksum 2756575384)
// Fill in its 2 TODOs.
// 06_per_batch_sync: a training loop that synchronises after every batch.
//
// build: make build/lessons/06_per_batch_sync
// run:   build/lessons/06_per_batch_sync [--batches 200] [--prep-work 5] [--json]
//
// The seeds' starting point: a copy stream and a compute stream, one pinned host
// batch, and the host waiting twice per batch: for the copy (so that the step can
// start) and for the step (so that the next batch can be prepared into the same
// buffers). Each loss is copied into a pinned ring every batch, and taken from
// it every 10 batches, as the seeds read it back.
// While the host prepares a batch the GPU has nothing to do, and while the GPU
// trains the host waits: step time = prep + copy + GPU. Lessons 07-10 remove that.
#include "common/base/args.h"      // defines: arg_spec, args_parse
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/train/harness.h"  // defines: harness_run_loop, harness_finish
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_prepare, trainer_step, trainer_loss_slot,
                                   //          trainer_take_loss, test_delay, HOST_SYNC

static const char *PROG = "06_per_batch_sync";

#define LOSS_READ_INTERVAL 10  // the seeds read the loss back every 10 batches

// ----------------------------------------------------------------------------
// the training loop

static int train_loop(trainer *t, void *ctx)
{
    (void)ctx;  // 06 keeps no state of its own: one host slot, one device slot
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    for (long i = 0; i < t->opt.batches; i++) {
        trainer_prepare(t, i, h_batch);  // the host's work: generate, augment, normalise
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        // TODO(06-copy-sync): the step must not read d_batch before the copy has landed;
        // in this lesson the host waits for everything on the copy stream (write the CUDA call
        // inside HOST_SYNC(t, ...), which counts and times it)
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, t->compute_stream));
        // TODO(06-step-sync): the next batch reuses h_batch and d_batch, and the loss
        // copy must land before it is read: what must the host wait for, once per batch? (inside
        // HOST_SYNC again)
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
    args_parse(argc, argv, PROG, "Train an MLP, synchronising the host after every batch.", specs, n);

    trainer t;
    trainer_init(&t, PROG, &o, 1, 1, LOSS_READ_INTERVAL);
    int ok = harness_run_loop(&t, train_loop, NULL);
    return harness_finish(&t, ok);
}
