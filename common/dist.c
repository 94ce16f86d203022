// dist.c: ranks, rendezvous, communicator, and stopping when a rank fails (dist.h).
#define _POSIX_C_SOURCE 200809L
#include "dist.h"

#include <errno.h>
#include <sched.h>     // sched_yield
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: the folder, the notes
#include <time.h>      // clock_gettime, nanosleep
#include <unistd.h>    // getpid, unlink, fsync

#include "args.h"        // parse_int, usage_error
#include "check.h"       // CUDA_CHECK, check_fail
#include "exit_codes.h"  // EXIT_USAGE, EXIT_NO_GPU
#include "memory.h"      // device_alloc, pinned_alloc and their frees

#define NOTE_EVERY_S 0.05   // how often a waiting rank looks for the others' failure notes
#define STALE_NOTE_S 60.0   // a note older than this process by more than this is an earlier run's
#define ID_POLL_NS 10000000 // how often the other ranks look for rank 0's id file: 10 ms

static dist_env *at_exit;   // the process's one rank, for the note of an early exit

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

// ----------------------------------------------------------------------------
// who this process is

// Reads an integer variable; returns 0 when it is not set. A value that is not a
// whole number in [min, max] is a usage error.
static int read_env(const dist_env *d, const char *var, int min, int max, int *out)
{
    const char *text = getenv(var);
    if (!text || !*text) return 0;
    long long v = 0;
    if (!parse_int(text, &v) || v < min || v > max)
        usage_error(d->prog, "%s=%s: expected a whole number from %d to %d (set by the launcher)", var, text, min,
                    max);
    *out = (int)v;
    return 1;
}

// Keeps [A-Za-z0-9._-]: a run id becomes part of file names.
static void safe_copy(char *out, size_t size, const char *text)
{
    size_t n = 0;
    for (; text && *text && n + 1 < size; text++) {
        char c = *text;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        out[n++] = ok ? c : '_';
    }
    out[n] = '\0';
}

static void note_path(const dist_env *d, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s/failed.%s.rank%d", d->folder, d->run, rank);
}

static void write_note(const dist_env *d, const char *message);

// A rank that exits between the rendezvous and dist_finish (a CUDA error, a failed
// check) leaves a note, so that the others stop now rather than at the time limit.
// Before the rendezvous every rank fails alike (the same options, the same checks),
// and a note then could outlive this run in a folder that is used again.
static void note_early_exit(void)
{
    dist_env *d = at_exit;
    if (!d || !d->connecting || d->finished || d->stopping || d->world == 1 || !d->folder[0]) return;
    write_note(d, "exited before the end of the run (its own message says why)");
}

void dist_init(dist_env *d, const char *prog)
{
    memset(d, 0, sizeof *d);
    d->prog = prog;
    d->world = 1;
    d->timeout_s = DIST_TIMEOUT_S;
    d->started_s = wall_s();
    int rank = 0, world = 1, local = 0, local_world = 0;
    if (getenv("RANK") || getenv("WORLD_SIZE")) {
        d->launcher = DIST_LAUNCH;
        if (!read_env(d, "WORLD_SIZE", 1, 65536, &world))
            usage_error(prog, "RANK is set but WORLD_SIZE is not: run under tools/launch, torchrun or mpirun");
        if (!read_env(d, "RANK", 0, 65535, &rank))
            usage_error(prog, "WORLD_SIZE is set but RANK is not: run under tools/launch, torchrun or mpirun");
        if (!read_env(d, "LOCAL_RANK", 0, 65535, &local)) local = rank;
        read_env(d, "LOCAL_WORLD_SIZE", 1, 65536, &local_world);
    } else if (getenv("OMPI_COMM_WORLD_RANK")) {
        d->launcher = DIST_MPIRUN;
        read_env(d, "OMPI_COMM_WORLD_SIZE", 1, 65536, &world);
        read_env(d, "OMPI_COMM_WORLD_RANK", 0, 65535, &rank);
        if (!read_env(d, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 65535, &local)) local = rank;
        read_env(d, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 65536, &local_world);
    }
    if (rank >= world) usage_error(prog, "rank %d is not below the world size %d (the launcher's environment)", rank, world);
    if (local_world && local >= local_world)
        usage_error(prog, "LOCAL_RANK %d is not below LOCAL_WORLD_SIZE %d (the launcher's environment)", local, local_world);
    if (local_world > world)
        usage_error(prog, "LOCAL_WORLD_SIZE %d is larger than WORLD_SIZE %d (the launcher's environment)", local_world, world);
    d->rank = rank;
    d->world = world;
    d->local_rank = local;
    d->local_world = local_world;
    if (world > 1)
        snprintf(d->name, sizeof d->name, "%s rank %d", prog, rank);
    else
        snprintf(d->name, sizeof d->name, "%s", prog);
    const char *run = getenv("RUN_ID");
    if (!run || !*run) run = getenv("TORCHELASTIC_RUN_ID");
    if (!run || !*run) run = getenv("PMIX_NAMESPACE");  // Open MPI 5: one per mpirun
    safe_copy(d->run, sizeof d->run, run && *run ? run : "run");
    // NVLink multicast (NVLS) stays off on the shared machines, whoever starts us
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    at_exit = d;
    atexit(note_early_exit);
}

