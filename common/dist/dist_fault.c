// dist_fault.c: a failure injected on purpose, to show that no rank outlives another's (dist.h).
#define _POSIX_C_SOURCE 200809L
#include <signal.h>  // raise, SIGKILL
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>  // getenv, strtol
#include <unistd.h>  // pause

#include "common/base/args.h"         // defines: arg_int, arg_choice, usage_error
#include "common/base/check.h"        // defines: CUDA_CHECK
#include "common/base/stderr_line.h"  // defines: stderr_vline
#include "common/dist/dist.h"

void dist_fault_options(dist_fault *f, const char *words, const char *help, arg_spec *specs, int *n)
{
    f->kind = 0;
    f->rank = f->at_batch = -1;
    f->attempt = 0;
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

int dist_launch_attempt(const dist_env *d)
{
    const char *text = getenv("LAUNCH_ATTEMPT");
    if (!text || !*text) return 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (*end || v < 0 || v > 1000000)
        usage_error(d->name, "LAUNCH_ATTEMPT=%s: expected a whole number (set by tools/launch)", text);
    return (int)v;
}

int dist_fault_now(const dist_env *d, const dist_fault *f, int kind, long batch)
{
    return f->kind == kind && kind != 0 && d->rank == f->rank && batch == f->at_batch && f->attempt == 0;
}

void dist_fault_inject(dist_env *d, const dist_fault *f, long batch, cudaStream_t stream)
{
    if (!dist_fault_now(d, f, f->kind, batch)) return;
    if (f->kind == DIST_FAULT_HANG)
        dist_hang(d, stream, "hanging at batch %ld as asked (--fault hang --fault-rank %d --fault-at-batch %d)", batch,
                  f->rank, f->at_batch);
    dist_fail(d, "stopping at batch %ld as asked (--fault error --fault-rank %d --fault-at-batch %d)", batch, f->rank,
              f->at_batch);
}

// Holds the stream it is queued on until the process is killed.
static void CUDART_CB hold_until_killed(void *unused)
{
    (void)unused;
    for (;;) pause();
}

void dist_fault_hold(cudaStream_t stream)
{
    // every earlier call completed here, so every rank issued it: the next, held back, is the one
    // the others enter and wait in for this rank's part, which never comes
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaLaunchHostFunc(stream, hold_until_killed, NULL));
}

void dist_fault_kill(const dist_env *d, const char *fmt, ...)
{
    char line[640];
    snprintf(line, sizeof line, "%s: %s", d->name, fmt);  // the rank's name, then what it says (a name has no %)
    va_list ap;
    va_start(ap, fmt);
    stderr_vline(line, ap);
    va_end(ap);
    raise(SIGKILL);
    for (;;) pause();  // SIGKILL is never late, but the compiler does not know it
}
