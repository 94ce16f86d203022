// loss_ring.c: lesson 08's loss ring, for the lessons after it (trainer.h declares it): a
// pinned slot and an event per loss, read one batch behind at the end of every interval.
//
// handout-answer: 08-interval
// (loss_ring_interval is what exercise 08-interval asks for: a handout that holds lesson 08
// carries this file compiled, common/prebuilt/loss_ring.o, never its source: tools/make-handout)
#include "trainer.h"

#include <stdlib.h>

#include "check.h"   // CUDA_CHECK
#include "memory.h"  // host_calloc

void loss_ring_create(loss_ring *r, const trainer *t, unsigned event_flags)
{
    r->slots = t->loss_slots;
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

static cudaError_t ring_wait(const loss_ring *r, cudaEvent_t event)
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
    int last = i == t->opt.batches - 1;
    if ((i + 1) % interval != 0 && !last) return;
    long upto = last ? i : i - 1;   // one batch behind: batch i's step stays queued
    if (upto < *next_loss) return;  // nothing new to take (an interval of 1, at batch 0)
    HOST_SYNC(t, ring_wait(r, r->ready[upto % r->slots]));
    for (; *next_loss <= upto; (*next_loss)++) {
        cudaEvent_t landed = r->ready[*next_loss % r->slots];
        // its copy came before batch upto's on the same stream: done already, checked anyway
        if (event_pending(landed)) SLOT_WAIT(t, ring_wait(r, landed));
        trainer_take_loss(t, *next_loss);
    }
}
