// 10_async_loader_pipeline: loader threads prepare batches; the main thread only
// enqueues GPU work.
//
// build: make build/solutions/10_async_loader_pipeline
// run:   build/solutions/10_async_loader_pipeline [--workers 4] [--prefetch 6] [--json]
//
// The seeds' option 4. --workers threads prepare batches into a ring of
// --prefetch pinned slots, batch i always into slot i % prefetch. A slot goes
// round: FREE -> FILLING (a loader) -> READY -> COPYING (the main thread has
// queued its copy) -> refilled once that copy has finished: the loader that takes
// the slot next waits for the slot's event, on its own thread, asleep
// (cudaEventBlockingSync). Free slots and ready batches are guarded by one mutex
// and two condition variables: nobody spins. The GPU side is lesson 08's: two
// device slots, events, a loss ring drained every --sync-interval batches.
//
// Batch i is the same bits whichever loader prepares it, so losses and weights
// equal lesson 06's for any --workers and --prefetch. --fail-at-batch N makes the
// loader of batch N fail: the program stops with a clear error and exit code 1,
// every thread joined and every buffer freed. If the loaders can no longer make
// progress (a bug), the main thread says so instead of waiting forever.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"    // defines: arg_spec, args_parse
#include "common/check.h"   // defines: CUDA_CHECK, EXERCISE_HELPER
#include "common/timing.h"  // defines: host_now_ms
#include "common/train.h"   // defines: trainer, trainer_init, trainer_run, trainer_finish, trainer_prepare,
                            //          trainer_step, loss_ring, loss_ring_queue, loss_ring_sync

static const char *PROG = "10_async_loader_pipeline";

#define DEVICE_SLOTS 2
#define MAX_WORKERS 64

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_COPYING } slot_state;

typedef struct {
    slot_state state;
    long batch;          // the batch the slot holds, or is being filled with
    cudaEvent_t copied;  // recorded after the copy out of this slot (valid once COPYING)
} host_slot;

static struct {
    int workers, prefetch, sync_interval, fail_at_batch;
    trainer *t;
    host_slot *slots;
    pthread_t threads[MAX_WORKERS];
    pthread_mutex_t lock;
    pthread_cond_t slot_free;    // signalled when a slot is handed back (or on stop)
    pthread_cond_t batch_ready;  // signalled when a batch is ready, a loader blocks or leaves (or on stop)
    long next_batch;             // the next batch a loader will claim
    int stop;                    // no loader claims anything once set
    char error[240];             // why the run stopped early, if it did
    int running[MAX_WORKERS];    // loader k has not returned yet
    int blocked[MAX_WORKERS];    // loader k sleeps on slot_free and has not been signalled since
    long loader_waits;           // times a loader found its slot's last copy still running
    cudaEvent_t copied_dev[DEVICE_SLOTS], stepped[DEVICE_SLOTS];
    loss_ring losses;            // lesson 08's loss ring, from common/train.c
} ld;

// ----------------------------------------------------------------------------
// the ring of pinned slots (every function here is called with ld.lock held)

static void wake_loaders(void)
{
    memset(ld.blocked, 0, sizeof ld.blocked);
    pthread_cond_broadcast(&ld.slot_free);
}

// Loader k sleeps until a slot may have been handed back.
EXERCISE_HELPER static void sleep_until_slot_free(int k)
{
    ld.blocked[k] = 1;
    pthread_cond_broadcast(&ld.batch_ready);  // the main thread checks whether anyone can still progress
    pthread_cond_wait(&ld.slot_free, &ld.lock);
    ld.blocked[k] = 0;  // also after a spurious wake-up
}

// 1 when no loader can make progress: all have left, or all sleep waiting for a slot
// that only the main thread, now waiting for a batch, could hand back.
static int loaders_stuck(void)
{
    for (int k = 0; k < ld.workers; k++)
        if (ld.running[k] && !ld.blocked[k]) return 0;
    return 1;
}

// Loader k claims the next batch and its slot. Returns 0 when there is nothing left to claim.
static int claim_batch(int k, long *batch, host_slot **slot, int *copy_queued)
{
    // BEGIN SOLUTION(10-claim): the next batch to prepare is ld.next_batch, in slot batch % prefetch; a slot still holding an earlier batch is not yours yet (sleep_until_slot_free), and after waking the next batch may have been taken by another loader; leave the slot marked so no one else fills it
    for (;;) {
        if (ld.stop || ld.next_batch >= ld.t->opt.batches) return 0;
        *batch = ld.next_batch;
        *slot = &ld.slots[*batch % ld.prefetch];
        if ((*slot)->state == SLOT_FREE || (*slot)->state == SLOT_COPYING) break;
        sleep_until_slot_free(k);
    }
    *copy_queued = (*slot)->state == SLOT_COPYING;
    (*slot)->state = SLOT_FILLING;
    (*slot)->batch = *batch;
    ld.next_batch++;
    return 1;
    //| (void)k, (void)batch, (void)slot, (void)copy_queued;
    //| return 0;  // nothing claimed: the loader leaves at once
    // END SOLUTION
}

