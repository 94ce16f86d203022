// flight.c: flight recorder rings as files, and their first divergence (flight.h).
#define _POSIX_C_SOURCE 200809L
#include "flight.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // getpid, unlink, fsync

static const char *const OP_NAMES[FLIGHT_OPS] = {"all-reduce", "all-gather", "send", "recv"};

const char *flight_op_name(int op) { return op >= 0 && op < FLIGHT_OPS ? OP_NAMES[op] : "?"; }

static int op_parse(const char *word)
{
    for (int k = 0; k < FLIGHT_OPS; k++)
        if (strcmp(word, OP_NAMES[k]) == 0) return k;
    return -1;
}

static int is_p2p(int op) { return op == FLIGHT_SEND || op == FLIGHT_RECV; }

static void size_text(long long bytes, char *out, size_t size)
{
    if (bytes >= 1048576)
        snprintf(out, size, "%.1f MiB", bytes / 1048576.0);
    else if (bytes >= 1024)
        snprintf(out, size, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(out, size, "%lld B", bytes);
}

void flight_describe(const flight_entry *e, char *out, size_t size)
{
    char bytes[32], part[48] = "";
    size_text(e->bytes, bytes, sizeof bytes);
    if (e->part >= 0) snprintf(part, sizeof part, "%s %d, ", is_p2p(e->op) ? "micro-batch" : "bucket", e->part);
    if (e->op == FLIGHT_SEND)
        snprintf(out, size, "send #%lld to rank %d (batch %lld, %s%s)", e->index, e->peer, e->batch, part, bytes);
    else if (e->op == FLIGHT_RECV)
        snprintf(out, size, "recv #%lld from rank %d (batch %lld, %s%s)", e->index, e->peer, e->batch, part, bytes);
    else
        snprintf(out, size, "%s #%lld (batch %lld, %s%s)", flight_op_name(e->op), e->index, e->batch, part, bytes);
}

// ----------------------------------------------------------------------------
// the files

int flight_write(const char *path, const flight_ring *r)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "flight-recorder 1\nrank %d world %d run %s calls %lld slots %d\nstopped %s\n", r->rank, r->world,
            r->run[0] ? r->run : "-", r->calls, r->slots, r->stopped[0] ? r->stopped : "-");
    fprintf(f, "seq index op batch part count bytes peer stream fired\n");
    for (int k = 0; k < r->n; k++) {
        const flight_entry *e = &r->entries[k];
        fprintf(f, "%lld %lld %s %lld %d %lld %lld %d %s %d\n", e->seq, e->index, flight_op_name(e->op), e->batch,
                e->part, e->count, e->bytes, e->peer, e->stream[0] ? e->stream : "-", e->fired);
    }
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad = fclose(f) != 0 || bad;
    if (bad || rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

static int fail_read(FILE *f, flight_ring *r, char *why, size_t size, const char *path, const char *what, long line)
{
    if (f) fclose(f);
    flight_free(r);
    if (line > 0)
        snprintf(why, size, "%s:%ld: %s", path, line, what);
    else
        snprintf(why, size, "%s: %s", path, what);
    return -1;
}

int flight_read(const char *path, flight_ring *r, char *why, size_t size)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "r");
    if (!f) return fail_read(NULL, r, why, size, path, strerror(errno), 0);
    char text[512];
    int version = 0;
    if (!fgets(text, sizeof text, f) || sscanf(text, "flight-recorder %d", &version) != 1 || version != 1)
        return fail_read(f, r, why, size, path,
                         "not a flight recorder ring (its first line is not 'flight-recorder 1')", 1);
    if (!fgets(text, sizeof text, f) ||
        sscanf(text, "rank %d world %d run %63s calls %lld slots %d", &r->rank, &r->world, r->run, &r->calls,
               &r->slots) != 5 ||
        r->world < 1 || r->rank < 0 || r->rank >= r->world || r->slots < 1 || r->slots > FLIGHT_MAX_SLOTS ||
        r->calls < 0)
        return fail_read(f, r, why, size, path, "expected 'rank R world W run RUN calls C slots K'", 2);
    if (!fgets(text, sizeof text, f) || strncmp(text, "stopped ", 8) != 0)
        return fail_read(f, r, why, size, path, "expected 'stopped WHY'", 3);
    snprintf(r->stopped, sizeof r->stopped, "%.255s", text + 8);
    r->stopped[strcspn(r->stopped, "\n")] = '\0';
    if (!fgets(text, sizeof text, f) || strncmp(text, "seq index op", 12) != 0)
        return fail_read(f, r, why, size, path, "expected the column names 'seq index op ...'", 4);
    r->entries = (flight_entry *)calloc((size_t)r->slots, sizeof(flight_entry));
    if (!r->entries) return fail_read(f, r, why, size, path, "out of memory", 0);
    long line = 4;
    while (fgets(text, sizeof text, f)) {
        line++;
        if (text[0] == '\n' || text[0] == '#') continue;
        if (r->n == r->slots) return fail_read(f, r, why, size, path, "more entries than the ring's slots", line);
        flight_entry *e = &r->entries[r->n];
        char op[32];
        if (sscanf(text, "%lld %lld %31s %lld %d %lld %lld %d %15s %d", &e->seq, &e->index, op, &e->batch, &e->part,
                   &e->count, &e->bytes, &e->peer, e->stream, &e->fired) != 10 ||
            (e->op = op_parse(op)) < 0)
            return fail_read(f, r, why, size, path, "expected 'seq index op batch part count bytes peer stream fired'",
                             line);
        if (r->n > 0 && e->seq <= r->entries[r->n - 1].seq)
            return fail_read(f, r, why, size, path, "the calls are not in the order they were issued", line);
        r->n++;
    }
    fclose(f);
    return 0;
}

