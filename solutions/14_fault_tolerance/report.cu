// report.cu (lesson 14): the checks across ranks (every rank ends with the same weights and
// losses, and took every loss once) and the report: where the run started, the step, what the
// checkpoints cost, the flight recorder. Rank 0 reports for every rank.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

// What the ranks agree on, and the figures of this run.
typedef struct {
    uint64_t weights, losses;  // rank 0's checksums
    int same;                  // every rank's weights and losses are rank 0's
    int every_once;            // every rank took every loss exactly once
    char sums[1024];           // every rank's weights checksum, comma-separated
    double step_ms;            // per batch trained, checkpoints apart
    double ckpt_ms, ckpt_ms_per_gb, ckpt_share;
} run_verdict;

// Every rank's checksums and whether it took every loss once, through one recorded all-gather.
static void gather_verdict(trainer *t, fault_tolerance *ft, run_verdict *v)
{
    dist_env *d = ft->dist;
    int once = 1;
    for (int i = 0; i < t->opt.batches; i++) once = once && t->run.taken[i] == 1;
    ddp_checksums mine = ddp_checksums_of(t, once);
    ddp_checksums *all = (ddp_checksums *)host_calloc((size_t)d->world, sizeof mine, "every rank's checksums");
    recorder_allgather(&ft->rec, d, t->opt.batches, &mine, all, sizeof mine, t->compute_stream, "compute");
    v->weights = all[0].weights;
    v->losses = all[0].losses;
    v->same = ddp_checksums_agree(all, d->world, &v->every_once, v->sums, sizeof v->sums);
    free(all);
}

static void print_report(trainer *t, const fault_tolerance *ft, const run_verdict *v, FILE *out)
{
    const dist_env *d = ft->dist;
    const checkpointing *c = &ft->ckpt;
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    dist_describe(d, out);
    if (c->resume_from >= 0)
        fprintf(out, "resumed: from the checkpoint of batch %lld (attempt %d): trained batches %ld to %d\n",
                c->resume_from, ft->fault.attempt, c->start, t->opt.batches - 1);
    else
        fprintf(out, "started: at batch 0 (attempt %d%s)\n", ft->fault.attempt,
                c->root ? ", no complete checkpoint" : ", no --checkpoint-dir");
    fprintf(out, "step: %.3f ms per batch, checkpoints apart%s\n", v->step_ms, not_perf);
    if (c->written)
        fprintf(out,
                "checkpoints: %ld written, %.3f ms each for %.2f MB per rank (%.1f ms per GB), %.2f%% of the run%s\n",
                c->written, v->ckpt_ms, c->bytes / 1e6, v->ckpt_ms_per_gb, 100.0 * v->ckpt_share, not_perf);
    fprintf(out, "flight recorder: %lld calls, the last %d kept%s; fingerprint checks: %ld\n", ft->rec.calls,
            ft->rec.slots, ft->rec.path[0] ? "" : " (one rank, no rendezvous folder: never written)",
            ft->fingerprint_checks);
    fprintf(out, "weights %016llx, losses %016llx; identical on every rank: %s; every loss taken once: %s\n",
            (unsigned long long)v->weights, (unsigned long long)v->losses, v->same ? "yes" : "NO",
            v->every_once ? "yes" : "NO");
}

static void write_report(trainer *t, const fault_tolerance *ft, const run_verdict *v)
{
    json_writer *js = &t->js;
    const checkpointing *c = &ft->ckpt;
    dist_describe_json(ft->dist, js);
    json_int(js, "batches", t->opt.batches);
    json_int(js, "shard_batch", t->opt.batch);
    json_int(js, "attempt", ft->fault.attempt);
    json_int(js, "resumed_from", c->resume_from);
    json_int(js, "start_batch", c->start);
    json_int(js, "checkpoint_every", c->root ? c->every : 0);
    json_int(js, "checkpoints_written", c->written);
    json_num(js, "checkpoint_ms", v->ckpt_ms);
    json_int(js, "checkpoint_bytes", (long long)c->bytes);
    json_num(js, "checkpoint_ms_per_gb", v->ckpt_ms_per_gb);
    json_num(js, "step_ms", v->step_ms);
    json_int(js, "flight_calls", ft->rec.calls);
    json_int(js, "fingerprint_checks", ft->fingerprint_checks);
    json_int(js, "buckets", ft->dp.plan.count);
    json_hex(js, "weights_checksum", v->weights);
    json_hex(js, "loss_checksum", v->losses);
    json_str(js, "weights_checksums", v->sums);
    json_bool(js, "ranks_identical", v->same);
    json_bool(js, "losses_once", v->every_once);
}

int report(trainer *t, fault_tolerance *ft, double loop_ms, FILE *out)
{
    run_verdict v;
    memset(&v, 0, sizeof v);
    gather_verdict(t, ft, &v);
    const checkpointing *c = &ft->ckpt;
    long trained = t->opt.batches - c->start;
    v.step_ms = trained > 0 ? (loop_ms - c->ms) / trained : 0;
    v.ckpt_ms = c->written ? c->ms / c->written : 0;
    v.ckpt_ms_per_gb = c->bytes ? v.ckpt_ms / (c->bytes / 1e9) : 0;
    v.ckpt_share = c->ms / (loop_ms > 0 ? loop_ms : 1);
    if (out) print_report(t, ft, &v, out);
    if (t->opt.json) write_report(t, ft, &v);
    return v.same && v.every_once;
}
