// stop-timeline.c: how two ranks stop when one fails, through the course's own stop
// (common/dist/dist_stop.c, dist_notes.c), without a GPU or a communicator: the stop timeline
// each rank says as it ends. Rank 1 fails with dist_fail (its note, its line, exit) after
// FAIL_AFTER_MS; rank 0 looks for a note every DIST_NOTE_EVERY_MS, as a polled wait does
// (dist_watch.c), and stops with dist_abort, its abort ABORT_MS long (ncclCommAbort stubbed by a
// sleep). Both write to this process's stderr, one pipe, as tools/launch's
// ranks do. Built and run by tests/12_data_parallel_overlap.bats, which reads the lines as it reads
// a real run's (stop_problems):
//   gcc -std=c11 -I. -I$CUDA/include tests/stop-timeline.c common/dist/dist_stop.c common/dist/dist_notes.c
//       common/base/{own_file,stderr_line,timing,check,host_memory}.c -L$CUDA/lib64 -lcudart
// Run: stop-timeline DIR (an empty folder of this user's); exit 0 when both ranks exited with code 1.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/base/timing.h"  // host_sleep_ms, wall_clock_s

#define FAIL_AFTER_MS 300  // rank 1 fails this long after its start
#define ABORT_MS 200       // rank 0's abort takes this long

// rank 0's one communicator, stubbed: its abort takes ABORT_MS, as a real one takes its time
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    (void)comm;
    host_sleep_ms(ABORT_MS);
    return ncclSuccess;
}

static void rank_main(int rank, const char *folder)
{
    dist_env d;
    memset(&d, 0, sizeof d);
    d.prog = "stop_timeline";
    snprintf(d.name, sizeof d.name, "stop_timeline rank %d", rank);
    d.rank = rank;
    d.world = 2;
    snprintf(d.folder, sizeof d.folder, "%s", folder);
    snprintf(d.run, sizeof d.run, "t");
    snprintf(d.fingerprint, sizeof d.fingerprint, "0123456789abcdef");  // the ranks share one id
    d.timeout_s = 30;
    d.started_s = wall_clock_s();
    if (rank == 1) {
        host_sleep_ms(FAIL_AFTER_MS);
        dist_fail(&d, "stopping at batch 5 as asked (--fault error --fault-rank 1 --fault-at-batch 5)");
    }
    d.comms[0] = (ncclComm_t)&d;  // a communicator to abort (never used as one)
    d.comm_names[0] = "the parent";
    d.ncomms = 1;
    char note[256];
    for (;;) {  // a polled wait: a note looked for every DIST_NOTE_EVERY_MS
        host_sleep_ms(DIST_NOTE_EVERY_MS);
        if (dist_failed_rank(&d, note, sizeof note) >= 0) dist_abort(&d, "noticed while waiting for the GPU");
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: stop-timeline DIR\n");
        return 2;
    }
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] < 0) return 1;
        if (pids[r] == 0) rank_main(r, argv[1]);
    }
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 1;
    }
    return ok ? 0 : 1;
}
