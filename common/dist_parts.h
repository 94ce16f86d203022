// dist_parts.h: what the files of the bootstrap (dist_env.c, dist_rendezvous.c, dist_watch.c,
// dist_watchdog.c, dist_connect.c) call in one another. Not for the lessons: they include dist.h.
#ifndef COMMON_DIST_PARTS_H
#define COMMON_DIST_PARTS_H

#include <stdarg.h>  // va_list

#include "dist.h"

#ifdef __cplusplus
extern "C" {
#endif

double dist_wall_s(void);  // the wall clock: what files in a shared folder are dated by
double dist_mono_s(void);  // for time limits
long long dist_mono_ns(void);
void dist_nap_ms(int ms);

// dist_rendezvous.c: the files in the folder: rank 0's NCCL id (dist.h: dist_write_id,
// dist_read_id; removed once every rank has read it), and the failure notes (those of other
// runs are skipped).
void dist_remove_id(const dist_env *d);
void dist_write_note(const dist_env *d, const char *message);
int dist_failed_rank(const dist_env *d, char *message, size_t size);  // the lowest other rank's note, or -1
void dist_note_early_exit(dist_env *d);                               // registers the atexit handler that leaves a note

// dist_watch.c: what every wait checks; how a rank stops (only one of the main thread and the
// watchdog says why: the one that claims the stop first)
int dist_claim_stop(dist_env *d);
// The message of a rank that gives up after --timeout-s while `what`, left as its note too.
void dist_note_timeout(const dist_env *d, const char *what, char *message, size_t size);
void dist_say_stop(const dist_env *d, const char *fmt, va_list ap);
// dist_watchdog.c: the watchdog thread
void dist_watchdog_start(dist_env *d);
void dist_watchdog_stop(dist_env *d);

#ifdef __cplusplus
}
#endif
#endif
