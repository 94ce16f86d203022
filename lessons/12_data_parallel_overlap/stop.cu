// STUDENT VERSION of solutions/12_data_parallel_overlap/stop.cu, made by `make lessons` (checksum 303212528)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// stop.cu (lesson 12): how the ranks stop. A rank that fails must stop every rank: the others
// are waiting inside NCCL for its part, and a kernel that waits for a rank that died waits
// forever. So no host wait of the lesson blocks: it polls its event (common/dist's
// dist_event_wait, in dist_watch.c: the one wait of every lesson on several ranks), and meanwhile
// asks NCCL whether a communicator failed (ncclCommGetAsyncError), looks for a note another rank
// left in the rendezvous folder, and watches --timeout-s. On any of them the rank aborts its
// communicators (ncclCommAbort: NCCL's kernels stop waiting) and exits with code 1, one line
// naming the rank that failed (dist_fail). At a normal end, here, the ranks finalize each
// communicator together, then destroy it. The rank holds two: the parent (meet.cu) and the
// gradients' (split from it), both in d->comms, the parent first. The lessons after this one end
// with dist_finish, which does the same.
#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// A normal end: for each communicator, the last made first, every rank finalizes it (NCCL completes
// what was queued on it, on every rank), then destroys it.
void leave_ranks(dist_env *d)
{
    while (d->ncomms > 0) {
        ncclComm_t comm = d->comms[d->ncomms - 1];
        // blocking, or polled when non-blocking: NCCL_CHECK's watchdog ends a wait for a rank that failed
        NCCL_CHECK(d, ncclCommFinalize(comm));
        NCCL_CHECK(d, ncclCommDestroy(comm));
        dist_unwatch(d, comm);
    }
    dist_finish(d);  // nothing left open: the watchdog stops, and an exit from now on leaves no note
}
