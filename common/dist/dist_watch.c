// dist_watch.c: every communicator a rank holds, watched in one place (dist.h).
//
// Two watchers. The main thread's own waits (dist_event_wait, and the polls of a call that
// answered ncclInProgress) ask every communicator for an asynchronous error, look for the
// others' failure notes, and watch --timeout-s; on any of them the rank aborts every
// communicator and exits. But a call can also block inside NCCL (a blocking communicator's
// first send connects to its peer, its finalize waits for it; an abort may wait too), and then
// the main thread watches nothing: a watchdog thread (dist_watchdog.c) watches the call in
// progress, and when a note appears or --timeout-s passes, it says why and ends the process (the
// operating system closes what NCCL held; the others see the note, NCCL's error or their own
// time limit).
#define _POSIX_C_SOURCE 200809L
#include <sched.h>  // sched_yield
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/check.h"  // CUDA_CHECK
#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/gpu/kernels.h"  // launch_spin
#include "common/base/timing.h"  // host_now_ms, host_now_ns, host_sleep_ms

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

#define HANG_NS 3600000000000LL  // dist_hang's kernel: an hour

// ----------------------------------------------------------------------------
// the communicators

void dist_watch(dist_env *d, ncclComm_t comm, const char *name)
{
    if (!comm) return;  // NCCL wrote none: the call that makes it failed at once
    if (d->ncomms == DIST_MAX_COMMS) dist_abort(d, "more than %d communicators to watch", DIST_MAX_COMMS);
    d->comms[d->ncomms] = comm;
    d->comm_names[d->ncomms++] = name;
}

void dist_unwatch(dist_env *d, ncclComm_t comm)
{
    int k = 0;
    while (k < d->ncomms && d->comms[k] != comm) k++;
    if (k == d->ncomms) return;
    for (; k + 1 < d->ncomms; k++) {
        d->comms[k] = d->comms[k + 1];
        d->comm_names[k] = d->comm_names[k + 1];
    }
    d->ncomms--;
    if (d->comm == comm) d->comm = NULL;
}

// ----------------------------------------------------------------------------
// what every polled wait checks

dist_waiting dist_waiting_start(const char *what)
{
    double now = host_now_ms();
    dist_waiting w = {now, now + DIST_NOTE_EVERY_MS, what, 1};
    return w;
}

int dist_waiting_over(dist_env *d, dist_waiting *w, char *why, size_t size)
{
    double now = host_now_ms();
    if (now >= w->next_note_ms) {
        char note[256];
        if (dist_failed_rank(d, note, sizeof note) >= 0) {
            snprintf(why, size, "noticed while %s", w->what);
            return 1;
        }
        w->next_note_ms = now + DIST_NOTE_EVERY_MS;
    }
    if (!w->timed || now - w->since_ms <= d->timeout_s * 1e3) return 0;
    // the note says so, and the others (the one that hangs too) quote it when they stop
    dist_note_timeout(d, w->what, why, size);
    return 1;
}

// The others' notes and the time limit: this rank stops on either.
static void watch_notes_and_time(dist_env *d, dist_waiting *w)
{
    char why[300];
    if (dist_waiting_over(d, w, why, sizeof why)) dist_abort(d, "%s", why);
}

// Every communicator's asynchronous state: ncclSuccess, ncclInProgress (one is still issuing a
// call), or the first error. Aborts when NCCL cannot be asked.
static ncclResult_t comms_state(dist_env *d, int *which)
{
    ncclResult_t worst = ncclSuccess;
    for (int k = 0; k < d->ncomms; k++) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(d->comms[k], &state);
        if (r != ncclSuccess)
            dist_abort(d, "ncclCommGetAsyncError on %s failed: %s", d->comm_names[k], ncclGetErrorString(r));
        if (state != ncclSuccess && state != ncclInProgress) {
            *which = k;
            return state;
        }
        if (state == ncclInProgress) worst = ncclInProgress;
    }
    return worst;
}

void dist_waiting_watch(dist_env *d, dist_waiting *w)
{
    int k = 0;
    ncclResult_t state = comms_state(d, &k);
    if (state != ncclSuccess && state != ncclInProgress)
        dist_abort(d, "NCCL reported %s on %s while this rank was %s (%s)", ncclGetErrorString(state), d->comm_names[k],
                   w->what, ncclGetLastError(d->comms[k]));
    watch_notes_and_time(d, w);
}

