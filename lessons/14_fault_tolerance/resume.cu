// STUDENT VERSION of solutions/14_fault_tolerance/resume.cu, made by `make lessons` (checksum 4288817315)
// Fill in its 1 TODO.
// resume.cu (lesson 14): where a run starts. Before the GPU is touched, the newest complete
// checkpoint under --checkpoint-dir (a torn or corrupt one is said and passed over for the one
// before it); a checkpoint of another run (any field of common/ckpt.h's ckpt_run: rank count,
// shape, seed, --batch, --lr, ...), or one at or past the run's last batch, is refused with
// one line and exit code 2. Once the GPU is open each rank takes its own state back and trains
// from the batch after the checkpoint's (exercise 14-resume).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

static void say_skipped(void *ctx, long long batch, const char *why)
{
    const fault_tolerance *ft = (const fault_tolerance *)ctx;
    if (ft->dist->rank == 0)
        fprintf(stderr, "%s: checkpoint of batch %lld passed over: %s\n", ft->dist->name, batch, why);
}

long long find_checkpoint(const fault_tolerance *ft, int batches)
{
    if (!ft->ckpt.root) return -1;
    ckpt_manifest m;
    long long batch = ckpt_latest(ft->ckpt.root, &m, say_skipped, (void *)ft);
    if (batch < 0) return -1;
    const char *name = ft->dist->name;
    char why[400];
    if (ckpt_run_differs(&m.run, &ft->ckpt.run, CKPT_EVERY_FIELD, why, sizeof why))
        usage_error(name, "--checkpoint-dir %s: its checkpoint of batch %lld %s (a checkpoint of another run)",
                    ft->ckpt.root, batch, why);
    if (batch + 1 >= batches)  // its losses would not fit this run's, and nothing would be left to train
        usage_error(name,
                    "--checkpoint-dir %s: its checkpoint of batch %lld lies at or past this run's last batch "
                    "(--batches %d: a checkpoint of another run)",
                    ft->ckpt.root, batch, batches);
    return batch;
}

// This rank's state from checkpoint `batch` (found complete by find_checkpoint): the weights
// on the GPU, the losses taken so far; returns the first batch to train.
long restore(trainer *t, fault_tolerance *ft, long long batch)
{
    char path[1300], why[1500];
    ckpt_header h;
    float *params = NULL;
    double *losses = NULL;
    ckpt_rank_file(ft->ckpt.root, batch, ft->dist->rank, path, sizeof path);
    if (ckpt_read_rank(path, &h, &params, &losses, why, sizeof why) != 0 ||
        ckpt_header_differs(&h, batch, ft->dist->rank, &ft->ckpt.run, why, sizeof why))
        dist_fail(ft->dist, "cannot resume: %s", why);  // checked a moment ago: the file changed since
    long start = 0;
    // TODO(14-resume): put the checkpoint's weights (params, h.run.params floats) into
    // t->model.d_params (cudaMemcpy), its losses (losses[k] for k < h.losses) into
    // t->run.losses[k], each counted taken once (t->run.taken[k] = 1), and start at the batch after
    // the checkpoint's: h.batch + 1
    (void)t;
    free(params);
    free(losses);
    ft->ckpt.resume_from = start > 0 ? batch : -1;
    return start;
}
