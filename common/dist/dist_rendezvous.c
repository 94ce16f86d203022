// dist_rendezvous.c: rank 0's NCCL id in the rendezvous folder (dist.h), above the notes and the
// stop: a rank that waits for the id gives up on another's note or at --timeout-s.
//
//   nccl-id.RUN          rank 0's NCCL unique id, the time it was written, and the run's rank
//                        count: "HEX WRITTEN_S WORLD". An id written long before this process
//                        started is an earlier run's (a crash leaves one): never read; nor is
//                        one dated later than now (beyond the clocks' slack): a date in the
//                        future would make a stale file look fresh for ever.
//
// It is written whole under a temporary name, then renamed (dist_write_whole): a rank that finds
// it finds all of it.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // unlink

#include "common/base/args.h"  // usage_error
#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/base/timing.h"  // wall_clock_s, host_now_ms, host_sleep_ms

#define ID_MAX_AGE_S 60.0  // the ranks of one run start within this of each other: an older id is stale
#define ID_POLL_MS 10      // how often the other ranks look for rank 0's id file

static void id_path(const dist_env *d, char *out, size_t size)
{
    snprintf(out, size, "%s/nccl-id.%s", d->folder, d->run);
}

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
    snprintf(text + n, sizeof text - n, " %.3f %d\n", wall_clock_s(), d->world);
    id_path(d, path, sizeof path);
    if (dist_write_whole(path, text) != 0) dist_fail(d, "cannot write %s: %s", path, strerror(errno));
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
    if (!(written >= d->started_s - ID_MAX_AGE_S && written <= wall_clock_s() + ID_MAX_AGE_S))
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
    double since = host_now_ms();
    int world = 0, stale = 0;
    id_state s;
    while ((s = read_id_file(d, path, id, &world)) != ID_OK) {
        stale = stale || s == ID_STALE;
        if (dist_failed_rank(d, message, sizeof message) >= 0)
            dist_abort(d, "noticed while waiting for rank 0's NCCL id");
        if (host_now_ms() - since > d->timeout_s * 1e3)
            dist_abort(d,
                       "rank 0's NCCL id did not appear in %s within %.0f s%s: is rank 0 running, and does it see "
                       "the same folder? (--timeout-s)",
                       path, d->timeout_s,
                       stale ? " (an id of an earlier run, or dated in the future, is there and was skipped)" : "");
        host_sleep_ms(ID_POLL_MS);
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
