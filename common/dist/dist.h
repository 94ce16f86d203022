// dist.h: the bootstrap of a program of several ranks, one process per GPU, each a rank of
// NCCL communicators. Lessons 12 and later stand on it; what they teach is what they do with it.
// It stands on common's base (args, checks, timing, json, own_file) and gpu (memory: the buffers
// of the all-gathers; kernels: the spin of a hang), as tests/00_course's layer table says, never on
// the trainer or the harness: its files, bottom up, are dist_notes.c, dist_stop.c, dist_rendezvous.c,
// dist_watchdog.c, dist_watch.c, dist_env.c, dist_fault.c and dist_connect.c (dist_parts.h).
// Lesson 12 types the calls it teaches with these pieces (meet.cu, stop.cu).
// In the order main calls it:
//
//   dist_init           who this process is, from its launcher: RANK, WORLD_SIZE, LOCAL_RANK,
//                       LOCAL_WORLD_SIZE (tools/launch, torchrun); OMPI_COMM_WORLD_* (mpirun);
//                       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun); none: one rank.
//                       Touches no GPU. (dist_env.c)
//   dist_configure      the rendezvous folder (--rendezvous, else $RENDEZVOUS_DIR), which
//                       every rank must see; several ranks need one (exit code 2).
//   dist_select_device  cudaSetDevice(LOCAL_RANK); more ranks on this machine than GPUs:
//                       exit code 3 (tools/launch --simulate-nodes runs them on one GPU).
//   dist_connect        how the ranks meet (lesson 12's meet.cu shows it step by step, with these
//                       pieces): dist_meet_begin; rank 0 writes NCCL's unique id into the folder
//                       (dist_write_id), the others wait for it (dist_read_id: ids of earlier runs
//                       are never read as this run's); ncclCommInitRankConfig, non-blocking, its
//                       communicator watched (dist_watch) and polled (dist_wait_issued); then
//                       dist_connected: every rank says which GPU it runs on (several ranks on one
//                       GPU are simulated nodes).
//   NCCL_CHECK          every NCCL call, on any communicator the rank holds (dist_watch.c).
//                       While the call runs a watchdog thread watches it: a call that blocks
//                       (a connect, a finalize, an abort) cannot outlive another rank's failure
//                       or --timeout-s. A non-blocking call that answers ncclInProgress is
//                       polled until every communicator is done with what it was issuing.
//   dist_event_wait     the host's wait for an event, polled: meanwhile it asks every
//                       communicator for an asynchronous error, looks for a note left by a
//                       rank that failed, and watches --timeout-s. On any of them it aborts.
//   dist_split_ready    after ncclCommSplit: waits until the new communicator exists, and
//                       watches it with the others.
//   dist_fail           this rank stops with an error: it leaves a note in the folder, says
//                       why, aborts every communicator, exits with code 1.
//   dist_hang           this rank stops answering, as a GPU that hangs: the others, and this
//                       rank itself, give up after --timeout-s (the path a note cannot take).
//   dist_abort          another rank failed, NCCL did, or the time ran out: ncclCommAbort of
//                       every communicator, one line naming the failed rank, exit code 1.
//   dist_finish         ncclCommFinalize and ncclCommDestroy of every communicator: a normal end.
//
// A rank that exits early for any other reason after the rendezvous began (a CUDA error, a
// failed check) leaves a note too (an atexit handler), so that the others stop at once.
#ifndef COMMON_DIST_H
#define COMMON_DIST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime.h>  // cudaEvent_t, cudaStream_t, cudaError_t
#include <nccl.h>          // ncclComm_t, ncclResult_t, the collectives

#include "common/base/args.h"   // arg_spec
#include "common/base/check.h"  // CALL_TEXT
#include "common/base/json.h"   // json_writer

