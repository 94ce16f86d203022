// STUDENT VERSION of solutions/10_async_loader_pipeline/loaders.cu, made by `make lessons` (checksum 3513699258)
// Fill in its 4 TODOs.
// loaders.cu (lesson 10): the ring of pinned slots, every step of a slot's round guarded by one
// lock (exercises 10-claim, 10-publish, 10-hand-back), and the loader threads that fill it
// (10-recycle); the pool made and freed.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/check.h"     // defines: CUDA_CHECK, check_message, EXERCISE_HELPER
#include "common/gpu/memory.h"     // defines: host_calloc
#include "common/train/trainer.h"  // defines: trainer, trainer_prepare, host_wait_begin, host_wait_end, trace_begin,
                                   //          trace_end, trace_name_thread
#include "loaders.h"               // the pool, its slots and loaders; lesson 08's loss_ring_create, loss_ring_destroy

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
    // TODO(10-claim): the next batch to prepare is p->next_batch, in slot batch %
    // prefetch; a slot still holding an earlier batch is not yours yet (sleep_until_slot_free), and
    // after waking the next batch may have been taken by another loader; leave the slot marked so
    // no one else fills it
    (void)p, (void)k, (void)batch, (void)slot, (void)copy_queued;
    return 0;  // nothing claimed: the loader leaves at once
}

// The loader has filled its slot: hand the batch to the main thread.
static void publish_batch(loader_pool *p, host_slot *slot)
{
    // TODO(10-publish): mark the slot READY and wake the main thread, which sleeps on
    // batch_ready
    (void)p, (void)slot;
}

// The main thread has queued the copy out of the slot: hand the slot back.
void hand_back_slot(loader_pool *p, host_slot *slot, cudaStream_t copy_stream)
{
    // TODO(10-hand-back): record the slot's `copied` event on the copy stream (a loader
    // will wait for it before refilling), mark the slot COPYING and wake the loaders
    (void)p, (void)slot, (void)copy_stream;
}

// ----------------------------------------------------------------------------
// the loaders

// Before refilling a slot whose last copy was queued: that copy may still be
// reading it. Returns 0, or -1 with `why` written (a CUDA error: never exit()
// from a loader thread, the main thread may be using CUDA at the same moment).
static int wait_for_last_copy(loader_pool *p, int k, host_slot *slot, long i, char *why, size_t size)
{
    // TODO(10-recycle): the slot's last copy may still be reading the pinned buffer: ask
    // its `copied` event (cudaEventQuery), and only if the copy is still pending wait for it on
    // this thread (a TL_RANGE_LOADER_WAIT range, p->loader_waits counted under the lock); report an
    // error into `why`, never exit
    (void)p, (void)k, (void)slot, (void)i, (void)why, (void)size;
    return 0;
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
        if (!why[0] && i == p->fault_at_batch)  // a simulated I/O error
            snprintf(why, sizeof why, "loader %d failed while preparing batch %ld (--fault-at-batch)", me->k, i);
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
int start_loaders(loader_pool *p)
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

void stop_loaders(loader_pool *p)
{
    pthread_mutex_lock(&p->lock);
    stop_all(p, NULL);
    pthread_mutex_unlock(&p->lock);
    for (int k = 0; k < p->workers; k++) pthread_join(p->loaders[k].thread, NULL);
}

// The main thread sleeps until batch i is ready; returns its slot, or NULL when
// the run must stop (p->error says why). Counted as a slot wait.
host_slot *wait_for_batch(loader_pool *p, trainer *t, long i)
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

void create_pool(loader_pool *p, trainer *t)
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

void destroy_pool(loader_pool *p)
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
