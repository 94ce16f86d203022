// flight.h: lesson 14's flight recorder rings as files, and the first place where the ranks'
// rings disagree, named in one line. Host-only C: tools/flight-report reads the rings every
// rank wrote beside the rendezvous; lesson 14's fingerprint check compares its ranks' calls
// with the same function before it issues them.
//
// A ring file, flight.RUN.rankR, is text:
//   flight-recorder 1
//   rank R world W run RUN calls C slots K
//   stopped WHY THE RANK STOPPED
//   seq index op batch part count bytes peer stream fired
//   0 0 all-reduce 0 0 65792 263168 -1 comm 1
//   ...                                          (the last min(C, K) calls, oldest first)
// `index` is what NCCL pairs a call by: the collectives of a rank are numbered together
// (all-reduce #37 is the 38th collective), a rank's sends to one peer apart from its
// receives from it. `part` is the bucket of an all-reduce, the micro-batch of a send or a
// receive (-1: none). `fired`: 1 when the call's completion event had fired when the ring was
// written, 0 when not, -1 unknown.
#ifndef COMMON_FLIGHT_H
#define COMMON_FLIGHT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FLIGHT_ALL_REDUCE, FLIGHT_ALL_GATHER, FLIGHT_SEND, FLIGHT_RECV, FLIGHT_OPS } flight_op;

#define FLIGHT_MAX_SLOTS 65536
#define FLIGHT_MAX_RANKS 4096          // tools/launch starts at most this many
#define FLIGHT_MAX_NUMBER (1LL << 50)  // any count, size, batch or call number read from a ring

typedef struct {
    long long seq;    // this rank's call number, from 0
    long long index;  // its number among the calls NCCL pairs it with (above)
    int op;           // flight_op
    long long batch;
    int part;         // bucket (all-reduce), micro-batch (send, recv), -1: none
    long long count;  // elements
    long long bytes;
    int peer;         // send, recv: the other rank; -1 for a collective
    char stream[16];  // the stream's name ("comm")
    int fired;        // the completion event: 1 fired, 0 not yet, -1 unknown
} flight_entry;

typedef struct {
    int rank, world;
    char run[64];
    long long calls;  // calls ever recorded: the ring holds the last min(calls, slots)
    int slots;
    char stopped[256];      // why the rank stopped ("-": it did not)
    int n;                  // entries held
    flight_entry *entries;  // n of them, oldest first (malloc'd by flight_read)
} flight_ring;

const char *flight_op_name(int op);  // "all-reduce", "all-gather", "send", "recv"
int flight_is_p2p(int op);           // send, recv: numbered per peer, apart from the collectives

// "all-reduce #37 (batch 12, bucket 2, 16.0 MiB)"
void flight_describe(const flight_entry *e, char *out, size_t size);

// Writes the ring to `path` whole (a temporary file, then rename): 0, or -1 with errno.
int flight_write(const char *path, const flight_ring *r);

// Reads a ring file: 0, or -1 with the reason in `why` (one line): a line that does not read,
// or a number out of its bounds (a world of 1 to FLIGHT_MAX_RANKS, a peer among its ranks, a
// call number below `calls`, an index at most its call number, ...).
int flight_read(const char *path, flight_ring *r, char *why, size_t size);
void flight_free(flight_ring *r);

// The first place where the rings disagree, in one line (no newline), into `line`.
// rings[r] is rank r's ring, NULL where rank r left none. In this order: two ranks' calls of
// one number that differ ("rank 1 issued all-reduce #37 (batch 12, bucket 2, 16.0 MiB) where
// rank 0 issued all-reduce #37 (batch 12, bucket 1, 8.0 MiB)"); a receive or send whose
// partner differs or never came ("rank 0 waits in recv #12 from rank 1 (...); rank 1 never
// sent #12"); a rank that left no ring, and the call the others wait in; a call that one rank
// waits in and another never issued. Returns 1 when it named a divergence or a call that never
// completed, 0 when every ring agrees and every call completed (the line says so), -1 out of
// memory. It walks the entries the rings hold, never a range of numbers: a ring's call numbers
// may be anything flight_read lets through. world: at most FLIGHT_MAX_RANKS.
int flight_diverge(flight_ring *const *rings, int world, char *line, size_t size);

// The same where some rings could not be read (rings[r] NULL for those, and for the missing ones):
// only the first two rings that were read and differ are named (calls of one number, or a send and
// its receive, as above); nothing is said of the ranks without a ring, whose calls are unknown.
// 1 when it named one, 0 when the rings that were read agree, -1 out of memory.
int flight_differ(flight_ring *const *rings, int world, char *line, size_t size);

#ifdef __cplusplus
}
#endif
#endif