ncclResult_t dist_wait_issued(dist_env *d, const char *what)
{
    dist_waiting w = dist_waiting_start(what);
    for (;;) {
        int k = 0;
        ncclResult_t state = comms_state(d, &k);
        if (state != ncclInProgress) return state;
        watch_notes_and_time(d, &w);
        sched_yield();
    }
}

cudaError_t dist_event_wait(dist_env *d, cudaEvent_t event)
{
    dist_waiting w = dist_waiting_start("waiting for the GPU");
    for (;;) {
        cudaError_t err = cudaEventQuery(event);
        if (err != cudaErrorNotReady) return err;
        dist_waiting_watch(d, &w);
        sched_yield();
    }
}

cudaError_t dist_polled_wait(void *d, cudaEvent_t event) { return dist_event_wait((dist_env *)d, event); }

void dist_hang(dist_env *d, cudaStream_t stream, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    stderr_line("%s: %s", d->name, message);
    cudaEvent_t never;
    CUDA_CHECK(cudaEventCreateWithFlags(&never, cudaEventDisableTiming));
    launch_spin(1, 32, HANG_NS, stream);
    CUDA_CHECK(cudaEventRecord(never, stream));
    // no time limit here: a rank that hangs does not know it; the others time out, leave their
    // notes, and this wait reads them (or NCCL's error once they are gone)
    dist_waiting w = dist_waiting_start("hanging");
    w.timed = 0;
    while (cudaEventQuery(never) == cudaErrorNotReady) {
        dist_waiting_watch(d, &w);
        host_sleep_ms(1);
    }
    dist_abort(d, "the hanging kernel ended");
}

// ----------------------------------------------------------------------------
// NCCL's calls, watched

void dist_enter_(dist_env *d, const char *expr)
{
    __atomic_store_n(&d->inside_since_ns, host_now_ns(), __ATOMIC_RELEASE);
    __atomic_store_n(&d->inside, expr, __ATOMIC_RELEASE);
}

void dist_check_nccl_(dist_env *d, ncclResult_t result, const char *expr, const char *file, int line)
{
    __atomic_store_n(&d->inside, (const char *)NULL, __ATOMIC_RELEASE);  // back: the main thread watches again
    if (result == ncclInProgress) result = dist_wait_issued(d, "NCCL issued a call");
    if (result != ncclSuccess)
        dist_abort(d, "%s:%d: %s failed: %s (%s)", file, line, expr, ncclGetErrorString(result),
                   ncclGetLastError(d->comm));
}

void dist_split_ready(dist_env *d, ncclComm_t *child, const char *name)
{
    // with a non-blocking parent, NCCL's thread writes *child when the new communicator exists
    ncclResult_t r = dist_wait_issued(d, "splitting a communicator");
    dist_waiting w = dist_waiting_start("splitting a communicator");
    while (r == ncclSuccess && __atomic_load_n(child, __ATOMIC_ACQUIRE) == NULL) {
        dist_waiting_watch(d, &w);
        sched_yield();
    }
    if (r == ncclSuccess) {
        dist_watch(d, *child, name);
        r = dist_wait_issued(d, "splitting a communicator");
    }
    if (r != ncclSuccess)
        dist_abort(d, "ncclCommSplit failed: %s (%s)", ncclGetErrorString(r), ncclGetLastError(d->comm));
}

void dist_close(dist_env *d, ncclComm_t *comm)
{
    ncclComm_t c = *comm;
    if (!c) return;
    NCCL_CHECK(d, ncclCommFinalize(c));  // completes once every rank's work on it is done
    NCCL_CHECK(d, ncclCommDestroy(c));
    dist_unwatch(d, c);
    *comm = NULL;
}

void dist_finish(dist_env *d)
{
    while (d->ncomms > 0) {  // the last made first: the parent last
        ncclComm_t c = d->comms[d->ncomms - 1];
        dist_close(d, &c);
    }
    d->finished = 1;
    dist_watchdog_stop(d);
}
