// loaders.h (lesson 10): the ring of pinned slots and the loader threads that fill it, as the
// training loop in train.cu sees them; loaders.cu holds them.
#ifndef LOADERS_H
#define LOADERS_H

#include <pthread.h>

#include "08_interval_sync/loss_ring.h"  // defines: loss_ring
#include "common/train/trainer.h"        // defines: trainer

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
    int k;  // loader k of the pool
    pthread_t thread;
    int running;  // has not returned yet
    int blocked;  // sleeps on slot_free and has not been signalled since
} loader;

struct loader_pool {
    int workers, prefetch, sync_interval, fault_at_batch;  // fault_at_batch -1: no loader fails
    trainer *t;
    host_slot *slots;
    loader loaders[MAX_WORKERS];
    pthread_mutex_t lock;
    pthread_cond_t slot_free;    // signalled when a slot is handed back (or on stop)
    pthread_cond_t batch_ready;  // signalled when a batch is ready, a loader blocks or leaves (or on stop)
    cudaEvent_t copied_dev[DEVICE_SLOTS], stepped[DEVICE_SLOTS];
    loss_ring losses;  // lesson 08's loss ring, from its library
    // one run's state, set by start_loaders
    long next_batch;    // the next batch a loader will claim
    int stop;           // no loader claims or prepares anything once set
    char error[200];    // why the run stopped early, if it did
    long loader_waits;  // times a loader found its slot's last copy still running
};

// The main thread has queued the copy out of the slot: hands the slot back (p->lock held).
void hand_back_slot(loader_pool *p, host_slot *slot, cudaStream_t copy_stream);
// A run starts: every slot free, nothing claimed, no error, the loaders started. 0, or -1 with
// p->error written.
int start_loaders(loader_pool *p);
void stop_loaders(loader_pool *p);  // stops and joins every loader
// The main thread sleeps until batch i is ready; returns its slot, or NULL when the run must
// stop (p->error says why). Counted as a slot wait.
host_slot *wait_for_batch(loader_pool *p, trainer *t, long i);
void create_pool(loader_pool *p, trainer *t);
void destroy_pool(loader_pool *p);

#endif
