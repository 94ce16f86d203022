// meet.cu (lesson 12): how the ranks meet. Every rank is a process of its own, started by a
// launcher on some machine; before any collective they must form one NCCL communicator, and
// for that they need one secret in common: the unique id that rank 0 asks NCCL for. Rank 0
// leaves it in the rendezvous folder, which every rank sees; the others wait for it there.
// Then every rank joins the communicator with that id, its rank and the number of ranks.
//
// The communicator is non-blocking: each NCCL call returns at once, and the rank polls until
// NCCL is done. A blocking call could wait forever on a rank that died; a polled one gives up
// when another rank leaves a failure note, or when --timeout-s passes (common/dist/dist.h).
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

void meet_ranks(dist_env *d)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    dist_meet_begin(d);  // from here an early exit leaves a note, so that the others stop at once
    if (d->rank == 0) {
        NCCL_CHECK(d, ncclGetUniqueId(&id));  // where rank 0 listens, and a random key
        dist_write_id(d, &id);
    } else {
        dist_read_id(d, &id);  // waits until this run's id is in the folder
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once: this rank polls, and can give up
    ncclComm_t comm = NULL;
    ncclResult_t state = ncclCommInitRankConfig(&comm, d->world, id, d->rank, &config);
    dist_watch(d, comm, "the parent communicator");  // polled, and aborted on a failure, from now on
    // ncclInProgress: NCCL's own thread is connecting the ranks; poll (ncclCommGetAsyncError)
    // until it answers ncclSuccess, or an error
    if (state == ncclInProgress) state = dist_wait_issued(d, "connecting the ranks");
    if (state != ncclSuccess)
        dist_abort(d, "ncclCommInitRankConfig failed: %s (%s)", ncclGetErrorString(state), ncclGetLastError(comm));
    dist_connected(d, comm);  // every rank says which GPU it runs on: several on one are simulated nodes
}

// The communicator of the gradients' all-reduces, split from the parent (every rank in it, in the
// same order). A blocking one: once connected, ncclAllReduce only queues its kernel and returns,
// where a non-blocking communicator issues every call from a thread of its own (measured: 0.13 ms a
// call beside 0.02, and far more under a tracer: notes/12). What could block is watched all the
// same: a connect or a finalize that waits for a rank that failed ends with its note or --timeout-s
// (dist_split_ready puts it in dist's watch), and an abort aborts it with the parent.
ncclComm_t open_gradient_comm(dist_env *d, const sm_sharing *sharing)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = sharing->nonblocking ? 0 : 1;  // --grad-comm, to measure the difference
    config.splitShare = 0;                           // resources of its own
    // An NCCL kernel holds an SM per CTA for as long as it runs, waiting for a peer included, and
    // the backward pass's products run beside it on what is left (notes/12, measured)
    if (sharing->comm_ctas > 0) {
        config.minCTAs = 1;
        config.maxCTAs = sharing->comm_ctas;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (sharing->efficiency) config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
#endif
    ncclComm_t grads = NULL;
    // a call on the non-blocking parent: it may answer before the new communicator exists
    NCCL_CHECK(d, ncclCommSplit(d->comm, 0, d->rank, &grads, &config));
    dist_split_ready(d, &grads, "the gradients' communicator");
    return grads;
}
