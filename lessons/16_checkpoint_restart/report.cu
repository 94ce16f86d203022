// STUDENT VERSION of solutions/16_checkpoint_restart/report.cu, made by `make lessons` (checksum 2380677541)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, resume.cu, snapshot.cu.
// report.cu (lesson 16): the checks across ranks (every rank ends with the same weights and
// losses, and took every loss once) and the report: where the run started, the step, what the
// checkpoints cost (the main thread's stall against the copy of the same bytes at the pinned rate
// measured in this run; the writer's rate; how often one came due while another was written), the
// interval and what a failure loses at it. Rank 0 reports for every rank.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

// What the ranks agree on.
typedef struct {
    uint64_t weights, losses;  // rank 0's checksums
    int same;                  // every rank's weights and losses are rank 0's
    int every_once;            // every rank took every loss exactly once
    char sums[1024];           // every rank's weights checksum, comma-separated
} run_verdict;

// Every rank's checksums and whether it took every loss once, through one all-gather.
static void gather_verdict(trainer *t, checkpoint_restart *cr, run_verdict *v)
{
    dist_env *d = cr->dist;
    int once = 1;
    for (int i = 0; i < t->opt.batches; i++) once = once && t->run.taken[i] == 1;
    ddp_checksums mine = ddp_checksums_of(t, once);
    ddp_checksums *all = (ddp_checksums *)host_calloc((size_t)d->world, sizeof mine, "every rank's checksums");
    gather(cr, &mine, all, sizeof mine);
    v->weights = all[0].weights;
    v->losses = all[0].losses;
    v->same = ddp_checksums_agree(all, d->world, &v->every_once, v->sums, sizeof v->sums);
    free(all);
}

static void print_report(trainer *t, const checkpoint_restart *cr, const ckpt_plan *p, const ckpt_verdict *k,
                         const run_verdict *v, FILE *out)
{
    const dist_env *d = cr->dist;
    const checkpointing *c = &cr->ckpt;
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    dist_describe(d, out);
    if (c->resume_from >= 0)
        fprintf(out, "resumed: from the checkpoint of batch %lld (attempt %d): trained batches %ld to %d\n",
                c->resume_from, cr->fault.attempt, c->start, t->opt.batches - 1);
    else
        fprintf(out, "started: at batch 0 (attempt %d%s)\n", cr->fault.attempt,
                c->root ? ", no complete checkpoint" : ", no --checkpoint-dir");
    fprintf(out, "step: %.3f ms per batch, checkpoints apart (%.3f all in)%s\n", k->step_ms, k->loop_step_ms, not_perf);
    ckpt_report_text(p, &c->fig, k, not_perf, out);  // common/recovery: what they cost, the interval
    fprintf(out, "NCCL calls: %lld\n", cr->calls);
    fprintf(out, "weights %016llx, losses %016llx; identical on every rank: %s; every loss taken once: %s\n",
            (unsigned long long)v->weights, (unsigned long long)v->losses, v->same ? "yes" : "NO",
            v->every_once ? "yes" : "NO");
}

static void write_report(trainer *t, const checkpoint_restart *cr, const ckpt_plan *p, const ckpt_verdict *k,
                         const run_verdict *v)
{
    json_writer *js = &t->js;
    const checkpointing *c = &cr->ckpt;
    dist_describe_json(cr->dist, js);
    json_int(js, "batches", t->opt.batches);
    json_int(js, "shard_batch", t->opt.batch);
    json_int(js, "attempt", cr->fault.attempt);
    json_int(js, "resumed_from", c->resume_from);
    json_int(js, "start_batch", c->start);
    ckpt_report_json(p, &c->fig, k, js);  // checkpoint_*, step_ms, loop_step_ms, steady_step_ms
    json_int(js, "nccl_calls", cr->calls);
    json_int(js, "buckets", cr->dp.plan.count);
    json_hex(js, "weights_checksum", v->weights);
    json_hex(js, "loss_checksum", v->losses);
    json_str(js, "weights_checksums", v->sums);
    json_bool(js, "ranks_identical", v->same);
    json_bool(js, "losses_once", v->every_once);
}

int report(trainer *t, checkpoint_restart *cr, double loop_ms, FILE *out)
{
    run_verdict v;
    memset(&v, 0, sizeof v);
    gather_verdict(t, cr, &v);
    const checkpointing *c = &cr->ckpt;
    ckpt_plan p = {c->root != NULL,
                   c->mode == CKPT_SNAPSHOT,
                   c->busy_rule == BUSY_SKIP,
                   c->every,
                   c->auto_every,
                   c->probe,
                   AUTO_SPARE,
                   AUTO_MAX_COST,
                   c->cost,
                   sizeof(float) * t->model.shape.nparams};
    double steady_ms = host_now_ms() - c->steady_t0_ms - c->fig.end_wait_ms;  // the run's end, give or take
    ckpt_verdict k = ckpt_verdict_of(&p, &c->fig, loop_ms, t->opt.batches - c->start, steady_ms,
                                     t->opt.batches - c->steady_from);
    if (out) print_report(t, cr, &p, &k, &v, out);
    if (t->opt.json) write_report(t, cr, &p, &k, &v);
    return v.same && v.every_once;
}
