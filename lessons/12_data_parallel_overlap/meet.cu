// STUDENT VERSION of solutions/12_data_parallel_overlap/meet.cu, made by `make lessons` (checksum 604501354)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// meet.cu (lesson 12): how the ranks meet. Every rank is a process of its own, started by a
// launcher on some machine; before any collective they must form one NCCL communicator, and
// for that they need one secret in common: the unique id that rank 0 asks NCCL for. Rank 0
// leaves it in the rendezvous folder, which every rank sees; the others wait for it there.
// Then every rank joins the communicator with that id, its rank and the number of ranks.
//
// The communicator is non-blocking: each NCCL call returns at once, and the rank polls until
// NCCL is done. A blocking call could wait forever on a rank that died; a polled one gives up
// when another rank leaves a failure note, or when --timeout-s passes (common/dist/dist.h).
// The lessons after this one meet with common/dist's dist_connect, these steps in one call; the
// gradients' communicator, split from this one, is the library's (ddp_open_gradient_comm).
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
