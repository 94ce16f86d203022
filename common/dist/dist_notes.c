// dist_notes.c: the failure notes the ranks leave in the rendezvous folder (dist.h), the lowest
// layer of the bootstrap: stopping (dist_stop.c), the rendezvous and the watches stand on it.
//
//   failed.RUN.rankR     rank R's failure note: "FINGERPRINT WRITTEN_S MESSAGE". Once the ranks
//                        share NCCL's id, its hash is the run's fingerprint and a note of another
//                        run never matches; a note written before its rank had the id (the
//                        fingerprint "-") counts only when written after this process started
//                        (a few seconds' slack), and never when dated in the future.
//
// Every file in the folder is written whole under a temporary name, then renamed: a rank that
// finds one finds all of it. The temporary file is made new, 0600, never through a link
// (own_file.h).
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // getpid

#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/base/own_file.h"  // own_file_create, own_file_publish
#include "common/base/timing.h"    // wall_clock_s

#define NOTE_SLACK_S 5.0  // a note without a fingerprint counts from this long before this process's start

static dist_env *at_exit_rank;  // the process's one rank, for the note of an early exit

int dist_write_whole(const char *path, const char *text)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = own_file_create(tmp);
    if (!f) return -1;
    fputs(text, f);
    return own_file_publish(f, tmp, path);  // a failed write shows in ferror
}

static void note_path(const dist_env *d, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/failed.%s.rank%d", d->folder, d->run, rank);
}

double dist_write_note(const dist_env *d, const char *message)
{
    double now = wall_clock_s();
    if (!d->folder[0] || d->world == 1) return now;
    char path[1200], text[800];
    note_path(d, d->rank, path, sizeof path);
    snprintf(text, sizeof text, "%s %.3f %s\n", d->fingerprint[0] ? d->fingerprint : "-", now, message);
    dist_write_whole(path, text);  // when it cannot be written, the others stop at their time limit
    return now;
}

// 1 when the note's text belongs to this run; its message into `message`, its date into *written.
static int note_is_ours(const dist_env *d, const char *text, char *message, size_t size, double *written_out)
{
    char fp[32];
    double written = 0;
    int at = 0;
    if (sscanf(text, "%31s %lf %n", fp, &written, &at) != 2) return 0;
    *written_out = written;
    snprintf(message, size, "%s", text + at);
    message[strcspn(message, "\n")] = '\0';
    // a fingerprint is the run's own once its id is shared: this rank has read it before any
    // rank of its run could fail with it (the id is read first, then the others connect)
    if (strcmp(fp, "-") != 0) return d->fingerprint[0] && strcmp(fp, d->fingerprint) == 0;
    return written >= d->started_s - NOTE_SLACK_S && written <= wall_clock_s() + NOTE_SLACK_S;
}

int dist_failed_rank(const dist_env *d, char *message, size_t size)
{
    double written;
    return dist_failed_rank_at(d, message, size, &written);
}

int dist_failed_rank_at(const dist_env *d, char *message, size_t size, double *written)
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
        if (got && note_is_ours(d, text, message, size, written)) return r;
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