void flight_free(flight_ring *r)
{
    free(r->entries);
    r->entries = NULL;
    r->n = 0;
}

// ----------------------------------------------------------------------------
// the first divergence

// Rank r's collective of number `index`, or NULL where its ring does not hold it.
static const flight_entry *collective(const flight_ring *r, long long index)
{
    for (int k = 0; k < r->n; k++)
        if (!is_p2p(r->entries[k].op) && r->entries[k].index == index) return &r->entries[k];
    return NULL;
}

// The range of collective numbers rank r's ring holds: 0 when it holds none.
static int collective_range(const flight_ring *r, long long *lo, long long *hi)
{
    int any = 0;
    for (int k = 0; k < r->n; k++) {
        const flight_entry *e = &r->entries[k];
        if (is_p2p(e->op)) continue;
        if (!any || e->index < *lo) *lo = e->index;
        if (!any || e->index > *hi) *hi = e->index;
        any = 1;
    }
    return any;
}

// Rank r's `op` with `peer` of number `index`; *last gets the highest such number it holds (-1: none).
static const flight_entry *p2p(const flight_ring *r, int op, int peer, long long index, long long *last)
{
    const flight_entry *found = NULL;
    *last = -1;
    for (int k = 0; k < r->n; k++) {
        const flight_entry *e = &r->entries[k];
        if (e->op != op || e->peer != peer) continue;
        if (e->index == index) found = e;
        if (e->index > *last) *last = e->index;
    }
    return found;
}

static int same_call(const flight_entry *a, const flight_entry *b)
{
    return a->op == b->op && a->count == b->count && a->part == b->part && a->batch == b->batch;
}

// 1: two ranks' collectives of one number differ (in the numbers every ring holds).
static int collectives_differ(flight_ring *const *rings, int world, char *line, size_t size)
{
    int first = -1;
    long long lo = 0, hi = -1;
    for (int r = 0; r < world; r++) {
        long long a = 0, b = -1;
        if (!rings[r] || !collective_range(rings[r], &a, &b)) continue;
        if (first < 0) {
            first = r, lo = a, hi = b;
        } else {
            if (a > lo) lo = a;
            if (b < hi) hi = b;
        }
    }
    for (long long i = lo; first >= 0 && i <= hi; i++) {
        const flight_entry *want = collective(rings[first], i);
        if (!want) continue;
        for (int r = first + 1; r < world; r++) {
            const flight_entry *got = rings[r] ? collective(rings[r], i) : NULL;
            if (!got || same_call(got, want)) continue;
            char a[160], b[160];
            flight_describe(got, a, sizeof a);
            flight_describe(want, b, sizeof b);
            snprintf(line, size, "rank %d issued %s where rank %d issued %s", r, a, first, b);
            return 1;
        }
    }
    return 0;
}

// 1: a receive (or send) that waits for a partner that never came, or whose partner differs.
static int p2p_differs(flight_ring *const *rings, int world, char *line, size_t size)
{
    for (int r = 0; r < world; r++) {
        if (!rings[r]) continue;
        for (int k = 0; k < rings[r]->n; k++) {
            const flight_entry *e = &rings[r]->entries[k];
            if (!is_p2p(e->op) || e->peer < 0 || e->peer >= world || !rings[e->peer]) continue;
            int other_op = e->op == FLIGHT_RECV ? FLIGHT_SEND : FLIGHT_RECV;
            long long last = -1;
            const flight_entry *p = p2p(rings[e->peer], other_op, r, e->index, &last);
            char a[160], b[160];
            flight_describe(e, a, sizeof a);
            if (p && (p->count != e->count || p->part != e->part || p->batch != e->batch)) {
                flight_describe(p, b, sizeof b);
                snprintf(line, size, "rank %d issued %s where rank %d issued %s", r, a, e->peer, b);
                return 1;
            }
            if (!p && e->fired != 1 && last < e->index) {
                if (last >= 0)
                    snprintf(line, size, "rank %d waits in %s; rank %d never %s #%lld (its last: #%lld)", r, a, e->peer,
                             e->op == FLIGHT_RECV ? "sent" : "received", e->index, last);
                else
                    snprintf(line, size, "rank %d waits in %s; rank %d never %s #%lld", r, a, e->peer,
                             e->op == FLIGHT_RECV ? "sent" : "received", e->index);
                return 1;
            }
        }
    }
    return 0;
}

