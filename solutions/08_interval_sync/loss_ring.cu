// loss_ring.cu: lesson 08's loss ring (loss_ring.h). The lessons after 08 link this file's solution
// as lesson 08's library; exercise 08-interval is here.
#include "loss_ring.h"

#include <stdlib.h>

#include "common/base/check.h"     // defines: CUDA_CHECK, EXERCISE_HELPER
#include "common/gpu/memory.h"     // defines: host_calloc
#include "common/train/trainer.h"  // defines: trainer_loss_slot, trainer_take_loss, event_pending, HOST_SYNC, SLOT_WAIT

void loss_ring_create(loss_ring *r, const trainer *t, unsigned event_flags)
{
    r->slots = t->loss_slots;
    r->lag = 1;
    r->wait = NULL;
    r->wait_ctx = NULL;
    r->ready = (cudaEvent_t *)host_calloc((size_t)r->slots, sizeof(cudaEvent_t), "the loss ring");
    for (int k = 0; k < r->slots; k++)
        CUDA_CHECK(cudaEventCreateWithFlags(&r->ready[k], cudaEventDisableTiming | event_flags));
}

void loss_ring_wait_with(loss_ring *r, event_wait_fn wait, void *ctx)
{
    r->wait = wait;
    r->wait_ctx = ctx;
}

// How the host waits for one of the ring's events: cudaEventSynchronize, or the lesson's own wait.
EXERCISE_HELPER static cudaError_t ring_wait(const loss_ring *r, cudaEvent_t event)
{
    return r->wait ? r->wait(r->wait_ctx, event) : cudaEventSynchronize(event);
}

void loss_ring_destroy(loss_ring *r)
{
    for (int k = 0; k < r->slots; k++) CUDA_CHECK(cudaEventDestroy(r->ready[k]));
    free(r->ready);
}

void loss_ring_queue(loss_ring *r, trainer *t, long i, cudaStream_t stream)
{
    int slot = (int)(i % r->slots);
    CUDA_CHECK(
        cudaMemcpyAsync(&t->h_loss[slot], trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(r->ready[slot], stream));
}

void loss_ring_interval(loss_ring *r, trainer *t, long i, int interval, long *next_loss)
{
    // BEGIN SOLUTION(08-interval): at the end of every interval, and after the last batch, wait
    // once (HOST_SYNC, through ring_wait) for the loss of batch i - r->lag (batch i after the last),
    // unless no loss up to it is new (an interval of 1 at batch 0), then take every loss from
    // *next_loss up to it, each only once its own event says it landed
    int last = i == t->opt.batches - 1;
    if ((i + 1) % interval != 0 && !last) return;
    long upto = last ? i : i - r->lag;  // lag 1: batch i's step stays queued
    if (upto < *next_loss) return;      // nothing new to take (an interval of 1, at batch 0)
    // on its stream that loss's copy comes after every earlier step and copy: one wait covers them
    HOST_SYNC(t, ring_wait(r, r->ready[upto % r->slots]));
    for (; *next_loss <= upto; (*next_loss)++) {
        cudaEvent_t landed = r->ready[*next_loss % r->slots];
        if (event_pending(landed)) SLOT_WAIT(t, ring_wait(r, landed));  // done already: checked anyway
        trainer_take_loss(t, *next_loss);
    }
    //| (void)r, (void)t, (void)i, (void)interval, (void)next_loss;
    // END SOLUTION
}
