// dist_fault.c: a failure injected on purpose, to show that no rank outlives another's (dist.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/args.h"  // arg_int, arg_choice, usage_error
#include "common/dist/dist.h"

void dist_fault_options(dist_fault *f, const char *words, const char *help, arg_spec *specs, int *n)
{
    f->kind = 0;
    f->rank = f->at_batch = -1;
    specs[(*n)++] = arg_choice("fault", &f->kind, words, help);
    specs[(*n)++] = arg_int("fault-rank", &f->rank, -1, 65535, "R", "with --fault: the rank it strikes; -1: none");
    specs[(*n)++] = arg_int("fault-at-batch", &f->at_batch, -1, 1000000, "N", "with --fault: at this batch; -1: none");
}

void dist_fault_check(const dist_env *d, const dist_fault *f, int batches)
{
    if ((f->kind != 0) != (f->rank >= 0) || (f->rank >= 0) != (f->at_batch >= 0))
        usage_error(d->name,
                    "--fault, --fault-rank and --fault-at-batch go together: what, which rank, at which batch");
    if (f->rank >= d->world)
        usage_error(d->name, "--fault-rank %d: there are %d ranks (0 to %d)", f->rank, d->world, d->world - 1);
    if (f->at_batch >= batches)
        usage_error(d->name, "--fault-at-batch %d: the run has %d batches", f->at_batch, batches);
}

void dist_fault_inject(dist_env *d, const dist_fault *f, long batch, cudaStream_t stream)
{
    if (f->kind == DIST_FAULT_NONE || d->rank != f->rank || batch != f->at_batch) return;
    if (f->kind == DIST_FAULT_HANG)
        dist_hang(d, stream, "hanging at batch %ld as asked (--fault hang --fault-rank %d --fault-at-batch %d)", batch,
                  f->rank, f->at_batch);
    dist_fail(d, "stopping at batch %ld as asked (--fault error --fault-rank %d --fault-at-batch %d)", batch, f->rank,
              f->at_batch);
}
