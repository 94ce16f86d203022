// flight_diverge.c: where the ranks' rings first disagree, named in one line (flight.h).
//
// A ring comes from a file, so its call numbers are anything flight_read lets through: one ring
// may hold #0 and #2^40. Every lookup goes through a sorted index of the calls a ring holds,
// and every walk goes over those calls, never over the range of numbers between them.
#define _POSIX_C_SOURCE 200809L
#include "common/recovery/flight.h"

#include <limits.h>  // LLONG_MIN, LLONG_MAX
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A call as it is looked up: a collective by its number alone (op and peer -1: NCCL numbers
// every collective of a rank together), a send or a receive by its op, its peer and its number.
typedef struct {
    int op, peer;
    long long index;
    int at;  // its place in the ring: of two calls of one number, the older is found
    const flight_entry *e;
} call_key;

typedef struct {
    call_key *keys;  // sorted by op, peer, index, place
    int n;
} ring_index;

static int compare(long long a, long long b) { return (a > b) - (a < b); }

static int by_key(const void *pa, const void *pb)
{
    const call_key *a = (const call_key *)pa, *b = (const call_key *)pb;
    int c = compare(a->op, b->op);
    if (!c) c = compare(a->peer, b->peer);
    if (!c) c = compare(a->index, b->index);
    return c ? c : compare(a->at, b->at);
}

static int index_ring(const flight_ring *r, ring_index *x)
{
    x->n = 0;
    x->keys = (call_key *)malloc((size_t)(r->n > 0 ? r->n : 1) * sizeof(call_key));
    if (!x->keys) return -1;
    for (int k = 0; k < r->n; k++) {
        const flight_entry *e = &r->entries[k];
        int p2p = flight_is_p2p(e->op);
        call_key key = {p2p ? e->op : -1, p2p ? e->peer : -1, e->index, k, e};
        x->keys[x->n++] = key;
    }
    qsort(x->keys, (size_t)x->n, sizeof(call_key), by_key);
    return 0;
}

// The place of the first key at or after (op, peer, index), the oldest of equal ones.
static int lower(const ring_index *x, int op, int peer, long long index)
{
    call_key probe = {op, peer, index, -1, NULL};
    int lo = 0, hi = x->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (by_key(&x->keys[mid], &probe) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int same_kind(const call_key *k, int op, int peer) { return k->op == op && k->peer == peer; }

// The ring's call (op, peer, index), the oldest of that number: NULL where it holds none.
static const flight_entry *find(const ring_index *x, int op, int peer, long long index)
{
    int k = lower(x, op, peer, index);
    return k < x->n && same_kind(&x->keys[k], op, peer) && x->keys[k].index == index ? x->keys[k].e : NULL;
}

// The lowest and highest numbers of the ring's calls (op, peer): 0 when it holds none.
static int number_range(const ring_index *x, int op, int peer, long long *lo, long long *hi)
{
    int a = lower(x, op, peer, LLONG_MIN), b = lower(x, op, peer, LLONG_MAX);
    if (a == b) return 0;
    *lo = x->keys[a].index;
    *hi = x->keys[b - 1].index;
    return 1;
}

static int same_call(const flight_entry *a, const flight_entry *b)
{
    return a->op == b->op && a->count == b->count && a->part == b->part && a->batch == b->batch;
}

// 1: two ranks' collectives of one number differ (in the numbers every ring holds).
static int collectives_differ(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    int first = -1;
    long long lo = 0, hi = -1;
    for (int r = 0; r < world; r++) {
        long long a = 0, b = -1;
        if (!rings[r] || !number_range(&idx[r], -1, -1, &a, &b)) continue;
        if (first < 0) {
            first = r, lo = a, hi = b;
        } else {
            if (a > lo) lo = a;
            if (b < hi) hi = b;
        }
    }
    if (first < 0) return 0;
    const ring_index *x = &idx[first];
    for (int k = lower(x, -1, -1, lo); k < x->n && same_kind(&x->keys[k], -1, -1) && x->keys[k].index <= hi; k++) {
        if (k > 0 && same_kind(&x->keys[k - 1], -1, -1) && x->keys[k - 1].index == x->keys[k].index) continue;
        const flight_entry *want = x->keys[k].e;
        for (int r = first + 1; r < world; r++) {
            const flight_entry *got = rings[r] ? find(&idx[r], -1, -1, want->index) : NULL;
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
static int p2p_differs(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    for (int r = 0; r < world; r++) {
        if (!rings[r]) continue;
        for (int k = 0; k < rings[r]->n; k++) {
            const flight_entry *e = &rings[r]->entries[k];
            if (!flight_is_p2p(e->op) || e->peer < 0 || e->peer >= world || !rings[e->peer]) continue;
            int other_op = e->op == FLIGHT_RECV ? FLIGHT_SEND : FLIGHT_RECV;
            long long first = 0, last = -1;
            const flight_entry *p = find(&idx[e->peer], other_op, r, e->index);
            number_range(&idx[e->peer], other_op, r, &first, &last);
            char a[160], b[160];
            flight_describe(e, a, sizeof a);
            if (p && (p->count != e->count || p->part != e->part || p->batch != e->batch)) {
                flight_describe(p, b, sizeof b);
                snprintf(line, size, "rank %d issued %s where rank %d issued %s", r, a, e->peer, b);
                return 1;
            }
            if (!p && e->fired != 1 && last < e->index) {
                const char *verb = e->op == FLIGHT_RECV ? "sent" : "received";
                if (last >= 0)
                    snprintf(line, size, "rank %d waits in %s; rank %d never %s #%lld (its last: #%lld)", r, a, e->peer,
                             verb, e->index, last);
                else
                    snprintf(line, size, "rank %d waits in %s; rank %d never %s #%lld", r, a, e->peer, verb, e->index);
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
            if (!best || (flight_is_p2p(best->op) && !flight_is_p2p(e->op)) ||
                (flight_is_p2p(best->op) == flight_is_p2p(e->op) && e->index < best->index)) {
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

// The last collective of ring r: its number, or -1 when it made none (-2: unknown, the calls
// its ring holds are sends and receives only).
static long long last_collective(flight_ring *const *rings, const ring_index *idx, int r)
{
    long long lo = 0, hi = -1;
    if (number_range(&idx[r], -1, -1, &lo, &hi)) return hi;
    return rings[r]->calls == 0 ? -1 : -2;
}

// 1: every call completed, but the ranks did not issue as many collectives: one stopped early,
// and the calls the others went on to make paired with nothing, or with what it issued next.
static int collectives_end_apart(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    int shortest = -1, longest = -1;
    long long least = 0, most = 0;
    for (int r = 0; r < world; r++) {
        long long last = last_collective(rings, idx, r);
        if (last == -2) continue;
        if (shortest < 0 || last < least) shortest = r, least = last;
        if (longest < 0 || last > most) longest = r, most = last;
    }
    if (shortest < 0 || least == most) return 0;
    char a[160], b[200] = "issued no collective";
    flight_describe(find(&idx[longest], -1, -1, most), a, sizeof a);
    if (least >= 0) {
        char last[160];
        flight_describe(find(&idx[shortest], -1, -1, least), last, sizeof last);
        snprintf(b, sizeof b, "stopped at %s", last);
    }
    snprintf(line, size, "rank %d %s where rank %d went on to %s, and no call waits: the ranks issued different calls",
             shortest, b, longest, a);
    return 1;
}

// Every rank left a ring and none differs: a call one rank waits in that another never issued,
// a call every rank issued that never completed, or no divergence (returns 0).
static int waits_or_agrees(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    int who = -1;
    const flight_entry *w = oldest_waiting(rings, world, &who);
    char a[160], b[160];
    if (w) flight_describe(w, a, sizeof a);
    for (int r = 0; w && !flight_is_p2p(w->op) && r < world; r++) {
        long long lo = 0, hi = -1;
        if (number_range(&idx[r], -1, -1, &lo, &hi) && hi >= w->index) continue;
        if (hi >= 0) {
            flight_describe(find(&idx[r], -1, -1, hi), b, sizeof b);
            snprintf(line, size, "rank %d waits in %s; rank %d never issued #%lld (its last: %s)", who, a, r, w->index,
                     b);
        } else {
            snprintf(line, size, "rank %d waits in %s; rank %d never issued #%lld", who, a, r, w->index);
        }
        return 1;
    }
    if (w) {
        snprintf(line, size,
                 "rank %d waits in %s, never completed; every rank issued it (a rank stopped answering "
                 "inside it, or its network did)",
                 who, a);
        return 1;
    }
    if (collectives_end_apart(rings, idx, world, line, size)) return 1;
    if (rings[0]->n > 0) {
        flight_describe(&rings[0]->entries[rings[0]->n - 1], a, sizeof a);
        snprintf(line, size,
                 "no divergence: the %d ranks' rings agree, every call completed (rank 0: %lld calls, the "
                 "last %s)",
                 world, rings[0]->calls, a);
    } else {
        snprintf(line, size, "no divergence: the %d ranks' rings are empty", world);
    }
    return 0;
}

static int first_divergence(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    int present = 0;
    for (int r = 0; r < world; r++) present += rings[r] != NULL;
    if (present == 0) {
        snprintf(line, size, "no rank left a ring");
        return 1;
    }
    if (collectives_differ(rings, idx, world, line, size)) return 1;
    if (p2p_differs(rings, idx, world, line, size)) return 1;
    if (present == world) return waits_or_agrees(rings, idx, world, line, size);
    int who = -1;
    const flight_entry *w = oldest_waiting(rings, world, &who);
    char a[160], missing[128];
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

// Two rings that were read and differ: collectives of one number, or a send and a receive.
static int present_differ(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size)
{
    if (collectives_differ(rings, idx, world, line, size)) return 1;
    if (p2p_differs(rings, idx, world, line, size)) return 1;
    snprintf(line, size, "the rings that were read agree");
    return 0;
}

typedef int (*judge_fn)(flight_ring *const *rings, const ring_index *idx, int world, char *line, size_t size);

// Every ring indexed, then judged.
static int judged(flight_ring *const *rings, int world, char *line, size_t size, judge_fn judge)
{
    ring_index *idx = (ring_index *)calloc((size_t)(world > 0 ? world : 1), sizeof(ring_index));
    int ok = idx != NULL;
    for (int r = 0; ok && r < world; r++) ok = !rings[r] || index_ring(rings[r], &idx[r]) == 0;
    int result = -1;
    if (ok)
        result = judge(rings, idx, world, line, size);
    else
        snprintf(line, size, "out of memory for the rings' index");
    for (int r = 0; idx && r < world; r++) free(idx[r].keys);
    free(idx);
    return result;
}

int flight_diverge(flight_ring *const *rings, int world, char *line, size_t size)
{
    return judged(rings, world, line, size, first_divergence);
}

int flight_differ(flight_ring *const *rings, int world, char *line, size_t size)
{
    return judged(rings, world, line, size, present_differ);
}
