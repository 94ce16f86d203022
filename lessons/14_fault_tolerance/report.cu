// STUDENT VERSION of solutions/14_fault_tolerance/report.cu, made by `make lessons` (checksum 3270771574)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// report.cu (lesson 14): the checks across ranks (every rank ends with the same weights and
// losses, and took every loss once) and the report: the step, the fingerprint checks, the flight
// recorder. Rank 0 reports for every rank.
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
    double step_ms;            // per batch
    double fingerprint_ms;     // per check
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

static void print_report(const fault_tolerance *ft, const run_verdict *v, FILE *out)
{
    const dist_env *d = ft->dist;
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    dist_describe(d, out);
    fprintf(out, "started: at batch 0 (attempt %d); step: %.3f ms per batch%s\n", ft->fault.attempt, v->step_ms,
            not_perf);
    fprintf(out,
            "flight recorder: %lld calls, the last %d kept%s; fingerprint checks: %ld (every %d batches, %.3f ms "
            "each)\n",
            ft->rec.calls, ft->rec.slots, ft->rec.path[0] ? "" : " (one rank, no rendezvous folder: never written)",
            ft->fingerprint_checks, ft->fingerprint_every, v->fingerprint_ms);
    fprintf(out, "weights %016llx, losses %016llx; identical on every rank: %s; every loss taken once: %s\n",
            (unsigned long long)v->weights, (unsigned long long)v->losses, v->same ? "yes" : "NO",
            v->every_once ? "yes" : "NO");
}

static void write_report(trainer *t, const fault_tolerance *ft, const run_verdict *v)
{
    json_writer *js = &t->js;
    dist_describe_json(ft->dist, js);
    json_int(js, "batches", t->opt.batches);
    json_int(js, "shard_batch", t->opt.batch);
    json_int(js, "attempt", ft->fault.attempt);
    json_num(js, "step_ms", v->step_ms);
    json_num(js, "loop_step_ms", v->step_ms);
    json_int(js, "flight_calls", ft->rec.calls);
    json_int(js, "fingerprint_every", ft->fingerprint_every);
    json_int(js, "fingerprint_checks", ft->fingerprint_checks);
    json_num(js, "fingerprint_ms", v->fingerprint_ms);
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
    v.step_ms = t->opt.batches > 0 ? loop_ms / t->opt.batches : 0;
    v.fingerprint_ms = ft->fingerprint_checks ? ft->fingerprint_ms / ft->fingerprint_checks : 0;
    if (out) print_report(ft, &v, out);
    if (t->opt.json) write_report(t, ft, &v);
    return v.same && v.every_once;
}
