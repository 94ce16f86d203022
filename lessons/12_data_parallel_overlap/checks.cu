// STUDENT VERSION of solutions/12_data_parallel_overlap/checks.cu, made by `make lessons` (checksum 2853727332)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// checks.cu (lesson 12's library, ddp.h): the checks across ranks after the runs, which 12, 15
// and the lessons on its step make: every rank's weights and losses against rank 0's, and with
// several ranks the averaged losses against the CPU trained on the whole batch.
#include <stdio.h>
#include <stdlib.h>

#include "ddp.h"                   // the library's face
#include "common/base/json.h"      // defines: json_bool, json_str, json_num
#include "common/dist/dist.h"      // defines: dist_gather, dist_gather_begin, dist_gather_end, NCCL_CHECK
#include "common/gpu/memory.h"     // defines: host_calloc
#include "common/train/trainer.h"  // defines: mlp_shape_init, dataset_init, mlp_cpu_reference, dataset_free

// Every rank must end with the same weights and losses, bit for bit: they applied the
// same averaged updates. Rank 0 reports every rank's verdict. Returns 1 when the ranks
// agree and every rank's own checks passed.
int ddp_ranks_agree(trainer *t, ddp_state *dp, int ok, FILE *out)
{
    dist_env *d = dp->dist;
    ddp_checksums mine = ddp_checksums_of(t, ok);
    ddp_checksums *all = (ddp_checksums *)host_calloc((size_t)d->world, sizeof mine, "every rank's verdict");
    dist_gather g;
    dist_gather_begin(d, &g, &mine, sizeof mine, t->compute_stream);  // this rank's part in its place on the GPU
    NCCL_CHECK(d, ncclAllGather(g.d_mine, g.d_all, sizeof mine, ncclUint8, d->comm, t->compute_stream));  // in place
    dist_gather_end(d, &g, all, t->compute_stream);  // every rank's part back on the host, the wait polled
    int passed = 1;
    char sums[1024];
    int same = ddp_checksums_agree(all, d->world, &passed, sums, sizeof sums);
    if (out) {
        fprintf(out, "ranks: %d; final weights and losses identical on every rank: %s\n", d->world,
                same ? "yes" : "NO");
        for (int r = 0; r < d->world; r++)
            if (all[r].flag != 1) fprintf(out, "  rank %d: its own checks FAILED\n", r);
    }
    if (t->opt.json) {
        json_bool(&t->js, "ranks_identical", same);
        json_bool(&t->js, "ranks_verified", passed);
        json_str(&t->js, "weights_checksums", sums);
    }
    free(all);
    return same && passed;
}

// With several ranks the harness's CPU check would see one shard: rank 0 compares the
// averaged losses with the CPU trained on the whole batch. Returns 1 when within 1e-4.
int ddp_cpu_check_whole_batch(trainer *t, const train_options *o, FILE *out)
{
    mlp_shape shape;
    mlp_shape_init(&shape, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    dataset data;
    dataset_init(&data, o->batch, o->in_dim, o->out_dim, o->prep_work, (uint64_t)o->seed);
    double *cpu = (double *)host_calloc((size_t)o->batches, sizeof(double), "the CPU reference's losses");
    mlp_cpu_reference(&shape, (float)o->lr, (uint64_t)o->seed, &data, o->batches, cpu);
    double worst = 0;
    for (int i = 0; i < o->batches; i++) {
        double rel = (t->run.losses[i] - cpu[i]) / cpu[i];
        if (rel < 0) rel = -rel;
        if (!(rel <= worst)) worst = rel;  // NaN-safe
    }
    free(cpu);
    dataset_free(&data);
    if (out)
        fprintf(out, "  CPU reference (the whole batch): largest relative difference %.2e (%s 1e-04)\n", worst,
                worst <= 1e-4 ? "within" : "NOT within");
    if (t->opt.json) json_num(&t->js, "cpu_check_max_rel", worst);
    return worst <= 1e-4;
}