void dist_configure(dist_env *d, const char *folder, double timeout_s)
{
    d->timeout_s = timeout_s;
    const char *from = "--rendezvous";
    if (!folder || !*folder) {
        folder = getenv("RENDEZVOUS_DIR");
        from = "RENDEZVOUS_DIR";
    }
    if (folder && *folder) {
        struct stat st;
        if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
            usage_error(d->name, "%s %s: no such folder (the rendezvous folder must exist and be shared by every rank)",
                        from, folder);
        if (strlen(folder) >= sizeof d->folder - 64) usage_error(d->name, "%s %s: the path is too long", from, folder);
        snprintf(d->folder, sizeof d->folder, "%s", folder);
    } else if (d->world > 1) {
        usage_error(d->name, "%d ranks need a rendezvous folder that every rank sees: --rendezvous DIR or "
                             "RENDEZVOUS_DIR (tools/launch makes one)", d->world);
    }
}

void dist_select_device(dist_env *d)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;  // gpu_open says why (exit code 3)
    int need = d->local_world > 0 ? d->local_world : d->local_rank + 1;
    if (need > count) {
        fprintf(stderr, "%s: no usable GPU for this rank: %d rank%s on this machine need as many GPUs, %d visible\n",
                d->name, need, need == 1 ? "" : "s", count);
        exit(EXIT_NO_GPU);
    }
    CUDA_CHECK(cudaSetDevice(d->local_rank));
}

// ----------------------------------------------------------------------------
// notes, and the checks every wait makes

static void write_note(const dist_env *d, const char *message)
{
    char path[1200], tmp[1300];
    note_path(d, d->rank, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;  // nothing more to do: the others will stop at their time limit
    fprintf(f, "%s\n", message);
    int bad = fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) unlink(tmp);
}

// The lowest rank (not this one) that left a note in this run, with its message; -1 if none.
static int failed_rank(const dist_env *d, char *message, size_t size)
{
    if (!d->folder[0]) return -1;
    for (int r = 0; r < d->world; r++) {
        char path[1200];
        struct stat st;
        if (r == d->rank) continue;
        note_path(d, r, path, sizeof path);
        if (stat(path, &st) != 0 || (double)st.st_mtime < d->started_s - STALE_NOTE_S) continue;
        FILE *f = fopen(path, "r");
        message[0] = '\0';
        if (f) {
            if (!fgets(message, (int)size, f)) message[0] = '\0';
            fclose(f);
        }
        message[strcspn(message, "\n")] = '\0';
        return r;
    }
    return -1;
}

typedef struct {
    double since, next_note;
    const char *what;  // what this rank is waiting for, for the message
} watch;

static watch watch_start(const char *what)
{
    double now = mono_s();
    watch w = {now, now + NOTE_EVERY_S, what};
    return w;
}

// What every wait for another rank checks, each time round: NCCL's asynchronous error,
// the others' notes (every 50 ms), the time limit.
static void watch_others(dist_env *d, watch *w)
{
    if (d->comm) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(d->comm, &state);
        if (r != ncclSuccess) dist_abort(d, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(r));
        if (state != ncclSuccess && state != ncclInProgress)
            dist_abort(d, "NCCL reported %s while this rank was %s (%s)", ncclGetErrorString(state), w->what,
                       ncclGetLastError(d->comm));
    }
    double now = mono_s();
    if (now >= w->next_note) {
        char message[256];
        int r = failed_rank(d, message, sizeof message);
        if (r >= 0) dist_abort(d, "noticed while %s", w->what);
        w->next_note = now + NOTE_EVERY_S;
    }
    if (now - w->since > d->timeout_s)
        dist_abort(d, "nothing happened for %.0f s while %s: a rank may have died without a note (--timeout-s)",
                   d->timeout_s, w->what);
}

