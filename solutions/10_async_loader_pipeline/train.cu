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
// and two condition variables: nobody spins, the main thread included (the loss
// ring's events sleep too). The GPU side is lesson 08's: two device slots,
// events, the loss ring drained one batch behind every --sync-interval batches.
//
// Batch i is the same bits whichever loader prepares it, so losses and weights
// equal lesson 06's for any --workers and --prefetch. --fail-at-batch N makes the
// loader of batch N fail: the loop stops, every loader returns and is joined, and
// the program exits with code 1 and one line naming the batch. A loader never
// exits the program on a CUDA error: it writes what went wrong and stops the others. If
// the loaders can no longer make progress (a bug), the main thread says so
// instead of waiting forever.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/args.h"     // defines: arg_spec, arg_int, args_parse
#include "common/check.h"    // defines: CUDA_CHECK, check_message, EXERCISE_HELPER
#include "common/harness.h"  // defines: harness_run_loop, harness_finish
#include "common/memory.h"   // defines: host_calloc
#include "common/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                             //          trainer_init, trainer_prepare, trainer_step, test_delay, host_wait_begin,
                             //          host_wait_end, loss_ring, loss_ring_create, loss_ring_destroy,
                             //          loss_ring_queue, loss_ring_interval

static const char *PROG = "10_async_loader_pipeline";

#define DEVICE_SLOTS 2
#define MAX_WORKERS 64

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_COPYING } slot_state;

typedef struct {
    slot_state state;
    long batch;          // the batch the slot holds, or is being filled with
    cudaEvent_t copied;  // recorded after the copy out of this slot (valid once COPYING)
} host_slot;

typedef struct loader_pool loader_pool;
typedef struct {
    loader_pool *pool;
    int k;               // loader k of the pool
    pthread_t thread;
    int running;         // has not returned yet
    int blocked;         // sleeps on slot_free and has not been signalled since
} loader;

struct loader_pool {
    int workers, prefetch, sync_interval, fail_at_batch;  // fail_at_batch -1: no loader fails
    trainer *t;
    host_slot *slots;
    loader loaders[MAX_WORKERS];
    pthread_mutex_t lock;
    pthread_cond_t slot_free;    // signalled when a slot is handed back (or on stop)
    pthread_cond_t batch_ready;  // signalled when a batch is ready, a loader blocks or leaves (or on stop)
    cudaEvent_t copied_dev[DEVICE_SLOTS], stepped[DEVICE_SLOTS];
    loss_ring losses;            // lesson 08's loss ring, from common/trainer.c
    // one run's state, set by start_loaders
    long next_batch;             // the next batch a loader will claim
    int stop;                    // no loader claims or prepares anything once set
    char error[200];             // why the run stopped early, if it did
    long loader_waits;           // times a loader found its slot's last copy still running
};

// ----------------------------------------------------------------------------
// the ring of pinned slots (every function here is called with p->lock held)

static void wake_loaders(loader_pool *p)
{
    for (int k = 0; k < p->workers; k++) p->loaders[k].blocked = 0;
    pthread_cond_broadcast(&p->slot_free);
}

// Stops the run: the first reason given is the one reported.
static void stop_all(loader_pool *p, const char *why)
{
    if (why && !p->error[0]) snprintf(p->error, sizeof p->error, "%s", why);
    p->stop = 1;
    wake_loaders(p);
    pthread_cond_broadcast(&p->batch_ready);
}

// Loader k sleeps until a slot may have been handed back.
EXERCISE_HELPER static void sleep_until_slot_free(loader_pool *p, int k)
{
    p->loaders[k].blocked = 1;
    pthread_cond_broadcast(&p->batch_ready);  // the main thread checks whether anyone can still progress
    pthread_cond_wait(&p->slot_free, &p->lock);
    p->loaders[k].blocked = 0;  // also after a spurious wake-up
}

// 1 when no loader can make progress: all have left, or all sleep waiting for a slot
// that only the main thread, now waiting for a batch, could hand back.
static int loaders_stuck(const loader_pool *p)
{
    for (int k = 0; k < p->workers; k++)
        if (p->loaders[k].running && !p->loaders[k].blocked) return 0;
    return 1;
}

