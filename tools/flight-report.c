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
// that cannot be read. A ring that cannot be read (or says another world) is named on stderr, and
// the rings that do read are still compared: two of them that differ are named (exit code 4). A ring is a file anyone may have cut or made by hand: every number in it
// is bounded (common/recovery/flight.c), and no input makes it read past its arrays or loop for long
// (tests/14_fault_tolerance.bats feeds it mutated rings under the sanitizers).
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base/args.h"        // defines: arg_spec, arg_string, arg_flag, args_parse_files, usage_error
#include "common/base/exit_codes.h"  // defines: EXIT_USAGE
#include "common/recovery/flight.h"  // defines: flight_ring, flight_read, flight_diverge, flight_differ, flight_free

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

// The rings of one run, every rank's that is there, whatever world the first one says.
typedef struct {
    flight_ring *rings[MAX_RANKS];  // NULL: no ring, or one that does not read
    char unreadable[MAX_RANKS];     // 1: its ring does not read, or is not one of this run's ranks
    int world, first, found, bad;   // the world the first ring read says, its rank; rings read; rings refused
    char why[1600];                 // the first refused ring's reason
} ring_set;

// Ring r at `path`, read into *held and checked against those read before: 0, or -1 with why.
static int read_one(const char *path, int r, ring_set *s, flight_ring *held, char *why, size_t size)
{
    if (flight_read(path, held, why, size) != 0) return -1;
    if (held->rank != r)
        snprintf(why, size, "%s: the ring of rank %d under the name of rank %d", path, held->rank, r);
    else if (s->found && held->world != s->world)
        snprintf(why, size, "%s: a ring of %d ranks, where rank %d's says %d", path, held->world, s->first, s->world);
    else if (s->found && r >= s->world)
        snprintf(why, size, "%s: a ring of rank %d, where rank %d's says the run has %d ranks", path, r, s->first,
                 s->world);
    else
        return 0;
    flight_free(held);
    return -1;
}

// Every ring of `run` in dir: those that read into s->rings, the others counted (the first's why kept).
static void read_rings(const char *dir, const char *run, ring_set *s, flight_ring *held)
{
    for (int r = 0; r < MAX_RANKS; r++) {
        char path[1400], why[1600];
        struct stat st;
        snprintf(path, sizeof path, "%s/flight.%s.rank%d", dir, run, r);
        if (stat(path, &st) != 0) continue;
        if (read_one(path, r, s, &held[r], why, sizeof why) != 0) {
            if (!s->bad++) snprintf(s->why, sizeof s->why, "%s", why);
            s->unreadable[r] = 1;
            continue;
        }
        if (!s->found++) s->world = held[r].world, s->first = r;
        s->rings[r] = &held[r];
    }
}

// The refused rings, in one line on stderr: how many, and the first one's reason, last.
static void say_refused(const ring_set *s, int compared)
{
    if (s->bad > 1)
        fprintf(stderr, "%s: %d rings do not read%s; the first: %s\n", PROG, s->bad,
                compared ? " (the others were compared without them)" : "", s->why);
    else
        fprintf(stderr, "%s: %s%s\n", PROG, compared ? "the others were compared without this ring: " : "", s->why);
}

int main(int argc, char **argv)
{
    const char *run_arg = NULL, *files[1] = {NULL};
    int list = 0;
    const arg_spec specs[] = {
        arg_string("run", &run_arg, "RUN",
                   "read that run's rings, named as its files are (a run id's characters other than letters, digits, "
                   "'.', '_' and '-' are written %XX; default: the run whose ring was written last)"),
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
    static flight_ring held[MAX_RANKS];
    static ring_set s;
    read_rings(dir, run, &s, held);
    if (!s.found && !s.bad) {
        fprintf(stderr, "%s: no flight recorder ring of run %s in %s\n", PROG, run, dir);
        return EXIT_FAILURE;
    }
    if (!s.found) usage_error(PROG, "%s", s.why);
    int world = s.world;
    if (list)
        for (int r = 0; r < world; r++) {
            if (s.rings[r])
                printf("rank %d: %lld calls, the last %d in its ring; stopped: %s\n", r, s.rings[r]->calls,
                       s.rings[r]->n, s.rings[r]->stopped);
            else
                printf("rank %d: %s\n", r, s.unreadable[r] ? "a ring that does not read" : "no ring");
        }
    char line[1024];
    // with a ring that does not read, only two rings that do and differ can be named: what the
    // unread rank did is unknown (it is no rank that "left no ring")
    int diverged = s.bad ? flight_differ(s.rings, world, line, sizeof line)
                         : flight_diverge(s.rings, world, line, sizeof line);
    if (diverged < 0) {
        fprintf(stderr, "%s: %s\n", PROG, line);
        return EXIT_FAILURE;
    }
    if (s.bad) say_refused(&s, diverged);
    if (s.bad && !diverged) return EXIT_USAGE;
    printf("%s\n", line);
    for (int r = 0; r < world; r++)
        if (s.rings[r]) flight_free(s.rings[r]);
    return diverged ? EXIT_DIVERGED : EXIT_SUCCESS;
}