// The loader has filled its slot: hand the batch to the main thread.
static void publish_batch(host_slot *slot)
{
    // BEGIN SOLUTION(10-publish): mark the slot READY and wake the main thread, which sleeps on batch_ready
    slot->state = SLOT_READY;
    pthread_cond_broadcast(&ld.batch_ready);
    //| (void)slot;
    // END SOLUTION
}

// The main thread has queued the copy out of the slot: hand the slot back.
static void hand_back_slot(host_slot *slot, cudaStream_t copy_stream)
{
    // BEGIN SOLUTION(10-hand-back): record the slot's `copied` event on the copy stream (a loader will wait for it before refilling), mark the slot COPYING and wake the loaders
    CUDA_CHECK(cudaEventRecord(slot->copied, copy_stream));
    slot->state = SLOT_COPYING;
    wake_loaders();
    //| (void)slot, (void)copy_stream;
    // END SOLUTION
}

// ----------------------------------------------------------------------------
// the loaders

static void *loader_main(void *arg)
{
    int k = (int)(long)arg;
    char name[32];
    snprintf(name, sizeof name, "loader %d", k);
    trace_name_thread(name);
    long i = 0;
    host_slot *slot = NULL;
    int copy_queued = 0;
    pthread_mutex_lock(&ld.lock);
    while (claim_batch(k, &i, &slot, &copy_queued)) {
        pthread_mutex_unlock(&ld.lock);
        if (copy_queued) {
            // BEGIN SOLUTION(10-recycle): the slot's last copy may still be reading the pinned buffer: make sure it is over before you overwrite it, waiting on this thread only when you must (and count ld.loader_waits)
            if (!event_done(slot->copied)) {
                trace_range r = trace_begin("loader wait", (int)i);
                CUDA_CHECK(cudaEventSynchronize(slot->copied));
                trace_end(&r);
                pthread_mutex_lock(&ld.lock);
                ld.loader_waits++;
                pthread_mutex_unlock(&ld.lock);
            }
            // END SOLUTION
        }
        if (i == ld.fail_at_batch) {  // a simulated I/O error: stop everyone
            pthread_mutex_lock(&ld.lock);
            snprintf(ld.error, sizeof ld.error, "loader %d failed while preparing batch %ld (--fail-at-batch)", k, i);
            ld.stop = 1;
            break;
        }
        trainer_prepare(ld.t, i, ld.t->h_batch[i % ld.prefetch]);
        pthread_mutex_lock(&ld.lock);
        publish_batch(slot);
    }
    ld.running[k] = 0;
    pthread_cond_broadcast(&ld.batch_ready);
    wake_loaders();  // after a failure: the others leave too
    pthread_mutex_unlock(&ld.lock);
    return NULL;
}

static void start_loaders(void)
{
    ld.next_batch = 0;
    ld.stop = 0;
    ld.error[0] = '\0';
    for (int s = 0; s < ld.prefetch; s++) {
        ld.slots[s].state = SLOT_FREE;
        ld.slots[s].batch = -1;
    }
    for (int k = 0; k < ld.workers; k++) {
        ld.running[k] = 1;
        ld.blocked[k] = 0;
    }
    for (long k = 0; k < ld.workers; k++)
        if (pthread_create(&ld.threads[k], NULL, loader_main, (void *)k) != 0) {
            fprintf(stderr, "%s: cannot start loader thread %ld\n", PROG, k);
            exit(EXIT_FAILURE);
        }
}

static void stop_loaders(void)
{
    pthread_mutex_lock(&ld.lock);
    ld.stop = 1;
    wake_loaders();
    pthread_mutex_unlock(&ld.lock);
    for (int k = 0; k < ld.workers; k++) pthread_join(ld.threads[k], NULL);
}

// The main thread sleeps until batch i is ready; returns its slot, or NULL when
// the run must stop (ld.error says why). Counted as a slot wait.
static host_slot *wait_for_batch(trainer *t, long i)
{
    host_slot *slot = &ld.slots[i % ld.prefetch];
    pthread_mutex_lock(&ld.lock);
    if (!(slot->state == SLOT_READY && slot->batch == i)) {
        trace_range r = trace_begin("slot wait", (int)i);
        double t0 = host_now_ms();
        while (!(slot->state == SLOT_READY && slot->batch == i) && !ld.stop) {
            if (loaders_stuck()) {
                snprintf(ld.error, sizeof ld.error,
                         "waiting for batch %ld, but no loader can make progress: %s", i,
                         ld.next_batch <= i ? "the loaders never claimed it (see claim_batch)"
                                            : "it was claimed but never published, or the loaders wait for slots "
                                              "that were never handed back (see publish_batch, hand_back_slot)");
                ld.stop = 1;
                break;
            }
            pthread_cond_wait(&ld.batch_ready, &ld.lock);
        }
        t->blocked_ms += host_now_ms() - t0;
        t->slot_waits++;
        trace_end(&r);
    }
    int ready = slot->state == SLOT_READY && slot->batch == i;
    pthread_mutex_unlock(&ld.lock);
    return ready ? slot : NULL;
}