// Polls a communicator until the operation in progress on it is done; returns its result.
static ncclResult_t wait_comm(dist_env *d, ncclComm_t comm, const char *what)
{
    watch w = watch_start(what);
    for (;;) {
        ncclResult_t state = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) return r;
        if (state != ncclInProgress) return state;
        if (mono_s() >= w.next_note) {
            char message[256];
            if (failed_rank(d, message, sizeof message) >= 0) dist_abort(d, "noticed while %s", what);
            w.next_note = mono_s() + NOTE_EVERY_S;
        }
        if (mono_s() - w.since > d->timeout_s)
            dist_abort(d, "nothing happened for %.0f s while %s: a rank may have died without a note (--timeout-s)",
                       d->timeout_s, what);
        sched_yield();
    }
}

static ncclResult_t wait_nccl(dist_env *d, const char *what) { return wait_comm(d, d->comm, what); }

void dist_split_ready(dist_env *d, ncclComm_t *child)
{
    // with a non-blocking parent, NCCL's thread writes *child when the new communicator exists
    ncclResult_t r = wait_nccl(d, "splitting a communicator");
    watch w = watch_start("splitting a communicator");
    while (r == ncclSuccess && __atomic_load_n(child, __ATOMIC_ACQUIRE) == NULL) {
        watch_others(d, &w);
        if (mono_s() - w.since > 10) dist_abort(d, "ncclCommSplit gave no communicator within 10 s");
        sched_yield();
    }
    if (r == ncclSuccess) r = wait_comm(d, *child, "splitting a communicator");
    if (r != ncclSuccess)
        dist_abort(d, "ncclCommSplit failed: %s (%s)", ncclGetErrorString(r), ncclGetLastError(d->comm));
}

void dist_check_nccl_(dist_env *d, ncclResult_t result, const char *expr, const char *file, int line)
{
    if (result == ncclInProgress && d->comm) result = wait_nccl(d, "NCCL issued a call");
    if (result != ncclSuccess)
        dist_abort(d, "%s:%d: %s failed: %s (%s)", file, line, expr, ncclGetErrorString(result),
                   d->comm ? ncclGetLastError(d->comm) : ncclGetLastError(NULL));
}

cudaError_t dist_event_wait(dist_env *d, cudaEvent_t event)
{
    watch w = watch_start("waiting for the GPU");
    for (;;) {
        cudaError_t err = cudaEventQuery(event);
        if (err != cudaErrorNotReady) return err;
        watch_others(d, &w);
        sched_yield();
    }
}

static void vstop(dist_env *d, const char *fmt, va_list ap)
{
    char message[512];
    vsnprintf(message, sizeof message, fmt, ap);
    char note[256];
    int r = failed_rank(d, note, sizeof note);
    if (r >= 0)
        fprintf(stderr, "%s: rank %d failed (%s); %s; aborting\n", d->name, r, note[0] ? note : "no reason given",
                message);
    else
        fprintf(stderr, "%s: %s; aborting\n", d->name, message);
}

void dist_abort(dist_env *d, const char *fmt, ...)
{
    if (d->stopping) exit(EXIT_FAILURE);  // an error while stopping: stop now
    d->stopping = 1;
    va_list ap;
    va_start(ap, fmt);
    vstop(d, fmt, ap);
    va_end(ap);
    fflush(stderr);
    // aborting frees NCCL's kernels from waiting for a rank that will never come
    if (d->comm) ncclCommAbort(d->comm);  // its answer does not matter: the process ends
    d->comm = NULL;
    exit(EXIT_FAILURE);
}

void dist_fail(dist_env *d, const char *fmt, ...)
{
    if (d->stopping) exit(EXIT_FAILURE);
    d->stopping = 1;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (d->folder[0] && d->world > 1) write_note(d, message);  // first: the others read it
    fprintf(stderr, "%s: %s\n", d->name, message);
    fflush(stderr);
    if (d->comm) ncclCommAbort(d->comm);
    d->comm = NULL;
    exit(EXIT_FAILURE);
}

// ----------------------------------------------------------------------------
// the rendezvous

static void id_path(const dist_env *d, char *out, size_t size) { snprintf(out, size, "%s/nccl-id.%s", d->folder, d->run); }

static void write_id(dist_env *d, const ncclUniqueId *id)
{
    char path[1200], tmp[1300];
    id_path(d, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) dist_fail(d, "cannot write %s: %s", tmp, strerror(errno));
    for (size_t k = 0; k < sizeof id->internal; k++) fprintf(f, "%02x", (unsigned char)id->internal[k]);
    fputc('\n', f);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad = fclose(f) != 0 || bad;
    // a rename is atomic: a rank that finds the file finds all of it
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        dist_fail(d, "cannot write %s: %s", path, strerror(errno));
    }
}

