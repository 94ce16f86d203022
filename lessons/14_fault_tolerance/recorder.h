// STUDENT VERSION of solutions/14_fault_tolerance/recorder.h, made by `make lessons` (checksum 442068917)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// recorder.h: lesson 14's flight recorder (recorder.cu), all that the lesson's other files and
// tests/flight-race.c see of it: the ring of a rank's last calls, each with an event recorded
// behind it, and the calls that fill it, write it and gather through it.
#ifndef RECORDER_H
#define RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/dist/dist.h"        // defines: dist_env, dist_gather, dist_gather_begin, dist_gather_end, NCCL_CHECK
#include "common/recovery/flight.h"  // defines: flight_entry, flight_ring, flight_op, flight_write

#define RING_SLOTS 256  // the flight recorder keeps this many calls, by default

// Every communication call of this rank, the last `slots` of them kept: what it was, and an
// event recorded behind it on its stream, asked when the ring is written whether it has fired.
typedef struct {
    dist_env *dist;
    int slots;
    flight_entry *ring;     // entry of call `seq` at ring[seq % slots]
    cudaEvent_t *done;      // its completion event, at done[seq % slots]
    long long calls;        // calls recorded so far: the next one's seq
    long long collectives;  // collectives recorded so far: the next one's index (what NCCL pairs by)
    uint64_t hash;          // FNV-1a of what every call was (op, count, bytes, part, batch): the fingerprint
    char path[1200];        // flight.RUN.rankR beside the rendezvous ("" where there is none)
    int written;            // the ring was written (the stop hook, or the end of the run)
    // The stop hook may copy the ring on the watchdog thread while the main thread, back from the
    // NCCL call it was in, records the next call: each says what it does before it looks at what
    // the other does (recorder.cu), so the copy never reads a slot being filled.
    int filling;  // the main thread is filling a slot
    int frozen;   // the ring is being written: nothing more is recorded
} flight_recorder;

void recorder_init(flight_recorder *r, dist_env *d, int slots);
void recorder_destroy(flight_recorder *r);
void recorder_record(flight_recorder *r, flight_op op, long batch, int part, size_t count, size_t elem_bytes, int peer,
                     cudaStream_t stream, const char *stream_name);
void recorder_write(flight_recorder *r, const char *why);
void recorder_allgather(flight_recorder *r, dist_env *d, long batch, const void *mine, void *all, size_t bytes,
                        cudaStream_t stream, const char *stream_name);
void recorder_stop_hook(void *ctx);  // dist_env's on_stop: the ring is written on any stop

#endif
