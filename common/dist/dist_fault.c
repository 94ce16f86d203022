// dist_fault.c: a failure injected on purpose, to show that no rank outlives another's (dist.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/args.h"  // arg_int, arg_choice, usage_error
#include "common/dist/dist.h"

void dist_fault_options(dist_fault *f, arg_spec *specs, int *n)
{
    f->rank = f->at_batch = -1;
    f->how = DIST_FAULT_ERROR;
    specs[(*n)++] = arg_int("fail-rank", &f->rank, -1, 65535, "R",
                            "with --fail-at-batch: this rank fails on purpose; -1: none");
    specs[(*n)++] = arg_int("fail-at-batch", &f->at_batch, -1, 1000000, "N",
                            "with --fail-rank: ... at this batch; -1: none");
    specs[(*n)++] = arg_choice("fail-how", &f->how, "error|hang",
                               "with --fail-rank: stop with an error and leave a note for the others, or hang "
                               "(the GPU stops answering, no note: the others give up after --timeout-s)");
}

void dist_fault_check(const dist_env *d, const dist_fault *f, int batches)
{
    if ((f->rank >= 0) != (f->at_batch >= 0))
        usage_error(d->name, "--fail-rank and --fail-at-batch go together: which rank fails, and at which batch");
    if (f->rank >= d->world)
        usage_error(d->name, "--fail-rank %d: there are %d ranks (0 to %d)", f->rank, d->world, d->world - 1);
    if (f->at_batch >= batches)
        usage_error(d->name, "--fail-at-batch %d: the run has %d batches", f->at_batch, batches);
}

void dist_fault_inject(dist_env *d, const dist_fault *f, long batch, cudaStream_t stream)
{
    if (d->rank != f->rank || batch != f->at_batch) return;
    if (f->how == DIST_FAULT_HANG)
        dist_hang(d, stream, "hanging at batch %ld as asked (--fail-rank %d --fail-at-batch %d --fail-how hang)", batch,
                  f->rank, f->at_batch);
    dist_fail(d, "stopping at batch %ld as asked (--fail-rank %d --fail-at-batch %d)", batch, f->rank, f->at_batch);
}