static void destroy_loader(void)
{
    for (int s = 0; s < ld.prefetch; s++) CUDA_CHECK(cudaEventDestroy(ld.slots[s].copied));
    for (int d = 0; d < DEVICE_SLOTS; d++) {
        CUDA_CHECK(cudaEventDestroy(ld.copied_dev[d]));
        CUDA_CHECK(cudaEventDestroy(ld.stepped[d]));
    }
    loss_ring_destroy(&ld.losses, ld.t);
    free(ld.slots);
    pthread_cond_destroy(&ld.slot_free);
    pthread_cond_destroy(&ld.batch_ready);
    pthread_mutex_destroy(&ld.lock);
}

// ----------------------------------------------------------------------------
// the training loop: the main thread only enqueues GPU work

static void train_loop(trainer *t)
{
    start_loaders();
    ld.losses.next = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        host_slot *slot = wait_for_batch(t, i);
        if (!slot) break;
        int d = (int)(i % DEVICE_SLOTS);
        float *d_batch = t->d_batch[d];
        if (i >= DEVICE_SLOTS) CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, ld.stepped[d], 0));
        CUDA_CHECK(cudaMemcpyAsync(d_batch, t->h_batch[i % ld.prefetch], t->batch_bytes, cudaMemcpyHostToDevice,
                                   t->copy_stream));
        pthread_mutex_lock(&ld.lock);
        hand_back_slot(slot, t->copy_stream);
        pthread_mutex_unlock(&ld.lock);
        CUDA_CHECK(cudaEventRecord(ld.copied_dev[d], t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, ld.copied_dev[d], 0));
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaEventRecord(ld.stepped[d], t->compute_stream));
        loss_ring_queue(&ld.losses, t, i, t->compute_stream);
        if ((i + 1) % ld.sync_interval == 0 || i == t->opt.batches - 1) loss_ring_sync(&ld.losses, t, i);
    }
    stop_loaders();
    if (ld.error[0]) {  // stop the program here: every later run would stop the same way
        CUDA_CHECK(cudaDeviceSynchronize());
        fprintf(stderr, "%s: %s; every loader thread joined, stopping\n", PROG, ld.error);
        destroy_loader();
        exit(trainer_finish(t, 0));
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    ld.workers = 4;
    ld.prefetch = 6;
    ld.sync_interval = 10;
    ld.fail_at_batch = -1;
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = (arg_spec){"workers", ARG_INT, &ld.workers, 1, MAX_WORKERS, "N", "loader threads"};
    specs[n++] = (arg_spec){"prefetch", ARG_INT, &ld.prefetch, 1, 1024, "N", "pinned batch slots in the ring"};
    specs[n++] = (arg_spec){"sync-interval", ARG_INT, &ld.sync_interval, 1, 1000000, "N",
                            "batches between two host synchronisations"};
    specs[n++] = (arg_spec){"fail-at-batch", ARG_INT, &ld.fail_at_batch, 0, 1000000, "N",
                            "make the loader of batch N fail (to test shutdown)"};
    args_parse(argc, argv, PROG, "Train an MLP with loader threads preparing batches ahead.", specs, n);
    o.workers = ld.workers;

    trainer t;
    trainer_init(&t, PROG, &o, ld.prefetch, DEVICE_SLOTS, ld.sync_interval);
    ld.t = &t;
    pthread_mutex_init(&ld.lock, NULL);
    pthread_cond_init(&ld.slot_free, NULL);
    pthread_cond_init(&ld.batch_ready, NULL);
    ld.slots = (host_slot *)calloc((size_t)ld.prefetch, sizeof(host_slot));
    for (int s = 0; s < ld.prefetch; s++)  // loaders sleep on these: no spinning
        CUDA_CHECK(cudaEventCreateWithFlags(&ld.slots[s].copied, cudaEventDisableTiming | cudaEventBlockingSync));
    for (int d = 0; d < DEVICE_SLOTS; d++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&ld.copied_dev[d], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&ld.stepped[d], cudaEventDisableTiming));
    }
    loss_ring_create(&ld.losses, &t);

    int ok = trainer_run(&t, train_loop);
    FILE *out = o.json ? stderr : stdout;
    fprintf(out, "loaders: %d threads, %d slots; a loader found its slot's copy still running %ld times\n",
            ld.workers, ld.prefetch, ld.loader_waits);
    if (o.json) {
        json_int(&t.js, "prefetch", ld.prefetch);
        json_int(&t.js, "sync_interval", ld.sync_interval);
        json_int(&t.js, "loader_waits", ld.loader_waits);
    }
    destroy_loader();
    return trainer_finish(&t, ok);
}
