// dist_rendezvous.c: the files the ranks share in the rendezvous folder (dist.h).
//
//   nccl-id.RUN          rank 0's NCCL unique id, the time it was written, and the run's rank
//                        count: "HEX WRITTEN_S WORLD". An id written long before this process
//                        started is an earlier run's (a crash leaves one): never read; nor is
//                        one dated later than now (beyond the clocks' slack): a date in the
//                        future would make a stale file look fresh for ever.
//   failed.RUN.rankR     rank R's failure note: "FINGERPRINT WRITTEN_S MESSAGE". Once the ranks
//                        share NCCL's id, its hash is the run's fingerprint and a note of another
//                        run never matches; a note written before its rank had the id (the
//                        fingerprint "-") counts only when written after this process started
//                        (a few seconds' slack), and never when dated in the future.
//
// Every file is written whole under a temporary name, then renamed: a rank that finds one
// finds all of it. The temporary file is made new, 0600, never through a link (own_file.h).
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // getpid, unlink, fsync

#include "args.h"  // usage_error
#include "dist.h"
#include "dist_parts.h"
#include "own_file.h"  // own_file_create

#define ID_MAX_AGE_S 60.0  // the ranks of one run start within this of each other: an older id is stale
#define NOTE_SLACK_S 5.0   // a note without a fingerprint counts from this long before this process's start
#define ID_POLL_MS 10      // how often the other ranks look for rank 0's id file

static dist_env *at_exit_rank;  // the process's one rank, for the note of an early exit

static void id_path(const dist_env *d, char *out, size_t size)
{
    snprintf(out, size, "%s/nccl-id.%s", d->folder, d->run);
}

static void note_path(const dist_env *d, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/failed.%s.rank%d", d->folder, d->run, rank);
}

// Writes `text` to `path` whole (a temporary file, fsync, rename); returns 0 on success.
static int write_whole(const char *path, const char *text)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = own_file_create(tmp);
    if (!f) return -1;
    int bad = fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad = fclose(f) != 0 || bad;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// rank 0's id

// FNV-1a of the id: the run's fingerprint, the same on every rank that holds this id.
static void fingerprint_of(const ncclUniqueId *id, char *out, size_t size)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < sizeof id->internal; k++) h = (h ^ (unsigned char)id->internal[k]) * 1099511628211ULL;
    snprintf(out, size, "%016llx", (unsigned long long)h);
}

void dist_write_id(dist_env *d, const ncclUniqueId *id)
{
    fingerprint_of(id, d->fingerprint, sizeof d->fingerprint);
    if (d->world == 1) return;
    char path[1200], text[2 * sizeof id->internal + 64];
    size_t n = 0;
    for (size_t k = 0; k < sizeof id->internal; k++)
        n += (size_t)sprintf(text + n, "%02x", (unsigned char)id->internal[k]);
    snprintf(text + n, sizeof text - n, " %.3f %d\n", dist_wall_s(), d->world);
    id_path(d, path, sizeof path);
    if (write_whole(path, text) != 0) dist_fail(d, "cannot write %s: %s", path, strerror(errno));
}

typedef enum { ID_NONE, ID_OK, ID_STALE } id_state;

// Reads the id file: ID_NONE (missing or partial), ID_STALE (written before this run), ID_OK.
static id_state read_id_file(const dist_env *d, const char *path, ncclUniqueId *id, int *world)
{
    FILE *f = fopen(path, "r");
    if (!f) return ID_NONE;
    char line[2 * sizeof id->internal + 64];
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    double written = 0;
    if (!got || strlen(line) < 2 * sizeof id->internal ||
        sscanf(line + 2 * sizeof id->internal, "%lf %d", &written, world) != 2)
        return ID_NONE;
    if (!(written >= d->started_s - ID_MAX_AGE_S && written <= dist_wall_s() + ID_MAX_AGE_S))
        return ID_STALE;  // nan too
    for (size_t k = 0; k < sizeof id->internal; k++) {
        unsigned v = 0;
        if (sscanf(line + 2 * k, "%2x", &v) != 1) return ID_NONE;
        id->internal[k] = (char)v;
    }
    return ID_OK;
}

