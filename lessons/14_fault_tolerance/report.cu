// STUDENT VERSION of solutions/14_fault_tolerance/report.cu, made by `make lessons` (checksum 1520188624)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// report.cu (lesson 14): the checks across ranks (every rank ends with the same weights and
// losses, and took every loss once) and the report: where the run started, the step, what the
// checkpoints cost (the main thread's stall against the copy of the same bytes at the pinned rate
// measured in this run; the writer's rate; how often one came due while another was written), the
// fingerprint checks, the flight recorder. Rank 0 reports for every rank.
#include <math.h>  // ceil
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
    double step_ms;            // per batch trained, the checkpoints' stalls apart
    double loop_step_ms;       // per batch trained, everything in
    double stall_ms;           // the main thread held up, per checkpoint due
    double copy_bound_ms;      // the weights' copy alone at the pinned rate measured in this run
    double write_ms;           // per rank file written
    double write_mbs;          // the writer's rate: bytes over time, from the landed copy to the file renamed
    double copy_ms;            // the snapshot's copy beside the training, per snapshot
    double ckpt_ms_per_gb, ckpt_share;
    double fingerprint_ms;  // per check
    double steady_step_ms;  // per batch in the steady state: after auto chose its interval (the end's wait apart)
    long loss_batches;      // a failure loses at most this many batches: the interval, and a write's
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

