// flight.c: flight recorder rings as files (flight.h). Their first divergence: flight_diverge.c.
#define _POSIX_C_SOURCE 200809L
#include "common/recovery/flight.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // getpid

#include "common/base/own_file.h"      // own_file_create, own_file_publish
#include "common/base/regular_file.h"  // regular_file_open: a named pipe refused, never waited on

static const char *const OP_NAMES[FLIGHT_OPS] = {"all-reduce", "all-gather", "send", "recv"};

const char *flight_op_name(int op) { return op >= 0 && op < FLIGHT_OPS ? OP_NAMES[op] : "?"; }

static int op_parse(const char *word)
{
    for (int k = 0; k < FLIGHT_OPS; k++)
        if (strcmp(word, OP_NAMES[k]) == 0) return k;
    return -1;
}

int flight_is_p2p(int op) { return op == FLIGHT_SEND || op == FLIGHT_RECV; }

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
    if (e->part >= 0) snprintf(part, sizeof part, "%s %d, ", flight_is_p2p(e->op) ? "micro-batch" : "bucket", e->part);
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
    FILE *f = own_file_create(tmp);  // beside the rendezvous: a folder other processes see
    if (!f) return -1;
    fprintf(f, "flight-recorder 1\nrank %d world %d run %s calls %lld slots %d\nstopped %s\n", r->rank, r->world,
            r->run[0] ? r->run : "-", r->calls, r->slots, r->stopped[0] ? r->stopped : "-");
    fprintf(f, "seq index op batch part count bytes peer stream fired\n");
    for (int k = 0; k < r->n; k++) {
        const flight_entry *e = &r->entries[k];
        fprintf(f, "%lld %lld %s %lld %d %lld %lld %d %s %d\n", e->seq, e->index, flight_op_name(e->op), e->batch,
                e->part, e->count, e->bytes, e->peer, e->stream[0] ? e->stream : "-", e->fired);
    }
    return own_file_publish(f, tmp, path);  // read after the run, whole or not at all
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

// Numbers and words of a line, each in its bounds: strtoll's own range (no overflow), then the
// field's. Each moves *p past what it read; 0 when the line does not hold one there.
static int next_int(char **p, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(*p, &end, 10);
    if (end == *p || errno == ERANGE || v < lo || v > hi || (*end != ' ' && *end != '\n' && *end != '\0')) return 0;
    *p = end;
    *out = v;
    return 1;
}

static int next_word(char **p, char *out, size_t size)
{
    while (**p == ' ') (*p)++;
    size_t n = strcspn(*p, " \n");
    if (n == 0 || n >= size) return 0;
    memcpy(out, *p, n);
    out[n] = '\0';
    *p += n;
    return 1;
}

static int next_key(char **p, const char *key)
{
    char word[16];
    return next_word(p, word, sizeof word) && strcmp(word, key) == 0;
}

static int at_end(const char *p) { return p[strspn(p, " \n")] == '\0'; }

// "rank R world W run RUN calls C slots K"
static int read_ring_line(char *p, flight_ring *r)
{
    long long rank, world, calls, slots;
    if (!next_key(&p, "rank") || !next_int(&p, 0, FLIGHT_MAX_RANKS - 1, &rank) || !next_key(&p, "world") ||
        !next_int(&p, rank + 1, FLIGHT_MAX_RANKS, &world) || !next_key(&p, "run") ||
        !next_word(&p, r->run, sizeof r->run) || !next_key(&p, "calls") ||
        !next_int(&p, 0, FLIGHT_MAX_NUMBER, &calls) || !next_key(&p, "slots") ||
        !next_int(&p, 1, FLIGHT_MAX_SLOTS, &slots) || !at_end(p))
        return 0;
    r->rank = (int)rank, r->world = (int)world, r->calls = calls, r->slots = (int)slots;
    return 1;
}

