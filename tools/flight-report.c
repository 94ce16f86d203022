// flight-report: read the flight recorder rings every rank of a run wrote beside the
// rendezvous (lesson 14) and name, in one line, where the ranks first went apart.
//
//   flight-report DIR [--run RUN] [--ranks]
//
// DIR holds flight.RUN.rankR, one per rank (a rank that was killed left none). Without --run
// the newest run's rings are read. The line goes to stdout, e.g.
//   rank 1 issued all-reduce #37 (batch 12, bucket 2, 16.0 MiB) where rank 0 issued all-reduce #37 (batch 12, bucket 1, 8.0 MiB)
// --ranks first prints one line per rank: how many calls it made and why it stopped.
// Exit codes: 0 the rings agree and every call completed; 4 a divergence or a call that never
// completed was named; 1 no ring of that run in DIR (or out of memory); 2 bad usage or a ring
// that cannot be read. A ring is a file anyone may have cut or made by hand: every number in it
// is bounded (common/recovery/flight.c), and no input makes it read past its arrays or loop for long
// (tests/14_fault_tolerance.bats feeds it mutated rings under the sanitizers).
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/args.h"        // defines: arg_spec, arg_string, arg_flag, args_parse_files, usage_error
#include "common/recovery/flight.h"  // defines: flight_ring, flight_read, flight_diverge, flight_free

#define PROG "flight-report"
#define EXIT_DIVERGED 4
#define MAX_RANKS FLIGHT_MAX_RANKS

// "flight.RUN.rankR": 1 with RUN and R, else 0.
static int ring_name(const char *name, char *run, size_t size, int *rank)
{
    size_t n = strlen(name);
    if (strncmp(name, "flight.", 7) != 0 || n > 200) return 0;
    const char *dot = strrchr(name, '.');
    if (!dot || dot <= name + 7 || strncmp(dot, ".rank", 5) != 0) return 0;
    char *end = NULL;
    long r = strtol(dot + 5, &end, 10);
    if (end == dot + 5 || *end || r < 0 || r >= MAX_RANKS) return 0;
    snprintf(run, size, "%.*s", (int)(dot - name - 7), name + 7);
    *rank = (int)r;
    return 1;
}

// The run whose ring was written last.
static int newest_run(const char *dir, char *run, size_t size)
{
    DIR *d = opendir(dir);
    if (!d) usage_error(PROG, "%s: no such folder", dir);
    double newest = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char name_run[256], path[1400];
        int rank = 0;
        if (!ring_name(e->d_name, name_run, sizeof name_run, &rank)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        double t = st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
        if (t > newest) {
            newest = t;
            snprintf(run, size, "%s", name_run);
        }
    }
    closedir(d);
    return newest >= 0;
}

int main(int argc, char **argv)
{
    const char *run_arg = NULL, *files[1] = {NULL};
    int list = 0;
    const arg_spec specs[] = {
        arg_string("run", &run_arg, "RUN", "read that run's rings (default: the run whose ring was written last)"),
        arg_flag("ranks", &list, "first print one line per rank: its calls and why it stopped"),
    };
    int nfiles = args_parse_files(
        argc, argv, PROG,
        "Name, in one line, where the ranks of a run first went apart, from the flight "
        "recorder rings they wrote beside the rendezvous (lesson 14). Exit code 4: a divergence, or a "
        "call that never completed, was named; 1 also: no ring of the run in DIR.",
        specs, (int)(sizeof specs / sizeof specs[0]), "DIR", files, 1);
    if (nfiles != 1) usage_error(PROG, "give the rendezvous folder the ranks wrote their rings in (try --help)");
    const char *dir = files[0];
    char run[256];
    if (run_arg)
        snprintf(run, sizeof run, "%s", run_arg);
    else if (!newest_run(dir, run, sizeof run)) {
        fprintf(stderr, "%s: no flight recorder ring (flight.RUN.rankR) in %s\n", PROG, dir);
        return EXIT_FAILURE;
    }
    flight_ring *rings[MAX_RANKS] = {NULL};
    static flight_ring held[MAX_RANKS];
    int world = 0, found = 0, first = -1;
    for (int r = 0; r < MAX_RANKS; r++) {  // every ring of the run, whatever world the first one says
        char path[1400], why[1600];
        snprintf(path, sizeof path, "%s/flight.%s.rank%d", dir, run, r);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (flight_read(path, &held[r], why, sizeof why) != 0) usage_error(PROG, "%s", why);
        if (held[r].rank != r)
            usage_error(PROG, "%s: the ring of rank %d under the name of rank %d", path, held[r].rank, r);
        if (first >= 0 && held[r].world != world)
            usage_error(PROG, "%s: a ring of %d ranks, where rank %d's says %d", path, held[r].world, first, world);
        if (first >= 0 && r >= world)
            usage_error(PROG, "%s: a ring of rank %d, where rank %d's says the run has %d ranks", path, r, first,
                        world);
        if (first < 0) first = r, world = held[r].world;
        rings[r] = &held[r];
        found++;
    }
    if (!found) {
        fprintf(stderr, "%s: no flight recorder ring of run %s in %s\n", PROG, run, dir);
        return EXIT_FAILURE;
    }
    if (list)
        for (int r = 0; r < world; r++) {
            if (rings[r])
                printf("rank %d: %lld calls, the last %d in its ring; stopped: %s\n", r, rings[r]->calls, rings[r]->n,
                       rings[r]->stopped);
            else
                printf("rank %d: no ring\n", r);
        }
    char line[1024];
    int diverged = flight_diverge(rings, world, line, sizeof line);
    if (diverged < 0) {
        fprintf(stderr, "%s: %s\n", PROG, line);
        return EXIT_FAILURE;
    }
    printf("%s\n", line);
    for (int r = 0; r < world; r++)
        if (rings[r]) flight_free(rings[r]);
    return diverged ? EXIT_DIVERGED : EXIT_SUCCESS;
}
