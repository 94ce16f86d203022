// dist.h: the bootstrap of a data-parallel program: one process per GPU, each a rank
// of an NCCL communicator. Lesson 12 stands on it; what it teaches is the overlap.
// In the order main calls it:
//
//   dist_init           who this process is, from its launcher: RANK, WORLD_SIZE,
//                       LOCAL_RANK, LOCAL_WORLD_SIZE (tools/launch, torchrun), or
//                       OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE (mpirun);
//                       neither: one rank. Touches no GPU.
//   dist_configure      the rendezvous folder (--rendezvous, else $RENDEZVOUS_DIR), which
//                       every rank must see; several ranks need one (exit code 2).
//   dist_select_device  cudaSetDevice(LOCAL_RANK); more ranks on this machine than GPUs:
//                       exit code 3.
//   dist_connect        rank 0 writes NCCL's unique id into the folder (a temporary file,
//                       then rename: the others never read half a file), the others wait
//                       for it with a time limit; then ncclCommInitRankConfig with a
//                       non-blocking communicator (config.blocking = 0), polled.
//   NCCL_CHECK          every NCCL call. With a non-blocking communicator a call may answer
//                       ncclInProgress: NCCL is still issuing it from a thread of its own,
//                       and nothing else may be queued on its stream until
//                       ncclCommGetAsyncError says ncclSuccess. NCCL_CHECK polls until then;
//                       an error aborts.
//   dist_event_wait     the host's wait for an event, polled: meanwhile it asks NCCL for an
//                       asynchronous error, looks for a note left by a rank that failed,
//                       and watches the time limit (--timeout-s). On any of them it aborts.
//   dist_fail           this rank stops with an error: it leaves a note in the folder
//                       (failed.RUN.rankR), says why, and exits with code 1.
//   dist_abort          another rank failed, or NCCL did: ncclCommAbort (NCCL's kernels
//                       stop waiting for the dead rank), one line naming the failed rank,
//                       exit code 1. No rank hangs.
//   dist_finish         ncclCommFinalize (polled), then ncclCommDestroy.
//
// A rank that exits early for any other reason after the rendezvous began (a CUDA
// error, a failed check) leaves a note too (an atexit handler), so that the others
// stop at once rather than at the time limit.
#ifndef COMMON_DIST_H
#define COMMON_DIST_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>  // cudaEvent_t, cudaStream_t, cudaError_t
#include <nccl.h>          // ncclComm_t, ncclResult_t, the collectives

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_TIMEOUT_S 30.0  // the longest wait for another rank, by default (--timeout-s)

typedef enum { DIST_ALONE, DIST_LAUNCH, DIST_MPIRUN } dist_launcher;

typedef struct {
    const char *prog;
    char name[128];           // "PROG rank R" with several ranks, PROG alone: how messages begin
    int rank, world;          // this process is rank `rank` of `world`
    int local_rank;           // on this machine: its GPU
    int local_world;          // ranks on this machine (0: the launcher did not say)
    dist_launcher launcher;
    char folder[1024];        // the rendezvous folder ("" with one rank and none given)
    char run[64];             // names this run's files in the folder: RUN_ID, or the MPI job's
    double timeout_s;
    double started_s;         // this process's start (wall clock): older failure notes are stale
    ncclComm_t comm;          // NULL until dist_connect
    int connecting;           // dist_connect has begun: an early exit from now on leaves a note
    int stopping;             // dist_fail or dist_abort is under way
    int finished;             // dist_finish ran: a normal end, no note
} dist_env;

// Reads the launcher's environment (exit code 2 when its values do not add up) and
// names the process. Also sets NCCL_NVLS_ENABLE=0: NVLink multicast stays off on the
// course's shared machines. Call first: args_parse's messages use d->name.
void dist_init(dist_env *d, const char *prog);

// The rendezvous folder (`folder`, else $RENDEZVOUS_DIR) and the time limit of every
// wait for another rank. Exit code 2 when a folder is named but does not exist, or
// when several ranks have none.
void dist_configure(dist_env *d, const char *folder, double timeout_s);

// cudaSetDevice(LOCAL_RANK). Exit code 3 when this machine has fewer GPUs than ranks
// on it. Where there is no GPU at all it returns: gpu_open says so (exit code 3).
void dist_select_device(dist_env *d);

// The rendezvous and the communicator. Every rank calls it.
void dist_connect(dist_env *d);

// Polls `event` until it has completed; returns cudaSuccess, or the CUDA error. Aborts
// (does not return) when another rank failed, NCCL reported an error, or nothing
// happened for --timeout-s. Use it inside HOST_SYNC or SLOT_WAIT like any CUDA wait.
cudaError_t dist_event_wait(dist_env *d, cudaEvent_t event);

// Checks an NCCL call on d's communicator, polling while it is in progress.
#define NCCL_CHECK(d, expr) dist_check_nccl_((d), (expr), #expr, __FILE__, __LINE__)
void dist_check_nccl_(dist_env *d, ncclResult_t result, const char *expr, const char *file, int line);

// After ncclCommSplit of the non-blocking communicator: polls the parent, waits for NCCL to
// write the new one (it may answer before then, *child still NULL), then polls the new one:
// a second split or call on the parent before then fails. One clear line and exit 1 on an error.
void dist_split_ready(dist_env *d, ncclComm_t *child);

// This rank stops: leaves its note (the message) for the others, prints the message
// on stderr, aborts its communicator, exits with code 1.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_fail(dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Stops this rank because of what it saw (fmt); names the rank that failed first when
// one left a note. ncclCommAbort, one line on stderr, exit code 1.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_abort(dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Gathers `bytes` bytes from every rank into all[] (rank r's at all + r * bytes), on
// `stream`, and waits (polled). For the checks after the runs.
void dist_allgather(dist_env *d, const void *mine, void *all, size_t bytes, cudaStream_t stream);

// ncclCommFinalize (polled) and ncclCommDestroy: a normal end.
void dist_finish(dist_env *d);

// `path` for this rank: "t.json" becomes "t.rank1.json" (any other name gains ".rank1")
// when there are several ranks, so that every rank writes its own file.
void dist_rank_path(const dist_env *d, const char *path, char *out, size_t size);

// "2.28.9": the NCCL library this process runs with.
void dist_nccl_version(char *out, size_t size);

// "tools/launch or torchrun", "mpirun", "none".
const char *dist_launcher_name(dist_launcher l);

#ifdef __cplusplus
}
#endif
#endif