// The interval, and what a failure would lose at it: the batches since the last checkpoint, and those
// of the write that would have completed the next.
static void print_interval(const checkpointing *c, const run_verdict *v, const char *not_perf, FILE *out)
{
    const checkpoint_cost *k = &c->cost;
    if (c->auto_every && !c->every) {
        fprintf(out,
                "checkpoint interval: auto, not chosen: the run ended before the batch after its first checkpoint\n");
        return;
    }
    if (c->auto_every)
        fprintf(out,
                "checkpoint interval: auto: every %d batches, chosen after the checkpoint of batch %ld: its write %.1f "
                "ms (%.1f MB a rank, %.0f MB/s, rank 0's manifest and prune in), a stall of %.3f ms and a copy of "
                "%.3f ms against a step of %.3f ms: the write within 1/%.1f of the interval, the cost at most "
                "%.1f%% of the step (waited %.1f ms once for it)%s\n",
                c->every, c->probe, k->write_ms, c->fig.bytes / 1e6,
                k->write_ms > 0 ? c->fig.bytes / (k->write_ms * 1e3) : 0, k->stall_ms, k->copy_ms, k->step_ms,
                AUTO_SPARE, 100 * AUTO_MAX_COST, c->fig.auto_wait_ms, not_perf);
    else
        fprintf(out, "checkpoint interval: every %d batches (--checkpoint-every)\n", c->every);
    fprintf(out,
            "a failure loses at most %ld batches (the interval, and the write that would complete the next), "
            "about %.0f ms of training%s\n",
            v->loss_batches, v->loss_batches * v->step_ms, not_perf);
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
    fprintf(out, "step: %.3f ms per batch, checkpoints apart (%.3f all in)%s\n", v->step_ms, v->loop_step_ms, not_perf);
    const checkpoint_figures *f = &c->fig;
    if (c->root && f->due) {
        fprintf(out,
                "checkpoints (%s): %ld due, %ld written, %.2f MB per rank; %ld came due while one was being "
                "written: %ld waited for the writer (%.3f ms), %ld skipped%s%s\n",
                c->mode == CKPT_SNAPSHOT ? "snapshot" : "blocking", f->due, f->written, f->bytes / 1e6,
                f->busy_waits + f->busy_skips, f->busy_waits, f->busy_wait_ms, f->busy_skips,
                f->abandoned ? " (and some skipped by another rank: no manifest)" : "", not_perf);
        fprintf(out,
                "checkpoint stall: %.3f ms each (%.2f%% of the run), against %.3f ms for the weights' copy alone "
                "at %.1f GB/s pinned%s\n",
                v->stall_ms, 100.0 * v->ckpt_share, v->copy_bound_ms, f->d2h_pinned_gbs, not_perf);
        fprintf(out,
                "checkpoint write: %.3f ms per rank file, %.1f MB/s (header, losses, checksum, write, fsync, "
                "rename)%s",
                v->write_ms, v->write_mbs, not_perf);
        if (f->copies) fprintf(out, "; the snapshot's copy beside the training: %.3f ms", v->copy_ms);
        if (f->end_wait_ms > 0) fprintf(out, "; %.3f ms waited at the end for the last write", f->end_wait_ms);
        fprintf(out, "\n");
        print_interval(c, v, not_perf, out);
    }
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
    const checkpointing *c = &ft->ckpt;
    dist_describe_json(ft->dist, js);
    json_int(js, "batches", t->opt.batches);
    json_int(js, "shard_batch", t->opt.batch);
    json_int(js, "attempt", ft->fault.attempt);
    json_int(js, "resumed_from", c->resume_from);
    json_int(js, "start_batch", c->start);
    const checkpoint_figures *f = &c->fig;
    json_int(js, "checkpoint_every", c->root ? c->every : 0);  // auto: the interval it chose (0: none yet)
    json_bool(js, "checkpoint_auto", c->root && c->auto_every);
    json_num(js, "checkpoint_auto_wait_ms", f->auto_wait_ms);
    json_num(js, "checkpoint_auto_step_ms", c->cost.step_ms);  // the figures auto chose by
    json_num(js, "checkpoint_auto_stall_ms", c->cost.stall_ms);
    json_num(js, "checkpoint_auto_copy_ms", c->cost.copy_ms);
    json_num(js, "checkpoint_auto_write_ms", c->cost.write_ms);
    json_int(js, "checkpoint_loss_batches", v->loss_batches);
    json_num(js, "checkpoint_commit_ms", f->written ? f->commit_ms / f->written : 0);
    json_str(js, "checkpoint_mode", c->mode == CKPT_SNAPSHOT ? "snapshot" : "blocking");
    json_str(js, "checkpoint_busy", c->busy_rule == BUSY_SKIP ? "skip" : "wait");
    json_int(js, "checkpoints_due", f->due);
    json_int(js, "checkpoints_written", f->written);
    json_int(js, "checkpoint_busy_waits", f->busy_waits);
    json_int(js, "checkpoint_busy_skips", f->busy_skips);
    json_int(js, "checkpoints_abandoned", f->abandoned);
    json_num(js, "checkpoint_ms", v->stall_ms);  // the stall per checkpoint (blocking: the whole checkpoint)
    json_num(js, "checkpoint_stall_ms", v->stall_ms);
    json_num(js, "checkpoint_busy_wait_ms", f->busy_wait_ms);
    json_num(js, "checkpoint_end_wait_ms", f->end_wait_ms);
    json_num(js, "checkpoint_copy_bound_ms", v->copy_bound_ms);
    json_num(js, "d2h_pinned_gbs", f->d2h_pinned_gbs);
    json_num(js, "checkpoint_copy_ms", v->copy_ms);
    json_num(js, "checkpoint_write_ms", v->write_ms);
    json_num(js, "checkpoint_write_mbs", v->write_mbs);
    json_int(js, "checkpoint_bytes", (long long)f->bytes);
    json_num(js, "checkpoint_ms_per_gb", v->ckpt_ms_per_gb);
    json_num(js, "step_ms", v->step_ms);
    json_num(js, "loop_step_ms", v->loop_step_ms);
    json_num(js, "steady_step_ms", v->steady_step_ms);
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
    const checkpointing *c = &ft->ckpt;
    const checkpoint_figures *f = &c->fig;
    double end = host_now_ms();  // the run's end, give or take the report's own start
    long trained = t->opt.batches - c->start, steady = t->opt.batches - c->steady_from;
    double held = f->stall_ms + f->end_wait_ms + f->auto_wait_ms;  // the main thread's time the checkpoints took
    v.step_ms = trained > 0 ? (loop_ms - held) / trained : 0;
    v.loop_step_ms = trained > 0 ? loop_ms / trained : 0;
    v.steady_step_ms = steady > 0 ? (end - c->steady_t0_ms - f->end_wait_ms) / steady : 0;
    const checkpoint_cost *k = &c->cost;  // what the write adds to the interval, in batches
    long write_batches = k->step_ms > 0 ? (long)ceil(k->write_ms / k->step_ms) : 0;
    if (!c->auto_every && v.step_ms > 0 && f->copies + f->written > 0)
        write_batches = (long)ceil((f->write_ms / (f->copies ? f->copies : f->written)) / v.step_ms);
    v.loss_batches = c->every + write_batches;
    v.stall_ms = f->due ? f->stall_ms / f->due : 0;
    v.copy_bound_ms = f->d2h_pinned_gbs > 0 ? sizeof(float) * t->model.shape.nparams / (f->d2h_pinned_gbs * 1e6) : 0;
    long files = c->mode == CKPT_SNAPSHOT ? f->copies : f->written;  // every rank file this rank wrote
    v.write_ms = files ? f->write_ms / files : 0;
    v.write_mbs = f->write_ms > 0 ? f->bytes_written / (f->write_ms * 1e3) : 0;
    v.copy_ms = f->copies ? f->copy_ms / f->copies : 0;
    v.ckpt_ms_per_gb = f->bytes ? v.stall_ms / (f->bytes / 1e9) : 0;
    v.ckpt_share = held / (loop_ms > 0 ? loop_ms : 1);
    v.fingerprint_ms = ft->fingerprint_checks ? ft->fingerprint_ms / ft->fingerprint_checks : 0;
    if (out) print_report(t, ft, &v, out);
    if (t->opt.json) write_report(t, ft, &v);
    return v.same && v.every_once;
}
