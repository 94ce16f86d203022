// STUDENT VERSION of solutions/08_interval_sync/loss_ring.h, made by `make lessons` (checksum 3661252682)
// No exercise in this file, read it as it stands; the TODOs are in loss_ring.cu, train.cu.
// loss_ring.h: lesson 08's loss ring, a pinned slot and an event per loss, read one batch behind at
// the end of every interval. 08's loop uses it, and so do the lessons after 08, which link this
// lesson's library (the Makefile's LIBRARY and STANDS_ON): its answer, exercise 08-interval, is in
// loss_ring.cu, written once.
//
// One event per ring slot, recorded after that slot's copy. The loop keeps the first batch whose
// loss it has not taken yet (`next_loss`, 0 when a run starts). At the end of an interval the host
// waits for the loss of the batch *before* the newest (lag 1), so that the newest step stays
// queued and the GPU works while the host prepares the next batch: the ring needs interval + 1
// slots (notes/08). Lag 0 waits for the newest loss instead: the GPU's queue runs empty once per
// interval (08's "newest" variant measures what that costs).
#ifndef LOSS_RING_H
#define LOSS_RING_H

#include <cuda_runtime.h>

#include "common/train/trainer.h"  // defines: trainer, event_wait_fn

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    cudaEvent_t *ready;
    int slots;
    int lag;             // 1: wait for batch i-1's loss at the end of an interval (default); 0: batch i's
    event_wait_fn wait;  // NULL: cudaEventSynchronize
    void *wait_ctx;
} loss_ring;

// As many slots as the trainer's loss ring (trainer_init's loss_slots), lag 1.
void loss_ring_create(loss_ring *r, const trainer *t, unsigned event_flags);
// The ring's waits go through `wait` (with ctx) from now on, counted as before.
void loss_ring_wait_with(loss_ring *r, event_wait_fn wait, void *ctx);
void loss_ring_destroy(loss_ring *r);
// Queues the copy of batch i's loss into its pinned slot on `stream`, then the slot's event.
void loss_ring_queue(loss_ring *r, trainer *t, long i, cudaStream_t stream);
// At batch i: at the end of each interval of `interval` batches, one counted wait (HOST_SYNC) for
// batch i - lag's loss (batch i's after the last batch), then every loss from *next_loss up to it.
// Returns at once in the other batches (exercise 08-interval).
void loss_ring_interval(loss_ring *r, trainer *t, long i, int interval, long *next_loss);

#ifdef __cplusplus
}
#endif
#endif
