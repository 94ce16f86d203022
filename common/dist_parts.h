// dist_parts.h: what the files of the bootstrap (dist_env.c, dist_rendezvous.c, dist_watch.c,
// dist_connect.c) call in one another. Not for the lessons: they include dist.h.
#ifndef COMMON_DIST_PARTS_H
#define COMMON_DIST_PARTS_H

#include "dist.h"

#ifdef __cplusplus
extern "C" {
#endif

double dist_wall_s(void);  // the wall clock: what files in a shared folder are dated by
double dist_mono_s(void);  // for time limits
void dist_nap_ms(int ms);

// dist_rendezvous.c: the files in the folder. Rank 0's NCCL id (ids of earlier runs are
// skipped), and the failure notes (those of other runs are skipped).
void dist_write_id(dist_env *d, const ncclUniqueId *id);
void dist_read_id(dist_env *d, ncclUniqueId *id);  // waits (watched), aborts at the time limit
void dist_remove_id(const dist_env *d);
void dist_write_note(const dist_env *d, const char *message);
int dist_failed_rank(const dist_env *d, char *message, size_t size);  // the lowest other rank's note, or -1
void dist_note_early_exit(dist_env *d);  // registers the atexit handler that leaves a note

// dist_watch.c: what every wait checks; the watchdog thread
void dist_watch(dist_env *d, ncclComm_t comm, const char *name);
void dist_watchdog_start(dist_env *d);
void dist_watchdog_stop(dist_env *d);
ncclResult_t dist_wait_issued(dist_env *d, const char *what);  // polls until no communicator is in progress

#ifdef __cplusplus
}
#endif
#endif
