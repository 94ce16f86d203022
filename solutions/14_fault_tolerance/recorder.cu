// recorder.cu (lesson 14): the flight recorder. Every communication call of the rank goes into a
// ring of its last --ring-slots calls (default RING_SLOTS), with an event recorded behind it on its stream (exercise
// 14-ring); when the rank stops, for any reason, or ends, the ring is written beside the
// rendezvous, each call marked by whether its event had fired (exercise 14-events).
// tools/flight-report reads every rank's ring and names the first divergence.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>  // nanosleep: the stop's short wait for a slot being filled

#include "recorder.h"  // defines: flight_recorder (and through it dist.h's and flight.h's names)

#include "common/base/check.h"        // defines: CUDA_CHECK
#include "common/base/stderr_line.h"  // defines: stderr_line
#include "common/gpu/memory.h"        // defines: host_calloc
#include "common/model/data.h"        // defines: fnv1a, FNV1A_START

void recorder_init(flight_recorder *r, dist_env *d, int slots)
{
    memset(r, 0, sizeof *r);
    r->dist = d;
    r->slots = slots;
    r->ring = (flight_entry *)host_calloc((size_t)slots, sizeof(flight_entry), "the flight recorder");
    r->done = (cudaEvent_t *)host_calloc((size_t)slots, sizeof(cudaEvent_t), "the flight recorder");
    for (int k = 0; k < slots; k++) CUDA_CHECK(cudaEventCreateWithFlags(&r->done[k], cudaEventDisableTiming));
    r->hash = FNV1A_START;
    if (d->folder[0]) snprintf(r->path, sizeof r->path, "%s/flight.%s.rank%d", d->folder, d->run, d->rank);
}

void recorder_destroy(flight_recorder *r)
{
    for (int k = 0; k < r->slots; k++) CUDA_CHECK(cudaEventDestroy(r->done[k]));
    free(r->done);
    free(r->ring);
}

// The main thread is about to fill a slot: 1, or 0 when the ring is being written (a stop), and
// then nothing more is recorded. It says so first, then looks (recorder_write does the reverse):
// of the two, at least one sees the other.
static int begin_filling(flight_recorder *r)
{
    __atomic_store_n(&r->filling, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&r->frozen, __ATOMIC_SEQ_CST)) return 1;
    __atomic_store_n(&r->filling, 0, __ATOMIC_RELEASE);
    return 0;
}

// Called right after the call was issued on `stream`: NCCL has queued it, nothing says yet that
// it ran. The event recorded behind it says so later.
void recorder_record(flight_recorder *r, flight_op op, long batch, int part, size_t count, size_t elem_bytes, int peer,
                     cudaStream_t stream, const char *stream_name)
{
    if (!begin_filling(r)) return;  // a stop is writing the ring
    // BEGIN SOLUTION(14-ring): the call's entry goes in slot r->calls % r->slots: fill seq
    // (r->calls), index (r->collectives: this lesson issues collectives only), op, batch, part,
    // count, bytes, peer, stream (the name), fired -1; record that slot's event r->done[...] on
    // `stream` behind the call; then count the call (r->calls, r->collectives) and fold what it is
    // (op, count, bytes, part, batch) into r->hash with fnv1a
    int slot = (int)(r->calls % r->slots);
    flight_entry *e = &r->ring[slot];
    e->seq = r->calls;
    e->index = r->collectives;
    e->op = op;
    e->batch = batch;
    e->part = part;
    e->count = (long long)count;
    e->bytes = (long long)(count * elem_bytes);
    e->peer = peer;
    snprintf(e->stream, sizeof e->stream, "%s", stream_name);
    e->fired = -1;
    CUDA_CHECK(cudaEventRecord(r->done[slot], stream));
    r->calls++;
    r->collectives++;
    long long sig[5] = {op, (long long)count, (long long)(count * elem_bytes), part, batch};
    r->hash = fnv1a(sig, sizeof sig, r->hash);
    //| (void)r, (void)op, (void)batch, (void)part, (void)count, (void)elem_bytes, (void)peer, (void)stream;
    //| (void)stream_name;
    // END SOLUTION
    __atomic_store_n(&r->filling, 0, __ATOMIC_RELEASE);  // the slot and the count are whole
}

