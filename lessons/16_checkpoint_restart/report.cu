// STUDENT VERSION of solutions/16_checkpoint_restart/report.cu, made by `make lessons` (checksum 1711274781)
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

static void print_report(trainer *t, const checkpoint_restart *cr, const ckpt_plan *p, const ckpt_verdict *k,
                         const ddp_checksums *mine, FILE *out)
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
    fprintf(out, "NCCL calls: %lld; weights %016llx, losses %016llx; every loss taken once: %s\n", cr->calls,
            (unsigned long long)mine->weights, (unsigned long long)mine->losses, mine->flag ? "yes" : "NO");
}

static void write_report(trainer *t, const checkpoint_restart *cr, const ckpt_plan *p, const ckpt_verdict *k,
                         const ddp_checksums *mine)
{
    json_writer *js = &t->js;
    const checkpointing *c = &cr->ckpt;
    dist_describe_json(cr->dist, js);
    ckpt_report_json(p, &c->fig, k, js);  // checkpoint_*, step_ms, loop_step_ms, steady_step_ms
    json_int(js, "resumed_from", c->resume_from);
    json_int(js, "start_batch", c->start);
    json_int(js, "attempt", cr->fault.attempt);
    json_hex(js, "weights_checksum", mine->weights);  // rank 0's: every rank's, where ranks_identical
    json_hex(js, "loss_checksum", mine->losses);
    json_int(js, "nccl_calls", cr->calls);
    json_int(js, "batches", t->opt.batches);
    json_int(js, "shard_batch", t->opt.batch);
    json_bool(js, "losses_once", (int)mine->flag);
}

// The report, then every rank's weights and losses against rank 0's and whether each took every loss
// once (lesson 12's ddp_ranks_agree, one all-gather: ranks_identical, ranks_verified). 1 when all hold.
int report(trainer *t, checkpoint_restart *cr, double loop_ms, FILE *out)
{
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
    int once = 1;
    for (int i = 0; i < t->opt.batches; i++) once = once && t->run.taken[i] == 1;
    ddp_checksums mine = ddp_checksums_of(t, once);
    cr->calls++;  // the all-gather of ddp_ranks_agree, below
    if (out) print_report(t, cr, &p, &k, &mine, out);
    if (t->opt.json) write_report(t, cr, &p, &k, &mine);
    return ddp_ranks_agree(t, &cr->dp, once, out);
}
