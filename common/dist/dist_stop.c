// dist_stop.c: how a rank stops (dist.h), above the notes and below everything that decides to
// stop (the rendezvous, the watches, the watchdog). Only one thread says why the rank stops: the
// main thread or the watchdog, whichever claims the stop first.
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>  // _exit

#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/base/timing.h"  // host_now_ns, host_sleep_ms

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

int dist_claim_stop(dist_env *d)
{
    if (__atomic_exchange_n(&d->stopping, 1, __ATOMIC_SEQ_CST) != 0) return 0;
    // from here the watchdog gives the stop a few seconds, then ends the process around it
    __atomic_store_n(&d->inside_since_ns, host_now_ns(), __ATOMIC_RELEASE);
    __atomic_store_n(&d->inside, "the stop", __ATOMIC_RELEASE);
    if (d->on_stop) d->on_stop(d->on_stop_ctx);  // lesson 14's flight recorder writes its ring
    return 1;
}

void dist_stop_begin(dist_env *d)
{
    if (dist_claim_stop(d)) return;
    host_sleep_ms(1000);  // the watchdog, or an error while stopping: its message is out, the process ends
    _exit(EXIT_FAILURE);
}

void dist_say_stop(const dist_env *d, const char *message)
{
    char note[256];
    int r = dist_failed_rank(d, note, sizeof note);
    if (r >= 0)
        stderr_line("%s: rank %d failed (%s); %s; aborting", d->name, r, note[0] ? note : "no reason given", message);
    else
        stderr_line("%s: %s; aborting", d->name, message);
}

void dist_note_timeout(const dist_env *d, const char *what, char *message, size_t size)
{
    snprintf(message, size,
             "nothing happened for %.0f s while %s: a rank may have died or hung without a note "
             "(--timeout-s)",
             d->timeout_s, what);
    dist_write_note(d, message);
}

// ncclCommAbort of every communicator, the last made first: NCCL's kernels stop waiting for a
// rank that will never come. The watchdog ends the process if this itself blocks.
static void abort_all(dist_env *d)
{
    for (int k = d->ncomms - 1; k >= 0; k--) ncclCommAbort(d->comms[k]);  // the answers do not matter: we exit
    d->ncomms = 0;
    d->comm = NULL;
}

// dist_abort's and dist_fail's stop: this thread claims it, formats why, leaves a note for the
// others (this rank failed) or not (it stops because of what it saw), says so in one line,
// aborts every communicator and ends the process. It never returns: the va_list ends with it.
static _Noreturn void stop_with(dist_env *d, int leave_note, const char *fmt, va_list ap)
{
    dist_stop_begin(d);
    char message[512];
    vsnprintf(message, sizeof message, fmt, ap);
    if (leave_note) {
        dist_write_note(d, message);  // first: the others read it
        stderr_line("%s: %s", d->name, message);
    } else {
        dist_say_stop(d, message);
    }
    abort_all(d);
    exit(EXIT_FAILURE);
}

void dist_abort(dist_env *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_with(d, 0, fmt, ap);
}

void dist_fail(dist_env *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_with(d, 1, fmt, ap);
}