// The oldest call in any ring whose completion never fired, and its rank: NULL when none.
static const flight_entry *oldest_waiting(flight_ring *const *rings, int world, int *rank)
{
    const flight_entry *best = NULL;
    for (int r = 0; r < world; r++) {
        if (!rings[r]) continue;
        for (int k = 0; k < rings[r]->n; k++) {
            const flight_entry *e = &rings[r]->entries[k];
            if (e->fired != 0) continue;
            if (!best || (is_p2p(best->op) && !is_p2p(e->op)) ||
                (is_p2p(best->op) == is_p2p(e->op) && e->index < best->index)) {
                best = e;
                *rank = r;
            }
            break;  // the oldest of this rank
        }
    }
    return best;
}

static void ranks_text(flight_ring *const *rings, int world, int present, char *out, size_t size)
{
    size_t n = 0;
    int count = 0;
    out[0] = '\0';
    for (int r = 0; r < world && n < size; r++)
        if ((rings[r] != NULL) == present) count++;
    for (int r = 0, k = 0; r < world && n < size; r++) {
        if ((rings[r] != NULL) != present) continue;
        const char *sep = k == 0 ? "" : k == count - 1 ? " and " : ", ";
        n += (size_t)snprintf(out + n, size - n, "%s%d", sep, r);
        k++;
    }
}

int flight_diverge(flight_ring *const *rings, int world, char *line, size_t size)
{
    int present = 0;
    for (int r = 0; r < world; r++) present += rings[r] != NULL;
    if (present == 0) {
        snprintf(line, size, "no rank left a ring");
        return 1;
    }
    if (collectives_differ(rings, world, line, size)) return 1;
    if (p2p_differs(rings, world, line, size)) return 1;
    int who = -1;
    const flight_entry *w = oldest_waiting(rings, world, &who);
    char a[160], missing[128];
    if (present < world) {
        ranks_text(rings, world, 0, missing, sizeof missing);
        if (w) {
            flight_describe(w, a, sizeof a);
            snprintf(line, size,
                     "rank%s %s left no ring (killed, or stopped before it could write one); rank %d waits in "
                     "%s, never completed",
                     present < world - 1 ? "s" : "", missing, who, a);
        } else {
            snprintf(line, size,
                     "rank%s %s left no ring (killed, or stopped before it could write one); every call "
                     "of the others completed",
                     present < world - 1 ? "s" : "", missing);
        }
        return 1;
    }
    if (w && !is_p2p(w->op)) {
        for (int r = 0; r < world; r++) {
            long long lo = 0, hi = -1;
            if (collective_range(rings[r], &lo, &hi) && hi >= w->index) continue;
            flight_describe(w, a, sizeof a);
            if (hi >= 0) {
                char b[160];
                flight_describe(collective(rings[r], hi), b, sizeof b);
                snprintf(line, size, "rank %d waits in %s; rank %d never issued #%lld (its last: %s)", who, a, r,
                         w->index, b);
            } else {
                snprintf(line, size, "rank %d waits in %s; rank %d never issued #%lld", who, a, r, w->index);
            }
            return 1;
        }
    }
    if (w) {
        flight_describe(w, a, sizeof a);
        snprintf(line, size,
                 "rank %d waits in %s, never completed; every rank issued it (a rank stopped answering "
                 "inside it, or its network did)",
                 who, a);
        return 1;
    }
    long long calls = 0;
    const flight_entry *last = NULL;
    for (int k = 0; k < rings[0]->n; k++) last = &rings[0]->entries[k];
    calls = rings[0]->calls;
    if (last) {
        flight_describe(last, a, sizeof a);
        snprintf(line, size,
                 "no divergence: the %d ranks' rings agree, every call completed (rank 0: %lld calls, the "
                 "last %s)",
                 world, calls, a);
    } else {
        snprintf(line, size, "no divergence: the %d ranks' rings are empty", world);
    }
    return 0;
}
