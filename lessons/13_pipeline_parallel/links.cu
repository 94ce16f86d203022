// STUDENT VERSION of solutions/13_pipeline_parallel/links.cu, made by `make lessons` (checksum 1693556735)
// No exercise in this file, read it as it stands; the TODOs are in stages.cu, train.cu.
// links.cu (lesson 13): a communicator and a stream per direction between neighbouring
// stages, opened, connected and closed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"  // the lesson's types, and through it the course's headers

// the links

// Two communicators split from lesson 12's (every rank in both, in the same order), each with
// a stream. Blocking ones: once connected, ncclSend and ncclRecv only queue work, where a
// non-blocking communicator would issue each call from a thread of its own (tens of
// microseconds, four calls per micro-batch). What blocks is watched all the same: every
// communicator the rank holds is in dist's watch (dist_split_ready adds it), so a connect or
// a finalize that waits for a rank that has failed ends with the others' note or --timeout-s,
// and an abort aborts the links with the parent.
link_pair *links_open(dist_env *d, const device_info *dev, int link_ctas)
{
    static const char *const names[2] = {"the forward link", "the backward link"};
    link_pair *ln = (link_pair *)host_calloc(1, sizeof(link_pair), "the links");
    p2p_link *both[2] = {&ln->fwd, &ln->bwd};
    for (int k = 0; k < 2; k++) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.splitShare = 0;  // resources of its own: shared ones would order its calls after the other's
        // a send or receive holds an SM per CTA from its launch to its end, waiting for the peer
        // included; the products beside it run on what is left (notes/13, measured)
        if (link_ctas > 0) {
            config.minCTAs = 1;
            config.maxCTAs = link_ctas;
        }
        // the split is a call on the non-blocking parent: it may answer before the new one exists
        NCCL_CHECK(d, ncclCommSplit(d->comm, 0, d->rank, &both[k]->comm, &config));
        dist_split_ready(d, &both[k]->comm, names[k]);
        // the hand-overs start as soon as they may, ahead of the compute stream's queued blocks
        CUDA_CHECK(cudaStreamCreateWithPriority(&both[k]->stream, cudaStreamNonBlocking, dev->priority_greatest));
    }
    trace_name_stream(ln->fwd.stream, "fwd");
    trace_name_stream(ln->bwd.stream, "bwd");
    return ln;
}

// NCCL connects two ranks on their first send and receive, and on a blocking communicator
// that call waits for the peer. One activation up the whole pipeline, then one error down it,
// connects every link in an order without a cycle: stage s waits only for stage s - 1 going
// up, for stage s + 1 coming down.
void links_connect(pipeline *pp, const mlp_shape *s)
{
    const stage_shape *st = &pp->st;
    dist_env *d = pp->dist;
    link_pair *ln = pp->ln;
    float *buf = (float *)device_alloc(sizeof(float) * st->slot_floats);
    CUDA_CHECK(cudaMemset(buf, 0, sizeof(float) * st->slot_floats));
    if (!stage_is_first(st))
        NCCL_CHECK(d, ncclRecv(buf, input_floats(s, st), ncclFloat, st->rank - 1, ln->fwd.comm, ln->fwd.stream));
    if (!stage_is_last(st))
        NCCL_CHECK(d, ncclSend(buf, output_floats(s, st), ncclFloat, st->rank + 1, ln->fwd.comm, ln->fwd.stream));
    if (!stage_is_last(st))
        NCCL_CHECK(d, ncclRecv(buf, output_floats(s, st), ncclFloat, st->rank + 1, ln->bwd.comm, ln->bwd.stream));
    if (!stage_is_first(st))
        NCCL_CHECK(d, ncclSend(buf, input_floats(s, st), ncclFloat, st->rank - 1, ln->bwd.comm, ln->bwd.stream));
    for (int k = 0; k < 2; k++) {
        CUDA_CHECK(cudaEventRecord(pp->links_idle[k], k ? ln->bwd.stream : ln->fwd.stream));
        CUDA_CHECK(dist_event_wait(d, pp->links_idle[k]));
    }
    device_free(buf);
}

// ncclCommFinalize then ncclCommDestroy of both links (watched: a peer that is gone cannot hold
// this rank here past --timeout-s): a normal end. Before dist_finish.
void links_close(pipeline *pp)
{
    p2p_link *both[2] = {&pp->ln->fwd, &pp->ln->bwd};
    for (int k = 0; k < 2; k++) {
        dist_close(pp->dist, &both[k]->comm);
        CUDA_CHECK(cudaStreamDestroy(both[k]->stream));
    }
    free(pp->ln);
    pp->ln = NULL;
}
