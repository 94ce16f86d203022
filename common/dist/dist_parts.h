// dist_parts.h: what the files of the bootstrap call in one another, layer by layer: each file
// uses only the ones above it here (and common's base: timing.c's clocks). dist_notes.c, then
// dist_stop.c, then dist_rendezvous.c and dist_watchdog.c, then dist_watch.c, then dist_env.c and
// dist_connect.c. Not for the lessons: they include dist.h.
#ifndef COMMON_DIST_PARTS_H
#define COMMON_DIST_PARTS_H

#include "common/dist/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

// dist_notes.c: the failure notes in the folder (those of other runs are skipped)
// Writes `text` to `path` whole (a temporary file, fsync, rename); returns 0 on success.
int dist_write_whole(const char *path, const char *text);
void dist_write_note(const dist_env *d, const char *message);
int dist_failed_rank(const dist_env *d, char *message, size_t size);  // the lowest other rank's note, or -1
void dist_note_early_exit(dist_env *d);                               // registers the atexit handler that leaves a note

// dist_stop.c: how a rank stops. Only one of the main thread and the watchdog says why: the one
// that claims the stop first (1), which runs the stop hook (lesson 14's flight recorder) first.
int dist_claim_stop(dist_env *d);
// The message of a rank that gives up after --timeout-s while `what`, left as its note too.
void dist_note_timeout(const dist_env *d, const char *what, char *message, size_t size);

// dist_rendezvous.c: rank 0's NCCL id (dist.h: dist_write_id, dist_read_id), removed once every
// rank has read it.
void dist_remove_id(const dist_env *d);

// dist_watchdog.c: the watchdog thread
void dist_watchdog_start(dist_env *d);
void dist_watchdog_stop(dist_env *d);

#ifdef __cplusplus
}
#endif
#endif