// Loader k claims the next batch and its slot. Returns 0 when there is nothing left to claim.
static int claim_batch(loader_pool *p, int k, long *batch, host_slot **slot, int *copy_queued)
{
    // BEGIN SOLUTION(10-claim): the next batch to prepare is p->next_batch, in slot batch % prefetch; a slot still holding an earlier batch is not yours yet (sleep_until_slot_free), and after waking the next batch may have been taken by another loader; leave the slot marked so no one else fills it
    for (;;) {
        if (p->stop || p->next_batch >= p->t->opt.batches) return 0;
        *batch = p->next_batch;
        *slot = &p->slots[*batch % p->prefetch];
        if ((*slot)->state == SLOT_FREE || (*slot)->state == SLOT_COPYING) break;
        sleep_until_slot_free(p, k);
    }
    *copy_queued = (*slot)->state == SLOT_COPYING;
    (*slot)->state = SLOT_FILLING;
    (*slot)->batch = *batch;
    p->next_batch++;
    return 1;
    //| (void)p, (void)k, (void)batch, (void)slot, (void)copy_queued;
    //| return 0;  // nothing claimed: the loader leaves at once
    // END SOLUTION
}

// The loader has filled its slot: hand the batch to the main thread.
static void publish_batch(loader_pool *p, host_slot *slot)
{
    // BEGIN SOLUTION(10-publish): mark the slot READY and wake the main thread, which sleeps on batch_ready
    slot->state = SLOT_READY;
    pthread_cond_broadcast(&p->batch_ready);
    //| (void)p, (void)slot;
    // END SOLUTION
}

// The main thread has queued the copy out of the slot: hand the slot back.
static void hand_back_slot(loader_pool *p, host_slot *slot, cudaStream_t copy_stream)
{
    // BEGIN SOLUTION(10-hand-back): record the slot's `copied` event on the copy stream (a loader will wait for it before refilling), mark the slot COPYING and wake the loaders
    CUDA_CHECK(cudaEventRecord(slot->copied, copy_stream));
    slot->state = SLOT_COPYING;
    wake_loaders(p);
    //| (void)p, (void)slot, (void)copy_stream;
    // END SOLUTION
}

// ----------------------------------------------------------------------------
// the loaders

// Before refilling a slot whose last copy was queued: that copy may still be
// reading it. Returns 0, or -1 with `why` written (a CUDA error: never exit()
// from a loader thread, the main thread may be using CUDA at the same moment).
static int wait_for_last_copy(loader_pool *p, int k, host_slot *slot, long i, char *why, size_t size)
{
    // BEGIN SOLUTION(10-recycle): the slot's last copy may still be reading the pinned buffer: ask its `copied` event (cudaEventQuery), and only if the copy is still pending wait for it on this thread (a TL_RANGE_LOADER_WAIT range, p->loader_waits counted under the lock); report an error into `why`, never exit
    cudaError_t state = cudaEventQuery(slot->copied);
    if (state == cudaErrorNotReady) {
        trace_range r = trace_begin(TL_RANGE_LOADER_WAIT, "loader wait", (int)i);
        state = cudaEventSynchronize(slot->copied);
        trace_end(&r);
        pthread_mutex_lock(&p->lock);
        p->loader_waits++;
        pthread_mutex_unlock(&p->lock);
    }
    if (state != cudaSuccess) {  // CUDA_CHECK's message, without its exit()
        char what[96];
        snprintf(what, sizeof what, "waiting for slot %ld's copy (loader %d)", i % p->prefetch, k);
        check_message(why, size, what, __FILE__, __LINE__, state);
        return -1;
    }
    return 0;
    //| (void)p, (void)k, (void)slot, (void)i, (void)why, (void)size;
    //| return 0;
    // END SOLUTION
}

static void *loader_main(void *arg)
{
    loader *me = (loader *)arg;
    loader_pool *p = me->pool;
    char name[32], why[200] = "";
    snprintf(name, sizeof name, "loader %d", me->k);
    trace_name_thread(name, TL_TRACK_THREAD);
    long i = 0;
    host_slot *slot = NULL;
    int copy_queued = 0;
    pthread_mutex_lock(&p->lock);
    while (claim_batch(p, me->k, &i, &slot, &copy_queued)) {
        pthread_mutex_unlock(&p->lock);
        if (copy_queued) wait_for_last_copy(p, me->k, slot, i, why, sizeof why);
        if (!why[0] && i == p->fail_at_batch)  // a simulated I/O error
            snprintf(why, sizeof why, "loader %d failed while preparing batch %ld (--fail-at-batch)", me->k, i);
        pthread_mutex_lock(&p->lock);
        if (why[0] || p->stop) break;  // a batch claimed after a stop is not prepared
        pthread_mutex_unlock(&p->lock);
        trainer_prepare(p->t, i, p->t->h_batch[i % p->prefetch]);
        pthread_mutex_lock(&p->lock);
        publish_batch(p, slot);
    }
    if (why[0]) stop_all(p, why);
    me->running = 0;
    pthread_cond_broadcast(&p->batch_ready);  // the main thread may be waiting for this loader
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

// A run starts: every slot free, nothing claimed, no error, the loaders started.
static int start_loaders(loader_pool *p)
{
    p->next_batch = 0;
    p->stop = 0;
    p->error[0] = '\0';
    p->loader_waits = 0;
    for (int s = 0; s < p->prefetch; s++) {
        p->slots[s].state = SLOT_FREE;
        p->slots[s].batch = -1;
    }
    for (int k = 0; k < p->workers; k++) {
        loader *l = &p->loaders[k];
        l->pool = p;
        l->k = k;
        l->running = 1;
        l->blocked = 0;
        if (pthread_create(&l->thread, NULL, loader_main, l) != 0) {
            pthread_mutex_lock(&p->lock);
            l->running = 0;
            stop_all(p, "cannot start a loader thread");
            pthread_mutex_unlock(&p->lock);
            for (int j = 0; j < k; j++) pthread_join(p->loaders[j].thread, NULL);
            return -1;
        }
    }
    return 0;
}

static void stop_loaders(loader_pool *p)
{
    pthread_mutex_lock(&p->lock);
    stop_all(p, NULL);
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; k < p->workers; k++) pthread_join(p->loaders[k].thread, NULL);
}