// "seq index op batch part count bytes peer stream fired": a call number below the ring's
// calls, an index at most its call number, a peer among the ring's ranks (-1: none).
static int read_entry(char *p, const flight_ring *r, flight_entry *e)
{
    long long part, peer, fired;
    char op[16];
    if (!next_int(&p, 0, r->calls - 1, &e->seq) || !next_int(&p, 0, e->seq, &e->index) ||
        !next_word(&p, op, sizeof op) || (e->op = op_parse(op)) < 0 ||
        !next_int(&p, -1, FLIGHT_MAX_NUMBER, &e->batch) || !next_int(&p, -1, 1 << 30, &part) ||
        !next_int(&p, 0, FLIGHT_MAX_NUMBER, &e->count) || !next_int(&p, 0, FLIGHT_MAX_NUMBER, &e->bytes) ||
        !next_int(&p, -1, r->world - 1, &peer) || !next_word(&p, e->stream, sizeof e->stream) ||
        !next_int(&p, -1, 1, &fired) || !at_end(p))
        return 0;
    e->part = (int)part, e->peer = (int)peer, e->fired = (int)fired;
    return 1;
}

// What a ring holds against its header: the last calls, ending at call `calls` - 1, all of those
// the ring has room for but at most one (a stop leaves out the slot the main thread was filling),
// and among them the collectives numbered one after another, and each peer's sends and receives.
static int check_held(flight_ring *r, const char *path, char *why, size_t size)
{
    char what[200];
    long long want = r->calls < r->slots ? r->calls : r->slots;
    if (r->n > 0 && r->entries[r->n - 1].seq != r->calls - 1)
        snprintf(what, sizeof what, "its last call is #%lld, where its header says %lld calls",
                 r->entries[r->n - 1].seq, r->calls);
    else if (r->n < want - 1)
        snprintf(what, sizeof what, "it holds %d calls, where its header says %lld calls and %d slots", r->n, r->calls,
                 r->slots);
    else
        what[0] = '\0';
    // the number a kind's next call must have: [0] collectives, then sends and receives per peer
    long long *next = (long long *)malloc((size_t)(1 + 2 * r->world) * sizeof(long long));
    if (!next) return fail_read(NULL, r, why, size, path, "out of memory", 0);
    for (int k = 0; k <= 2 * r->world; k++) next[k] = -1;
    for (int k = 0; k < r->n && !what[0]; k++) {
        const flight_entry *e = &r->entries[k];
        int kind = flight_is_p2p(e->op) ? 1 + 2 * e->peer + (e->op == FLIGHT_RECV) : 0;
        if (flight_is_p2p(e->op) && e->peer < 0)
            snprintf(what, sizeof what, "call #%lld, a %s, names no peer", e->seq, flight_op_name(e->op));
        else if (next[kind] >= 0 && e->index != next[kind])
            snprintf(what, sizeof what, "a call is missing: call #%lld is %s #%lld, after #%lld", e->seq,
                     flight_op_name(e->op), e->index, next[kind] - 1);
        next[kind] = e->index + 1;
    }
    free(next);
    if (!what[0]) return 0;
    return fail_read(NULL, r, why, size, path, what, 0);
}

int flight_read(const char *path, flight_ring *r, char *why, size_t size)
{
    memset(r, 0, sizeof *r);
    char what[160];
    FILE *f = regular_file_open(path, what, sizeof what);  // a named pipe would block the reader forever
    if (!f) return fail_read(NULL, r, why, size, path, what, 0);
    char text[512];
    int version = 0;
    if (!fgets(text, sizeof text, f) || sscanf(text, "flight-recorder %d", &version) != 1 || version != 1)
        return fail_read(f, r, why, size, path,
                         "not a flight recorder ring (its first line is not 'flight-recorder 1')", 1);
    if (!fgets(text, sizeof text, f) || !read_ring_line(text, r))
        return fail_read(f, r, why, size, path,
                         "expected 'rank R world W run RUN calls C slots K' (R below W, W at most 4096)", 2);
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
        if (!read_entry(text, r, e))
            return fail_read(f, r, why, size, path,
                             "expected 'seq index op batch part count bytes peer stream fired', each in its bounds",
                             line);
        if (r->n > 0 && e->seq <= r->entries[r->n - 1].seq)
            return fail_read(f, r, why, size, path, "the calls are not in the order they were issued", line);
        if (r->n > 0 && e->seq != r->entries[r->n - 1].seq + 1)
            return fail_read(f, r, why, size, path, "a call is missing: a ring holds the last calls, one after another",
                             line);
        r->n++;
    }
    fclose(f);
    return check_held(r, path, why, size);
}

void flight_free(flight_ring *r)
{
    free(r->entries);
    r->entries = NULL;
    r->n = 0;
}