// 1 when the file holds a whole id.
static int read_id_file(const char *path, ncclUniqueId *id)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char hex[2 * sizeof id->internal + 2];
    int ok = fgets(hex, sizeof hex, f) != NULL && strlen(hex) >= 2 * sizeof id->internal;
    fclose(f);
    for (size_t k = 0; ok && k < sizeof id->internal; k++) {
        unsigned v = 0;
        ok = sscanf(hex + 2 * k, "%2x", &v) == 1;
        id->internal[k] = (char)v;
    }
    return ok;
}

static void read_id(dist_env *d, ncclUniqueId *id)
{
    char path[1200];
    id_path(d, path, sizeof path);
    watch w = watch_start("waiting for rank 0's NCCL id in the rendezvous folder");
    while (!read_id_file(path, id)) {
        if (mono_s() - w.since > d->timeout_s)
            dist_abort(d, "rank 0's NCCL id did not appear in %s within %.0f s: is rank 0 running, and does it see the "
                          "same folder? (--timeout-s)", path, d->timeout_s);
        watch_others(d, &w);
        nap(ID_POLL_NS);
    }
}

void dist_connect(dist_env *d)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    d->connecting = 1;
    if (d->rank == 0) {
        NCCL_CHECK(d, ncclGetUniqueId(&id));
        if (d->world > 1) write_id(d, &id);
    } else {
        read_id(d, &id);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every NCCL call returns at once: this rank polls, and can give up
    d->comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&d->comm, d->world, id, d->rank, &config);
    if (r == ncclInProgress && d->comm) r = wait_nccl(d, "joining the communicator");
    if (r != ncclSuccess)
        dist_abort(d, "ncclCommInitRankConfig failed: %s (%s)", ncclGetErrorString(r), ncclGetLastError(d->comm));
    if (d->rank == 0 && d->world > 1) {  // every rank has read it: the communicator exists
        char path[1200];
        id_path(d, path, sizeof path);
        unlink(path);
    }
}

// ----------------------------------------------------------------------------

void dist_allgather(dist_env *d, const void *mine, void *all, size_t bytes, cudaStream_t stream)
{
    size_t total = bytes * (size_t)d->world;
    unsigned char *d_all = (unsigned char *)device_alloc(total), *h_all = (unsigned char *)pinned_alloc(total);
    cudaEvent_t landed;
    CUDA_CHECK(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming));
    memcpy(h_all + bytes * (size_t)d->rank, mine, bytes);
    CUDA_CHECK(cudaMemcpyAsync(d_all + bytes * (size_t)d->rank, h_all + bytes * (size_t)d->rank, bytes,
                               cudaMemcpyHostToDevice, stream));
    // in place: this rank's part already sits where the gathered array puts it
    NCCL_CHECK(d, ncclAllGather(d_all + bytes * (size_t)d->rank, d_all, bytes, ncclUint8, d->comm, stream));
    CUDA_CHECK(cudaMemcpyAsync(h_all, d_all, total, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(landed, stream));
    CUDA_CHECK(dist_event_wait(d, landed));
    memcpy(all, h_all, total);
    CUDA_CHECK(cudaEventDestroy(landed));
    device_free(d_all);
    pinned_free(h_all);
}

void dist_finish(dist_env *d)
{
    if (d->comm) {
        NCCL_CHECK(d, ncclCommFinalize(d->comm));  // polled: it completes once every rank's work is done
        ncclResult_t r = ncclCommDestroy(d->comm);
        d->comm = NULL;
        if (r != ncclSuccess) {
            fprintf(stderr, "%s: ncclCommDestroy failed: %s\n", d->name, ncclGetErrorString(r));
            exit(EXIT_FAILURE);
        }
    }
    d->finished = 1;
}

void dist_rank_path(const dist_env *d, const char *path, char *out, size_t size)
{
    size_t n = strlen(path);
    if (d->world == 1)
        snprintf(out, size, "%s", path);
    else if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        snprintf(out, size, "%.*s.rank%d.json", (int)(n - 5), path, d->rank);
    else
        snprintf(out, size, "%s.rank%d", path, d->rank);
}

void dist_nccl_version(char *out, size_t size)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    snprintf(out, size, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
}

const char *dist_launcher_name(dist_launcher l)
{
    return l == DIST_LAUNCH ? "tools/launch or torchrun" : l == DIST_MPIRUN ? "mpirun" : "none";
}
