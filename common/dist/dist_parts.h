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

// How fast a stop is, by design: a polled wait looks for the others' notes every NOTE_EVERY_MS
// (dist_watch.c), the watchdog at the call in progress every WATCHDOG_EVERY_MS, and a stop (the
// abort, the exit) is given STOP_LIMIT_S from its start before the watchdog ends the process.
#define DIST_NOTE_EVERY_MS 50
#define DIST_WATCHDOG_EVERY_MS 20
#define DIST_STOP_LIMIT_S 5.0

// dist_notes.c: the failure notes in the folder (those of other runs are skipped)
// Writes `text` to `path` whole (a temporary file, fsync, rename); returns 0 on success.
int dist_write_whole(const char *path, const char *text);
double dist_write_note(const dist_env *d, const char *message);       // returns the time it is dated
int dist_failed_rank(const dist_env *d, char *message, size_t size);  // the lowest other rank's note, or -1
// As dist_failed_rank, and the time that note is dated into *written
int dist_failed_rank_at(const dist_env *d, char *message, size_t size, double *written);
void dist_note_early_exit(dist_env *d);  // registers the atexit handler that leaves a note

// dist_stop.c: how a rank stops. Only one of the main thread and the watchdog says why: the one
// that claims the stop first (1), which runs the stop hook (lesson 14's flight recorder) first.
int dist_claim_stop(dist_env *d);
// The message of a rank that gives up after --timeout-s while `what`, left as its note too.
void dist_note_timeout(const dist_env *d, const char *what, char *message, size_t size);
// The stop's timeline, one line on stderr: how the abort ended (its time, or why none).
void dist_say_timeline(const dist_env *d, const char *ended);

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