// The checks' all-gathers (the fingerprint, the checkpoint's files, the checksums at the end),
// each written into the ring as soon as it is queued, before the host waits for it: a rank stuck
// in one, because another never came, has it in its ring.
void recorder_allgather(flight_recorder *r, dist_env *d, long batch, const void *mine, void *all, size_t bytes,
                        cudaStream_t stream, const char *stream_name)
{
    dist_gather g;
    dist_gather_begin(d, &g, mine, bytes, stream);  // this rank's part in its place on the GPU
    NCCL_CHECK(d, ncclAllGather(g.d_mine, g.d_all, bytes, ncclUint8, d->comm, stream));
    recorder_record(r, FLIGHT_ALL_GATHER, batch, -1, bytes * (size_t)d->world, 1, -1, stream, stream_name);
    dist_gather_end(d, &g, all, stream);  // every rank's part back on the host, the wait polled
}

// The calls the ring holds, frozen: the main thread records nothing from now on. A slot it is
// filling (it came back from NCCL as the watchdog claimed the stop) is waited for a moment, never
// for long (the watchdog must not block on it), then left out. Returns the calls recorded; the
// oldest to copy in *first.
static long long freeze(flight_recorder *r, long long *first)
{
    __atomic_store_n(&r->frozen, 1, __ATOMIC_SEQ_CST);
    struct timespec nap = {0, 10000};
    int filling = 1;
    for (int k = 0; k < 10000 && (filling = __atomic_load_n(&r->filling, __ATOMIC_SEQ_CST)); k++)
        nanosleep(&nap, NULL);                                       // 100 ms at most
    long long calls = __atomic_load_n(&r->calls, __ATOMIC_ACQUIRE);  // read once: the copy stops there
    *first = calls > r->slots ? calls - r->slots : 0;
    if (filling && calls >= r->slots) (*first)++;  // the slot being filled is the oldest one's
    return calls;
}

// Writes the ring, oldest call first, each marked by whether its completion event has fired.
// Runs once: from the stop hook (the main thread or the watchdog, the rank about to abort) or
// at the end of the run.
void recorder_write(flight_recorder *r, const char *why)
{
    if (!r->path[0] || __atomic_exchange_n(&r->written, 1, __ATOMIC_SEQ_CST)) return;
    long long first = 0, calls = freeze(r, &first);
    flight_ring out;
    memset(&out, 0, sizeof out);
    out.rank = r->dist->rank;
    out.world = r->dist->world;
    snprintf(out.run, sizeof out.run, "%s", r->dist->run);
    out.calls = calls;
    out.slots = r->slots;
    snprintf(out.stopped, sizeof out.stopped, "%s", why);
    out.entries = (flight_entry *)calloc((size_t)r->slots, sizeof(flight_entry));
    if (!out.entries) return;
    for (long long seq = first; seq < calls; seq++) {
        int slot = (int)(seq % r->slots);
        flight_entry *e = &out.entries[out.n++];
        *e = r->ring[slot];
        // BEGIN SOLUTION(14-events): has the call's completion event fired? cudaEventQuery on
        // r->done[slot]: cudaSuccess 1, cudaErrorNotReady 0, any other answer (a broken context)
        // -1; it never waits, so it is safe while the rank stops
        cudaError_t state = cudaEventQuery(r->done[slot]);
        e->fired = state == cudaSuccess ? 1 : state == cudaErrorNotReady ? 0 : -1;
        // END SOLUTION
    }
    if (flight_write(r->path, &out) != 0) stderr_line("%s: cannot write %s", r->dist->name, r->path);
    free(out.entries);
}

void recorder_stop_hook(void *ctx)
{
    recorder_write((flight_recorder *)ctx, "aborted (the rank's own message says why)");
}
