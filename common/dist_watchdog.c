// dist_watchdog.c: the thread that watches the NCCL call in progress (dist_watch.c says why):
// a call that blocks cannot outlive another rank's failure note or --timeout-s (dist.h).
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>  // _exit

#include "dist.h"
#include "dist_parts.h"

#define WATCHDOG_EVERY_MS 20  // how often the watchdog looks at the call in progress
#define ABORT_LIMIT_S 5.0     // aborting every communicator may take this long; then the process ends

static void watchdog_end(dist_env *d, const char *fmt, ...)
{
    if (!dist_claim_stop(d)) return;
    va_list ap;
    va_start(ap, fmt);
    dist_say_stop(d, fmt, ap);
    va_end(ap);
    _exit(EXIT_FAILURE);  // the main thread is inside NCCL: end the process around it
}

static void *watchdog_main(void *arg)
{
    dist_env *d = (dist_env *)arg;
    while (!__atomic_load_n(&d->finished, __ATOMIC_ACQUIRE)) {
        dist_nap_ms(WATCHDOG_EVERY_MS);
        const char *what = __atomic_load_n(&d->inside, __ATOMIC_ACQUIRE);
        if (!what) continue;
        double in = (dist_mono_ns() - __atomic_load_n(&d->inside_since_ns, __ATOMIC_ACQUIRE)) / 1e9;
        if (__atomic_load_n(&d->stopping, __ATOMIC_ACQUIRE)) {
            if (in > ABORT_LIMIT_S) _exit(EXIT_FAILURE);  // the abort itself blocks: its message is out
            continue;
        }
        char note[256];
        if (dist_failed_rank(d, note, sizeof note) >= 0)
            watchdog_end(d, "noticed while inside %s", what);
        else if (in > d->timeout_s) {
            char message[300], inside[256];
            snprintf(inside, sizeof inside, "inside %s", what);
            dist_note_timeout(d, inside, message, sizeof message);
            watchdog_end(d, "%s", message);
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
