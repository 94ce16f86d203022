// STUDENT VERSION of solutions/10_async_loader_pipeline/train.cu, made by `make lessons` (checksum 2914321833)
// No exercise in this file, read it as it stands; the TODOs are in loaders.cu.
// 10_async_loader_pipeline: loader threads prepare batches; the main thread only
// enqueues GPU work.
//
// build: make build/lessons/10_async_loader_pipeline
// run:   build/lessons/10_async_loader_pipeline [--workers 4] [--prefetch 6] [--json]
//
// The seeds' option 4. --workers threads prepare batches into a ring of
// --prefetch pinned slots, batch i always into slot i % prefetch. A slot goes
// round: FREE -> FILLING (a loader) -> READY -> COPYING (the main thread has
// queued its copy) -> refilled once that copy has finished: the loader that takes
// the slot next waits for the slot's event, on its own thread, asleep
// (cudaEventBlockingSync). Free slots and ready batches are guarded by one mutex
// and two condition variables: nobody spins, the main thread included (the loss
// ring's events sleep too). The GPU side is lesson 08's: two device slots,
// events, the loss ring drained one batch behind every --sync-interval batches.
//
// Batch i is the same bits whichever loader prepares it, so losses and weights
// equal lesson 06's for any --workers and --prefetch. --fault-at-batch N makes the
// loader of batch N fail: the loop stops, every loader returns and is joined, and
// the program exits with code 1 and one line naming the batch. A loader never
// exits the program on a CUDA error: it writes what went wrong and stops the others. If
// the loaders can no longer make progress (a bug), the main thread says so
// instead of waiting forever.
//
// The files: loaders.h and loaders.cu (the ring of slots and the loader threads), and this one
// (the training loop, main).
#include <stdio.h>

#include "common/base/args.h"      // defines: arg_spec, arg_int, args_parse
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/train/harness.h"  // defines: harness_run_loop, harness_finish
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_step, test_delay, json_int
#include "loaders.h"               // defines: loader_pool, host_slot, start_loaders, stop_loaders, wait_for_batch,
                                   //          hand_back_slot, create_pool, destroy_pool; lesson 08's loss_ring_queue,
                                   //          loss_ring_interval

static const char *PROG = "10_async_loader_pipeline";

// ----------------------------------------------------------------------------
// the training loop: the main thread only enqueues GPU work

static int train_loop(trainer *t, void *ctx)
{
    loader_pool *p = (loader_pool *)ctx;
    long next_loss = 0;
    if (start_loaders(p) != 0) {
        snprintf(t->error, sizeof t->error, "%s", p->error);
        return -1;
    }
    for (long i = 0; i < t->opt.batches; i++) {
        host_slot *slot = wait_for_batch(p, t, i);
        if (!slot) break;
        int d = (int)(i % DEVICE_SLOTS);
        float *d_batch = t->d_batch[d];
        if (i >= DEVICE_SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, p->stepped[d], 0));
        test_delay(t, DELAY_COPY, t->copy_stream);
        CUDA_CHECK(cudaMemcpyAsync(d_batch, t->h_batch[i % p->prefetch], t->batch_bytes, cudaMemcpyHostToDevice,
                                   t->copy_stream));
        pthread_mutex_lock(&p->lock);
        hand_back_slot(p, slot, t->copy_stream);
        pthread_mutex_unlock(&p->lock);
        CUDA_CHECK(cudaEventRecord(p->copied_dev[d], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, p->copied_dev[d], 0));
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaEventRecord(p->stepped[d], t->compute_stream));
        loss_ring_queue(&p->losses, t, i, t->compute_stream);
        loss_ring_interval(&p->losses, t, i, p->sync_interval, &next_loss);
    }
    stop_loaders(p);
    if (!p->error[0]) return 0;
    snprintf(t->error, sizeof t->error, "%s; every loader thread joined", p->error);
    return -1;
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    loader_pool p = {.workers = 4, .prefetch = 6, .sync_interval = 10, .fault_at_batch = -1};
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("workers", &p.workers, 1, MAX_WORKERS, "N", "loader threads");
    specs[n++] = arg_int("prefetch", &p.prefetch, 1, 4096, "N", "pinned batch slots in the ring");
    specs[n++] = arg_int("sync-interval", &p.sync_interval, 1, 1000000, "N",
                         "batches between two host synchronisations");
    specs[n++] = arg_int("fault-at-batch", &p.fault_at_batch, -1, 1000000, "N",
                         "make the loader of batch N fail (to test shutdown); -1: none");
    args_parse(argc, argv, PROG, "Train an MLP with loader threads preparing batches ahead.", specs, n);
    o.workers = p.workers;

    trainer t;
    trainer_init(&t, PROG, &o, p.prefetch, DEVICE_SLOTS, p.sync_interval + 1);
    create_pool(&p, &t);
    int ok = harness_run_loop(&t, train_loop, &p);
    FILE *out = o.json ? stderr : stdout;
    fprintf(out, "loaders: %d threads, %d slots; a loader found its slot's copy still running %ld times (last run)\n",
            p.workers, p.prefetch, p.loader_waits);
    if (o.json) {
        json_int(&t.js, "prefetch", p.prefetch);
        json_int(&t.js, "sync_interval", p.sync_interval);
        json_int(&t.js, "loader_waits", p.loader_waits);
    }
    destroy_pool(&p);
    return harness_finish(&t, ok);
}