void dist_read_id(dist_env *d, ncclUniqueId *id)
{
    char path[1200], message[256];
    id_path(d, path, sizeof path);
    double since = dist_mono_s();
    int world = 0, stale = 0;
    id_state s;
    while ((s = read_id_file(d, path, id, &world)) != ID_OK) {
        stale = stale || s == ID_STALE;
        if (dist_failed_rank(d, message, sizeof message) >= 0)
            dist_abort(d, "noticed while waiting for rank 0's NCCL id");
        if (dist_mono_s() - since > d->timeout_s)
            dist_abort(d,
                       "rank 0's NCCL id did not appear in %s within %.0f s%s: is rank 0 running, and does it see "
                       "the same folder? (--timeout-s)",
                       path, d->timeout_s,
                       stale ? " (an id of an earlier run, or dated in the future, is there and was skipped)" : "");
        dist_nap_ms(ID_POLL_MS);
    }
    if (world != d->world)
        usage_error(d->name,
                    "%s: the run whose id is there has %d ranks, this rank was started as one of %d (two runs "
                    "in one folder under one RUN_ID?)",
                    path, world, d->world);
    fingerprint_of(id, d->fingerprint, sizeof d->fingerprint);
}

void dist_remove_id(const dist_env *d)
{
    char path[1200];
    id_path(d, path, sizeof path);
    unlink(path);
}

// ----------------------------------------------------------------------------
// failure notes

void dist_write_note(const dist_env *d, const char *message)
{
    if (!d->folder[0] || d->world == 1) return;
    char path[1200], text[800];
    note_path(d, d->rank, path, sizeof path);
    snprintf(text, sizeof text, "%s %.3f %s\n", d->fingerprint[0] ? d->fingerprint : "-", dist_wall_s(), message);
    write_whole(path, text);  // when it cannot be written, the others stop at their time limit
}

// 1 when the note's text belongs to this run; its message into `message`.
static int note_is_ours(const dist_env *d, const char *text, char *message, size_t size)
{
    char fp[32];
    double written = 0;
    int at = 0;
    if (sscanf(text, "%31s %lf %n", fp, &written, &at) != 2) return 0;
    snprintf(message, size, "%s", text + at);
    message[strcspn(message, "\n")] = '\0';
    // a fingerprint is the run's own once its id is shared: this rank has read it before any
    // rank of its run could fail with it (the id is read first, then the others connect)
    if (strcmp(fp, "-") != 0) return d->fingerprint[0] && strcmp(fp, d->fingerprint) == 0;
    return written >= d->started_s - NOTE_SLACK_S && written <= dist_wall_s() + NOTE_SLACK_S;
}

int dist_failed_rank(const dist_env *d, char *message, size_t size)
{
    if (!d->folder[0]) return -1;
    for (int r = 0; r < d->world; r++) {
        char path[1200], text[800];
        if (r == d->rank) continue;
        note_path(d, r, path, sizeof path);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int got = fgets(text, sizeof text, f) != NULL;
        fclose(f);
        if (got && note_is_ours(d, text, message, size)) return r;
    }
    return -1;
}

// A rank that exits between the rendezvous and dist_finish (a CUDA error, a failed check)
// leaves a note, so that the others stop now rather than at the time limit. Before the
// rendezvous every rank fails alike (the same options, the same checks): no note then.
static void leave_note_at_exit(void)
{
    dist_env *d = at_exit_rank;
    if (!d || !d->connecting || d->finished || __atomic_load_n(&d->stopping, __ATOMIC_ACQUIRE) || d->world == 1) return;
    dist_write_note(d, "exited before the end of the run (its own message says why)");
}

void dist_note_early_exit(dist_env *d)
{
    at_exit_rank = d;
    atexit(leave_note_at_exit);
}
