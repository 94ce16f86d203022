// dist_options.c: what every program of several ranks adds to a training lesson's options and
// outputs: the rendezvous and the time limit as options; a trace file per rank, the JSON and
// the report from rank 0 alone (dist.h).
#include <stdlib.h>

#include "dist.h"
#include "harness.h"  // harness_report_to

void dist_option_specs(dist_options *o, dist_fault *fault, arg_spec *specs, int *n)
{
    o->rendezvous = NULL;
    o->timeout_s = DIST_TIMEOUT_S;
    specs[(*n)++] = arg_string("rendezvous", &o->rendezvous, "DIR",
                               "the folder every rank sees, where rank 0 leaves NCCL's id (default: $RENDEZVOUS_DIR)");
    specs[(*n)++] = arg_double("timeout-s", &o->timeout_s, 1, 3600, "S",
                               "give up waiting for another rank after this long");
    dist_fault_options(fault, specs, n);
}

FILE *dist_rank_outputs(const dist_env *d, train_options *mine, char *trace_path, size_t size)
{
    FILE *out = mine->json ? stderr : stdout;  // rank 0 reports for every rank
    mine->json = mine->json && d->rank == 0;   // rank 0 writes the JSON, with every rank's figures in it
    if (mine->trace_path) {
        dist_rank_path(d, mine->trace_path, trace_path, size);
        mine->trace_path = trace_path;
    }
    if (d->rank == 0) return out;
    FILE *quiet = fopen("/dev/null", "w");
    if (!quiet) {
        fprintf(stderr, "%s: cannot open /dev/null\n", d->name);
        exit(EXIT_FAILURE);
    }
    harness_report_to(quiet);
    return NULL;
}
