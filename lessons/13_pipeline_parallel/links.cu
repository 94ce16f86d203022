// STUDENT VERSION of solutions/13_pipeline_parallel/links.cu, made by `make lessons` (checksum 2018215076)
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
// and an abort aborts the links with the parent. Under --p2p-group pairs both directions share
// the forward link's communicator (Megatron-LM's one pipeline group), each keeping its stream.
link_pair *links_open(dist_env *d, const device_info *dev, int link_ctas, p2p_grouping grouping)
{
    static const char *const names[2] = {"the forward link", "the backward link"};
    link_pair *ln = (link_pair *)host_calloc(1, sizeof(link_pair), "the links");
    p2p_link *both[2] = {&ln->fwd, &ln->bwd};
    for (int k = 0; k < 2; k++) {
        if (k == 1 && grouping == P2P_PAIRS) {
            ln->bwd.comm = ln->fwd.comm;  // one communicator: a send and a receive in one group are one kernel
            CUDA_CHECK(cudaStreamCreateWithPriority(&ln->bwd.stream, cudaStreamNonBlocking, dev->priority_greatest));
            continue;
        }
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
    if (pp->ln->bwd.comm == pp->ln->fwd.comm) pp->ln->bwd.comm = NULL;  // --p2p-group pairs: one, closed once
    for (int k = 0; k < 2; k++) {
        if (both[k]->comm) dist_close(pp->dist, &both[k]->comm);
        CUDA_CHECK(cudaStreamDestroy(both[k]->stream));
    }
    free(pp->ln);
    pp->ln = NULL;
}

// ----------------------------------------------------------------------------
// --p2p-group pairs: a send and the receive after it in one group

static int is_send(crossing kind) { return kind == ACT_SENT || kind == ERROR_SENT; }

void links_group_close(pipeline *pp)
{
    if (!pp->group_open) return;
    NCCL_CHECK(pp->dist, ncclGroupEnd());  // the send's kernel is queued only now
    pp->group_open = 0;
    if (pp->sent_event) CUDA_CHECK(cudaEventRecord(pp->sent_event, pp->sent_stream));
    pp->sent_event = NULL;
}

// A send ends the group of an earlier send that found no receive, then opens its own; a receive
// joins the open group, if any, and ends it: NCCL then queues one kernel doing both, which waits
// for both streams (NCCL's "mixing multiple streams within the same group").
void hand_over_begin(schedule_run *sched, crossing kind)
{
    pipeline *pp = sched->pp;
    if (pp->grouping != P2P_PAIRS || !is_send(kind)) return;
    links_group_close(pp);
    NCCL_CHECK(pp->dist, ncclGroupStart());
    pp->group_open = 1;
}

void hand_over_end(schedule_run *sched, crossing kind)
{
    pipeline *pp = sched->pp;
    if (is_send(kind) || !pp->group_open) return;
    sched->pairs++;
    links_group_close(pp);
}

void hand_over_record(pipeline *pp, cudaEvent_t event, cudaStream_t stream)
{
    if (!pp->group_open) {
        CUDA_CHECK(cudaEventRecord(event, stream));
        return;
    }
    pp->sent_event = event;
    pp->sent_stream = stream;
}
