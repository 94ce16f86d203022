// stop.cu (lesson 12): how the ranks stop. A rank that fails must stop every rank: the others
// are waiting inside NCCL for its part, and a kernel that waits for a rank that died waits
// forever. So no host wait of the lesson blocks: it polls its event, and meanwhile asks NCCL
// whether a communicator failed (ncclCommGetAsyncError), looks for a note another rank left in
// the rendezvous folder, and watches --timeout-s. On any of them the rank aborts its
// communicators (ncclCommAbort: NCCL's kernels stop waiting) and exits with code 1, one line
// naming the rank that failed. At a normal end the ranks finalize each communicator together,
// then destroy it. The rank holds two: the parent (meet.cu) and the gradients' (split from it),
// both in d->comms, the parent first.
//
// common/dist/dist.h does the same for every NCCL call (NCCL_CHECK polls a call that answers
// ncclInProgress, a watchdog thread watches one that blocks) and for the lessons after this one.
#include <sched.h>  // sched_yield
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// Another rank failed, NCCL did, or the time ran out: this rank stops, and its NCCL kernels too.
void stop_all(dist_env *d, const char *fmt, ...)
{
    dist_stop_begin(d);  // this thread stops the rank: the watchdog, or an earlier stop, ends the process here
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    dist_say_stop(d, message);  // one line, naming the rank that failed first when one left a note
    // their kernels stop waiting for a rank that will never come; the answers do not matter: we exit
    for (int k = d->ncomms - 1; k >= 0; k--) ncclCommAbort(d->comms[k]);
    exit(EXIT_FAILURE);
}

// The host's wait for `event`, polled: what HOST_SYNC, SLOT_WAIT and the loss ring wait in
// (the loss ring passes `dist` as a void pointer). Returns cudaSuccess or the CUDA error.
cudaError_t wait_polled(void *dist, cudaEvent_t event)
{
    dist_env *d = (dist_env *)dist;
    dist_waiting w = dist_waiting_start("waiting for the GPU");
    char why[300];
    for (;;) {
        cudaError_t done = cudaEventQuery(event);
        if (done != cudaErrorNotReady) return done;
        for (int k = 0; k < d->ncomms; k++) {
            ncclResult_t state = ncclSuccess;
            ncclResult_t asked = ncclCommGetAsyncError(d->comms[k], &state);
            if (asked != ncclSuccess) stop_all(d, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(asked));
            // ncclInProgress: NCCL is still issuing a call (a non-blocking communicator), no error
            if (state != ncclSuccess && state != ncclInProgress)
                stop_all(d, "NCCL reported %s on %s while this rank was waiting for the GPU (%s)",
                         ncclGetErrorString(state), d->comm_names[k], ncclGetLastError(d->comms[k]));
        }
        if (dist_waiting_over(d, &w, why, sizeof why)) stop_all(d, "%s", why);  // a note, or --timeout-s
        sched_yield();
    }
}

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
