// dist_watchdog.c: the thread that watches the NCCL call in progress (dist_watch.c says why):
// a call that blocks cannot outlive another rank's failure note or --timeout-s, and a stop that
// blocks (an abort) cannot last more than a few seconds (dist.h). It stands on the notes and the
// stop (dist_notes.c, dist_stop.c).
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>  // _exit

#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/base/timing.h"  // host_now_ns, host_sleep_ms

static void watchdog_end(dist_env *d, const char *message)
{
    if (!dist_claim_stop(d)) return;
    dist_say_stop(d, message);
    dist_say_timeline(d, "none: the watchdog ended the process, its main thread inside NCCL");
    _exit(EXIT_FAILURE);  // the main thread is inside NCCL: end the process around it
}

static void *watchdog_main(void *arg)
{
    dist_env *d = (dist_env *)arg;
    while (!__atomic_load_n(&d->finished, __ATOMIC_ACQUIRE)) {
        host_sleep_ms(DIST_WATCHDOG_EVERY_MS);
        const char *what = __atomic_load_n(&d->inside, __ATOMIC_ACQUIRE);
        if (!what) continue;
        double in = (host_now_ns() - __atomic_load_n(&d->inside_since_ns, __ATOMIC_ACQUIRE)) / 1e9;
        if (__atomic_load_n(&d->stopping, __ATOMIC_ACQUIRE)) {
            if (in > DIST_STOP_LIMIT_S) {  // the abort or the exit blocks: its message is out
                dist_say_timeline(d, "not over after the stop's limit: the watchdog ended the process");
                _exit(EXIT_FAILURE);
            }
            continue;
        }
        char note[256], message[300], inside[256];
        snprintf(inside, sizeof inside, "inside %s", what);
        if (dist_failed_rank(d, note, sizeof note) >= 0) {
            snprintf(message, sizeof message, "noticed while %s", inside);
            watchdog_end(d, message);
        } else if (in > d->timeout_s) {
            dist_note_timeout(d, inside, message, sizeof message);
            watchdog_end(d, message);
        }
    }
    return NULL;
}

void dist_watchdog_start(dist_env *d)
{
    if (d->watchdog_running) return;
    if (pthread_create(&d->watchdog, NULL, watchdog_main, d) != 0) dist_fail(d, "cannot start the watchdog thread");
    d->watchdog_running = 1;
}

void dist_watchdog_stop(dist_env *d)
{
    if (!d->watchdog_running) return;
    __atomic_store_n(&d->finished, 1, __ATOMIC_RELEASE);
    pthread_join(d->watchdog, NULL);
    d->watchdog_running = 0;
}
