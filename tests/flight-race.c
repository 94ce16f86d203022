// flight-race.c: lesson 14's flight recorder (solutions/14_fault_tolerance/recorder.cu, the real
// file, built host-only beside this one) written while the main thread still records, as when
// the watchdog claims a stop while the main thread is inside an NCCL call that then returns and
// is recorded at once. The CUDA and NCCL calls of the recorder are stubbed here; cudaEventQuery
// sleeps 20 us, as a query of a real event may take, so that the copy is slow against the
// recording. Built with ASan by tests/14_fault_tolerance.bats (flight_race):
//   gcc -x c -c solutions/14_fault_tolerance/recorder.cu; gcc flight-race.c common/recovery/flight.c ...
// Run: flight-race DIR. The ring is written to DIR/flight.race.rank0 and read back: exit 0 when
// it reads, ends at the call its header names, and every entry is the call its seq says (no
// torn entry); 1 otherwise, with the reason (ASan: its own report, exit 1).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "solutions/14_fault_tolerance/recorder.h"  // defines: flight_recorder, recorder_init, recorder_record,
                                                      //          recorder_write, recorder_destroy

#define RING 16         // the ring's slots
#define WRITES 2000000  // calls the main thread records at most while the ring is written

// ----------------------------------------------------------------------------
// the calls the recorder makes, stubbed

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    (void)flags;
    *event = (cudaEvent_t)malloc(1);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    free((void *)event);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    (void)event, (void)stream;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    (void)event;
    struct timespec nap = {0, 20000};  // 20 us: the copy is slow, the recording is not
    nanosleep(&nap, NULL);
    return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t error)
{
    (void)error;
    return "stub";
}

const char *cudaGetErrorString(cudaError_t error)
{
    (void)error;
    return "stub";
}

void check_fail(const char *expr, const char *file, int line, const char *name, const char *text)
{
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, expr, name, text);
    exit(EXIT_FAILURE);
}

void *host_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count, size);
    if (!p) {
        fprintf(stderr, "out of memory for %s\n", what);
        exit(EXIT_FAILURE);
    }
    return p;
}

uint64_t fnv1a(const void *data, size_t bytes, uint64_t h)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 1099511628211ULL;
    return h;
}

// recorder_allgather's, never called here
void dist_enter_(dist_env *d, const char *expr) { (void)d, (void)expr; }
void dist_check_nccl_(dist_env *d, ncclResult_t result, const char *expr, const char *file, int line)
{
    (void)d, (void)result, (void)expr, (void)file, (void)line;
}
void dist_gather_begin(dist_env *d, dist_gather *g, const void *mine, size_t bytes, cudaStream_t stream)
{
    (void)d, (void)g, (void)mine, (void)bytes, (void)stream;
}
void dist_gather_end(dist_env *d, dist_gather *g, void *all, cudaStream_t stream)
{
    (void)d, (void)g, (void)all, (void)stream;
}
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)sendbuff, (void)recvbuff, (void)sendcount, (void)datatype, (void)comm, (void)stream;
    return ncclSuccess;
}

// ----------------------------------------------------------------------------
// the race

// Call `seq` as this test records it: every field follows from seq, so a torn entry shows.
static void record(flight_recorder *r, long long seq)
{
    recorder_record(r, FLIGHT_ALL_REDUCE, (long)seq, (int)(seq % 3), (size_t)(1000 + seq), sizeof(float), -1, NULL,
                    "comm");
}

typedef struct {
    flight_recorder *rec;
    int started;  // the main thread records: the stop may come
    int done;     // the ring was written: stop recording
} race;

// The main thread, back from NCCL: it records call after call while the ring is written.
static void *main_thread(void *arg)
{
    race *x = (race *)arg;
    for (long long k = 0; k < WRITES && !__atomic_load_n(&x->done, __ATOMIC_ACQUIRE); k++) {
        record(x->rec, x->rec->calls);
        __atomic_store_n(&x->started, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: flight-race DIR\n");
        return 2;
    }
    dist_env d;
    memset(&d, 0, sizeof d);
    d.rank = 0, d.world = 2;
    snprintf(d.folder, sizeof d.folder, "%s", argv[1]);
    snprintf(d.run, sizeof d.run, "race");
    snprintf(d.name, sizeof d.name, "flight-race");
    flight_recorder rec;
    recorder_init(&rec, &d, RING);
    for (long long seq = 0; seq < 3 * RING; seq++) record(&rec, seq);  // the ring has wrapped

    race x = {&rec, 0, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, main_thread, &x) != 0) return 1;
    while (!__atomic_load_n(&x.started, __ATOMIC_ACQUIRE)) sched_yield();  // the stop comes mid-recording
    recorder_write(&rec, "the watchdog claimed the stop");                 // the watchdog's stop hook
    __atomic_store_n(&x.done, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);

    char path[1200], why[1600];
    snprintf(path, sizeof path, "%s/flight.race.rank0", argv[1]);
    flight_ring ring;
    if (flight_read(path, &ring, why, sizeof why) != 0) {
        printf("the ring does not read: %s\n", why);
        return 1;
    }
    int bad = ring.n == 0 || ring.entries[ring.n - 1].seq != ring.calls - 1;
    if (bad) printf("the ring does not end at the last call its header names (%lld)\n", ring.calls - 1);
    for (int k = 0; k < ring.n && !bad; k++) {
        const flight_entry *e = &ring.entries[k];
        if (e->batch != e->seq || e->part != e->seq % 3 || e->count != 1000 + e->seq || e->bytes != 4 * e->count ||
            (k > 0 && e->seq != ring.entries[k - 1].seq + 1)) {
            printf("entry %d is torn or out of place: seq %lld, batch %lld, part %d, count %lld\n", k, e->seq, e->batch,
                   e->part, e->count);
            bad = 1;
        }
    }
    if (!bad) printf("the ring reads: %d calls, the last %lld, none torn\n", ring.n, ring.calls - 1);
    flight_free(&ring);
    recorder_destroy(&rec);
    return bad;
}