// The main thread sleeps until batch i is ready; returns its slot, or NULL when
// the run must stop (p->error says why). Counted as a slot wait.
static host_slot *wait_for_batch(loader_pool *p, trainer *t, long i)
{
    host_slot *slot = &p->slots[i % p->prefetch];
    pthread_mutex_lock(&p->lock);
    if (!(slot->state == SLOT_READY && slot->batch == i)) {
        host_wait w = host_wait_begin(TL_RANGE_SLOT_WAIT, "slot wait");
        while (!(slot->state == SLOT_READY && slot->batch == i) && !p->stop) {
            if (loaders_stuck(p)) {
                char why[200];
                snprintf(why, sizeof why, "waiting for batch %ld, but no loader can make progress: %s", i,
                         p->next_batch <= i ? "the loaders never claimed it (see claim_batch)"
                                            : "it was claimed but never published, or the loaders wait for "
                                              "slots never handed back (see publish_batch, hand_back_slot)");
                stop_all(p, why);
                break;
            }
            pthread_cond_wait(&p->batch_ready, &p->lock);
        }
        host_wait_end(t, &w);
    }
    int ready = slot->state == SLOT_READY && slot->batch == i;
    pthread_mutex_unlock(&p->lock);
    return ready ? slot : NULL;
}

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

// ----------------------------------------------------------------------------

static void create_pool(loader_pool *p, trainer *t)
{
    p->t = t;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->slot_free, NULL);
    pthread_cond_init(&p->batch_ready, NULL);
    p->slots = (host_slot *)host_calloc((size_t)p->prefetch, sizeof(host_slot), "the slot ring");
    for (int s = 0; s < p->prefetch; s++)  // loaders sleep on these: no spinning
        CUDA_CHECK(cudaEventCreateWithFlags(&p->slots[s].copied, cudaEventDisableTiming | cudaEventBlockingSync));
    for (int d = 0; d < DEVICE_SLOTS; d++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&p->copied_dev[d], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->stepped[d], cudaEventDisableTiming));
    }
    loss_ring_create(&p->losses, t, cudaEventBlockingSync);  // the main thread sleeps at the interval sync too
}

static void destroy_pool(loader_pool *p)
{
    for (int s = 0; s < p->prefetch; s++) CUDA_CHECK(cudaEventDestroy(p->slots[s].copied));
    for (int d = 0; d < DEVICE_SLOTS; d++) {
        CUDA_CHECK(cudaEventDestroy(p->copied_dev[d]));
        CUDA_CHECK(cudaEventDestroy(p->stepped[d]));
    }
    loss_ring_destroy(&p->losses);
    free(p->slots);
    pthread_cond_destroy(&p->slot_free);
    pthread_cond_destroy(&p->batch_ready);
    pthread_mutex_destroy(&p->lock);
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    loader_pool p = {.workers = 4, .prefetch = 6, .sync_interval = 10, .fail_at_batch = -1};
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("workers", &p.workers, 1, MAX_WORKERS, "N", "loader threads");
    specs[n++] = arg_int("prefetch", &p.prefetch, 1, 4096, "N", "pinned batch slots in the ring");
    specs[n++] = arg_int("sync-interval", &p.sync_interval, 1, 1000000, "N",
                         "batches between two host synchronisations");
    specs[n++] = arg_int("fail-at-batch", &p.fail_at_batch, -1, 1000000, "N",
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
