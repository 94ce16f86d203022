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
#include "common/base/timing.h"  // host_now_ns, host_sleep_ms, wall_clock_s

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

static dist_env *timeline_rank;  // the process's rank that stops, for its timeline at exit

// The stop's timeline as the process exits: the abort is over (dist_fail, dist_abort, 12's stop_all
// call exit right after it)
static void say_timeline_at_exit(void)
{
    dist_env *d = timeline_rank;
    if (!d || !d->abort_s) return;
    dist_say_timeline(d, NULL);
}

int dist_claim_stop(dist_env *d)
{
    if (__atomic_exchange_n(&d->stopping, 1, __ATOMIC_SEQ_CST) != 0) return 0;
    d->stop_s = wall_clock_s();
    if (!timeline_rank && d->world > 1) {
        timeline_rank = d;
        atexit(say_timeline_at_exit);
    }
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

void dist_say_stop(dist_env *d, const char *message)
{
    char note[256];
    double written = 0;
    int r = dist_failed_rank_at(d, note, sizeof note, &written);
    if (r >= 0 && !d->note_s) {  // the stop answers this note
        d->note_s = written;
        d->note_rank = r;
    }
    if (r >= 0)
        stderr_line("%s: rank %d failed (%s); %s; aborting", d->name, r, note[0] ? note : "no reason given", message);
    else
        stderr_line("%s: %s; aborting", d->name, message);
    d->abort_s = wall_clock_s();
}

void dist_say_timeline(const dist_env *d, const char *ended)
{
    if (d->world == 1) return;
    double origin = d->note_s ? d->note_s : d->stop_s, now = wall_clock_s();
    char from[64], aborted[128];
    if (!d->note_s)
        snprintf(from, sizeof from, "its own stop");
    else if (d->note_rank == d->rank)
        snprintf(from, sizeof from, "its own note");
    else
        snprintf(from, sizeof from, "rank %d's note", d->note_rank);
    if (ended)
        snprintf(aborted, sizeof aborted, "%s", ended);
    else
        snprintf(aborted, sizeof aborted, "%+.3f", now - origin);
    stderr_line("%s: stop timeline, seconds from %s (wall clock %.3f): started %+.3f, stopping %+.3f, aborting %+.3f, "
                "aborted %s; notes looked for every %.3f s, the watchdog every %.3f s, a stop given %.1f s",
                d->name, from, origin, d->started_s - origin, d->stop_s - origin,
                d->abort_s ? d->abort_s - origin : 0.0, aborted, DIST_NOTE_EVERY_MS / 1e3, DIST_WATCHDOG_EVERY_MS / 1e3,
                DIST_STOP_LIMIT_S);
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
        d->note_s = dist_write_note(d, message);  // first: the others read it
        d->note_rank = d->rank;
        stderr_line("%s: %s", d->name, message);
        d->abort_s = wall_clock_s();
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