#ifdef __cplusplus
extern "C" {
#endif

#define DIST_TIMEOUT_S 30.0  // the longest wait for another rank, by default (--timeout-s)
#define DIST_MAX_COMMS 8     // communicators one rank holds at most (13: the parent and two links)

typedef enum { DIST_ALONE, DIST_LAUNCH, DIST_MPIRUN, DIST_SRUN } dist_launcher;

typedef struct {
    const char *prog;
    char name[128];   // "PROG rank R" with several ranks, PROG alone: how messages begin
    int rank, world;  // this process is rank `rank` of `world`
    int local_rank;   // on this machine: its GPU
    int local_world;  // ranks on this machine (0: the launcher did not say)
    dist_launcher launcher;
    int simulate_asked;  // tools/launch --simulate-nodes said so (SIMULATED_NODES=1)
    char folder[1024];   // the rendezvous folder ("" with one rank and none given)
    char run[64];        // names this run's files in the folder: RUN_ID, the job's, or "run" (%XX for a
                         // character other than letters, digits, '.', '_' and '-': one id, one name)
    double timeout_s;
    double started_s;  // this process's start (wall clock)

    // after dist_connect
    ncclComm_t comm;       // the parent communicator, every rank in it; NULL before
    char fingerprint[17];  // this run's own: a hash of NCCL's unique id ("" before)
    int gpus;              // distinct GPUs the ranks run on (host name and GPU UUID)
    int simulated;         // simulated nodes: several ranks share a GPU, or the launcher said so

    // every communicator this rank holds, the parent first: watched and aborted together
    ncclComm_t comms[DIST_MAX_COMMS];
    const char *comm_names[DIST_MAX_COMMS];
    int ncomms;

    // the NCCL call in progress, for the watchdog thread (read and written atomically)
    const char *inside;  // the call as written, or NULL
    long long inside_since_ns;
    pthread_t watchdog;
    int watchdog_running;

    int connecting;  // dist_connect has begun: an early exit from now on leaves a note
    int stopping;    // dist_fail, dist_abort or the watchdog is stopping this rank
    int finished;    // dist_finish ran: a normal end, no note

    // called once, by whichever thread claims the stop (dist_fail, dist_abort, the watchdog),
    // before the rank says why and aborts: lesson 14's flight recorder writes its ring there
    void (*on_stop)(void *ctx);
    void *on_stop_ctx;

    // the stop's timeline (wall clock, s; 0: not yet), one line on stderr as the rank ends
    double note_s;   // the failure note the stop answers: another rank's, or this rank's own
    int note_rank;   // whose note (-1: none, the stop is this rank's own: its time limit, NCCL's error)
    double stop_s;   // this rank began to stop (claimed the stop)
    double abort_s;  // it began to abort its communicators
} dist_env;

// Reads the launcher's environment (exit code 2 when its values do not add up) and names the
// process. Also sets NCCL_NVLS_ENABLE=0: NVLink multicast stays off on the course's shared
// machines. Call first: args_parse's messages use d->name.
void dist_init(dist_env *d, const char *prog);

// The rendezvous folder (`folder`, else $RENDEZVOUS_DIR) and the time limit of every wait for
// another rank. Exit code 2 when a folder is named but does not exist, or when several ranks
// have none.
void dist_configure(dist_env *d, const char *folder, double timeout_s);

// cudaSetDevice(LOCAL_RANK). Exit code 3 when this machine has fewer GPUs than ranks on it.
// Where there is no GPU at all it returns: gpu_open says so (exit code 3).
void dist_select_device(dist_env *d);

// The rendezvous, the parent communicator, and which GPU every rank runs on. Every rank calls
// it, after gpu_open. Lesson 12's meet.cu writes the same with the pieces below.
void dist_connect(dist_env *d);

// The meeting begins: from here an early exit leaves a note, and (several ranks) a watchdog
// thread watches every NCCL call that could block.
void dist_meet_begin(dist_env *d);
// Rank 0: NCCL's unique id into the rendezvous folder, marked as this run's. The others: waits
// (watched) until this run's id is there and reads it; aborts at --timeout-s.
void dist_write_id(dist_env *d, const ncclUniqueId *id);
void dist_read_id(dist_env *d, ncclUniqueId *id);
// From now on `comm` is polled and aborted with every other communicator of d, under `name` in
// messages ("the parent communicator"). A NULL comm (NCCL made none) is left out.
void dist_watch(dist_env *d, ncclComm_t comm, const char *name);
// Polls every watched communicator (ncclCommGetAsyncError) until none is ncclInProgress; returns
// ncclSuccess or the first error. Meanwhile watches the others' notes and --timeout-s (aborts).
ncclResult_t dist_wait_issued(dist_env *d, const char *what);
// The meeting has ended: `comm` is d's parent communicator. Rank 0 removes the id from the
// folder (every rank has read it); every rank says which GPU it runs on (d->gpus, d->simulated).
void dist_connected(dist_env *d, ncclComm_t comm);

// Polls `event` until it has completed; returns cudaSuccess, or the CUDA error. Aborts (does
// not return) when another rank failed, NCCL reported an error, or nothing happened for
// --timeout-s. Use it inside HOST_SYNC or SLOT_WAIT like any CUDA wait.
cudaError_t dist_event_wait(dist_env *d, cudaEvent_t event);
// The same as a wait of lesson 08's loss ring (loss_ring_wait_with(r, dist_polled_wait, d)).
cudaError_t dist_polled_wait(void *d, cudaEvent_t event);

// What every polled wait watches besides its own event or call: another rank's failure note
// (looked for every 50 ms) and --timeout-s. For a wait a lesson writes itself (12's stop.cu).
typedef struct {
    double since_ms, next_note_ms;
    const char *what;  // what this rank is waiting for, for the message ("waiting for the GPU")
    int timed;         // 0: no time limit (a rank that hangs on purpose waits for the others' word)
} dist_waiting;
dist_waiting dist_waiting_start(const char *what);
// 1 when the wait must stop the rank, `why` saying so in a few words: another rank left a note
// ("noticed while ..."), or nothing happened for --timeout-s (this rank then leaves a note too).
int dist_waiting_over(dist_env *d, dist_waiting *w, char *why, size_t size);
// The same, and every communicator's asynchronous error: aborts (does not return) on any of them.
void dist_waiting_watch(dist_env *d, dist_waiting *w);

// Checks an NCCL call on any of d's communicators, the watchdog watching it while it runs.
#define NCCL_CHECK(d, expr)                                                  \
    do {                                                                     \
        dist_enter_((d), CALL_TEXT(#expr));                                  \
        dist_check_nccl_((d), (expr), CALL_TEXT(#expr), __FILE__, __LINE__); \
    } while (0)
void dist_enter_(dist_env *d, const char *expr);
void dist_check_nccl_(dist_env *d, ncclResult_t result, const char *expr, const char *file, int line);

// After ncclCommSplit of the non-blocking parent: waits for NCCL to write the new communicator
// (it may answer before then, *child still NULL), polls it until it is ready, and watches it
// from then on under `name` ("the forward link"). One line and exit 1 on an error.
void dist_split_ready(dist_env *d, ncclComm_t *child, const char *name);

// ncclCommFinalize (watched, polled) and ncclCommDestroy of one of d's communicators; *comm
// becomes NULL. dist_finish does this for every communicator still open, the parent last.
void dist_close(dist_env *d, ncclComm_t *comm);
// `comm` is no longer polled or aborted with the others (a lesson that destroys it itself).
void dist_unwatch(dist_env *d, ncclComm_t comm);

// The first step of every stop (dist_fail, dist_abort, 12's stop.cu): this thread claims the stop
// and runs the stop hook; from then on the watchdog ends the process if the stop blocks for more
// than a few seconds. Where the watchdog (or an earlier stop) has claimed it already, the process
// ends here, its message out.
void dist_stop_begin(dist_env *d);
// One line on stderr: "NAME: MESSAGE; aborting", or "NAME: rank R failed (ITS NOTE); MESSAGE;
// aborting" when another rank of this run left a note (the lowest such rank). The abort begins:
// when the process exits, one more line says where the stop's seconds went ("NAME: stop timeline,
// seconds from ...": its start, its stop, its abort and its end, against the note it answers).
void dist_say_stop(dist_env *d, const char *message);

// This rank stops: leaves its note (the message) for the others, prints the message on
// stderr, aborts its communicators, exits with code 1.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_fail(dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// This rank stops answering, as when its GPU hangs, and leaves no note: a kernel that spins for
// an hour on `stream`, and a wait for it. The others give up after --timeout-s, and so does
// this rank's own wait (it aborts). Prints the message first.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_hang(dist_env *d, cudaStream_t stream, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Stops this rank because of what it saw (fmt); names the rank that failed first when one left
// a note. ncclCommAbort of every communicator, one line on stderr, exit code 1.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_abort(dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// A failure on purpose, the same three options in every lesson from 12:
//   --fault WHAT --fault-rank R --fault-at-batch N   (the three go together; rank R, at batch N)
// WHAT is one of the lesson's own words, "none" first (kind 0): 12, 13 and 15 pass
// DIST_FAULT_WORDS, and dist_fault_inject stops rank R at the top of batch N with an error
// (dist_fail: a note, noticed by the others at once) or by hanging (dist_hang: no note, the
// others give up after --timeout-s); 14 and 16 pass their own words and inject them themselves
// (dist_fault_now). A fault strikes in a launch's first attempt only: a restart (tools/launch
// --restarts, LAUNCH_ATTEMPT) runs clean.
typedef enum { DIST_FAULT_NONE, DIST_FAULT_ERROR, DIST_FAULT_HANG } dist_fault_kind;  // DIST_FAULT_WORDS, in order
#define DIST_FAULT_WORDS "none|error|hang"
#define DIST_FAULT_HELP                                                                            \
    "fail on purpose: stop with an error and leave a note for the others, or hang (the GPU stops " \
    "answering, no note: the others give up after --timeout-s)"
typedef struct {
    int kind;            // the index of --fault's word in the lesson's words: 0 (none) by default
    int rank, at_batch;  // -1: none
    int attempt;         // the launch's attempt (dist_launch_attempt): 0 the first, 1 the first restart, ...
} dist_fault;
// Adds --fault (words, "none|..."; help), --fault-rank and --fault-at-batch to specs[*n].
void dist_fault_options(dist_fault *f, const char *words, const char *help, arg_spec *specs, int *n);
void dist_fault_check(const dist_env *d, const dist_fault *f, int batches);                 // usage errors: exit code 2
void dist_fault_inject(dist_env *d, const dist_fault *f, long batch, cudaStream_t stream);  // DIST_FAULT_WORDS' faults
// LAUNCH_ATTEMPT, set by tools/launch --restarts: 0 the first attempt (and where it is unset); a
// value that is no whole number is a usage error (exit code 2).
int dist_launch_attempt(const dist_env *d);
// 1 when fault `kind` strikes now: this rank, batch `batch`, the launch's first attempt.
int dist_fault_now(const dist_env *d, const dist_fault *f, int kind, long batch);
// A rank killed inside a collective, the others waiting in it (14's and 16's --fault kill), in two
// halves: dist_fault_hold waits until every call issued so far has completed, then holds `stream`
// with a host function that never returns; the lesson issues the collective behind it, and
// dist_fault_kill says so in one line (fmt) and SIGKILLs the process.
void dist_fault_hold(cudaStream_t stream);
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void dist_fault_kill(const dist_env *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// An all-gather of `bytes` bytes from every rank, for the checks after the runs, in three steps:
// dist_gather_begin puts this rank's part on the GPU where the gathered array holds it (rank r's
// at d_all + r * bytes); the lesson calls the collective itself, in place:
//   NCCL_CHECK(d, ncclAllGather(g.d_mine, g.d_all, bytes, ncclUint8, d->comm, stream));
// dist_gather_end copies every part back into all[], waits (polled) and frees the buffers.
typedef struct {
    unsigned char *d_all, *d_mine, *h_all;
    size_t bytes;
    cudaEvent_t landed;
} dist_gather;
void dist_gather_begin(dist_env *d, dist_gather *g, const void *mine, size_t bytes, cudaStream_t stream);
void dist_gather_end(dist_env *d, dist_gather *g, void *all, cudaStream_t stream);
// The three together, on d's parent communicator (13's reports, which ranks share a GPU).
void dist_allgather(dist_env *d, const void *mine, void *all, size_t bytes, cudaStream_t stream);

// Every communicator finalized and destroyed, the watchdog stopped: a normal end.
void dist_finish(dist_env *d);

// --rendezvous DIR and --timeout-s S, appended to specs[*n]; dist_configure takes their values.
// (A lesson that fails on purpose adds dist_fault_options too.)
typedef struct {
    const char *rendezvous;  // NULL: $RENDEZVOUS_DIR
    double timeout_s;        // DIST_TIMEOUT_S by default
} dist_options;
void dist_option_specs(dist_options *o, arg_spec *specs, int *n);

// The second line of a --help summary: how to run several ranks, on as many GPUs or on one
// (`ranks`: what a rank is called, "ranks" or "stages").
#define DIST_HOW_TO_RUN(ranks)                                                                            \
    "Several GPUs: tools/launch -n 2 PROGRAM; " ranks " on one GPU, each a node of its own (every check " \
    "holds, no timing is performance): tools/launch -n 2 --simulate-nodes PROGRAM"

// "2.28.9": the NCCL library this process runs with.
void dist_nccl_version(char *out, size_t size);

// "tools/launch or torchrun", "mpirun", "srun", "none".
const char *dist_launcher_name(dist_launcher l);

// What the report says of the ranks, after dist_connect: one line ("ranks: 4 on 1 GPU ...")
// that, under simulated nodes, also says that no timing of the run is a performance figure;
// and the same in the JSON: world_size, launcher, nccl_version, gpus, simulated_nodes,
// performance (false under simulated nodes), and nccl_env: every NCCL_* variable of this rank's
// environment, sorted, "NAME=VALUE" separated by spaces (what a run was tuned with: notes/12's
// levers are often NCCL's variables).
void dist_describe(const dist_env *d, FILE *out);
void dist_describe_json(const dist_env *d, json_writer *js);

#ifdef __cplusplus
}
#endif
#endif
