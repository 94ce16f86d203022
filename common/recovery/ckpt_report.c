// ckpt_report.c: what a run's checkpoints cost, and what the report says of it (ckpt_report.h).
#include "common/recovery/ckpt_report.h"

#include <math.h>  // ceil

ckpt_verdict ckpt_verdict_of(const ckpt_plan *p, const ckpt_figures *f, double loop_ms, long trained, double steady_ms,
                             long steady)
{
    ckpt_verdict v = {0};
    double held = f->stall_ms + f->end_wait_ms + f->auto_wait_ms;  // the main thread's time the checkpoints took
    v.step_ms = trained > 0 ? (loop_ms - held) / trained : 0;
    v.loop_step_ms = trained > 0 ? loop_ms / trained : 0;
    v.steady_step_ms = steady > 0 ? steady_ms / steady : 0;
    const ckpt_cost *k = &p->cost;  // what the write adds to the interval, in batches
    long write_batches = k->step_ms > 0 ? (long)ceil(k->write_ms / k->step_ms) : 0;
    if (!p->auto_every && v.step_ms > 0 && f->copies + f->written > 0)
        write_batches = (long)ceil((f->write_ms / (f->copies ? f->copies : f->written)) / v.step_ms);
    v.loss_batches = p->every + write_batches;
    v.stall_ms = f->due ? f->stall_ms / f->due : 0;
    v.copy_bound_ms = f->d2h_pinned_gbs > 0 ? p->weights_bytes / (f->d2h_pinned_gbs * 1e6) : 0;
    long files = p->snapshot ? f->copies : f->written;  // every rank file this rank wrote
    v.write_ms = files ? f->write_ms / files : 0;
    v.write_mbs = f->write_ms > 0 ? f->bytes_written / (f->write_ms * 1e3) : 0;
    v.copy_ms = f->copies ? f->copy_ms / f->copies : 0;
    v.ms_per_gb = f->bytes ? v.stall_ms / (f->bytes / 1e9) : 0;
    v.share = held / (loop_ms > 0 ? loop_ms : 1);
    return v;
}

// The interval, and what a failure would lose at it: the batches since the last checkpoint, and those
// of the write that would have completed the next.
static void print_interval(const ckpt_plan *p, const ckpt_figures *f, const ckpt_verdict *v, const char *not_perf,
                           FILE *out)
{
    const ckpt_cost *k = &p->cost;
    if (p->auto_every && !p->every) {
        fprintf(out,
                "checkpoint interval: auto, not chosen: the run ended before the batch after its first checkpoint\n");
        return;
    }
    if (p->auto_every)
        fprintf(out,
                "checkpoint interval: auto: every %d batches, chosen after the checkpoint of batch %ld: its write %.1f "
                "ms (%.1f MB a rank, %.0f MB/s, rank 0's manifest and prune in), a stall of %.3f ms and a copy of "
                "%.3f ms against a step of %.3f ms: the write within 1/%.1f of the interval, the cost at most "
                "%.1f%% of the step (waited %.1f ms once for it)%s\n",
                p->every, p->probe, k->write_ms, f->bytes / 1e6, k->write_ms > 0 ? f->bytes / (k->write_ms * 1e3) : 0,
                k->stall_ms, k->copy_ms, k->step_ms, p->spare, 100 * p->max_cost, f->auto_wait_ms, not_perf);
    else
        fprintf(out, "checkpoint interval: every %d batches (--checkpoint-every)\n", p->every);
    fprintf(out,
            "a failure loses at most %ld batches (the interval, and the write that would complete the next), "
            "about %.0f ms of training%s\n",
            v->loss_batches, v->loss_batches * v->step_ms, not_perf);
}

void ckpt_report_text(const ckpt_plan *p, const ckpt_figures *f, const ckpt_verdict *v, const char *not_perf, FILE *out)
{
    if (!p->on || !f->due) return;
    fprintf(out,
            "checkpoints (%s): %ld due, %ld written, %.2f MB per rank; %ld came due while one was being "
            "written: %ld waited for the writer (%.3f ms), %ld skipped%s%s\n",
            p->snapshot ? "snapshot" : "blocking", f->due, f->written, f->bytes / 1e6, f->busy_waits + f->busy_skips,
            f->busy_waits, f->busy_wait_ms, f->busy_skips,
            f->abandoned ? " (and some skipped by another rank: no manifest)" : "", not_perf);
    fprintf(out,
            "checkpoint stall: %.3f ms each (%.2f%% of the run), against %.3f ms for the weights' copy alone "
            "at %.1f GB/s pinned%s\n",
            v->stall_ms, 100.0 * v->share, v->copy_bound_ms, f->d2h_pinned_gbs, not_perf);
    fprintf(out,
            "checkpoint write: %.3f ms per rank file, %.1f MB/s (header, losses, checksum, write, fsync, rename)%s",
            v->write_ms, v->write_mbs, not_perf);
    if (f->copies) fprintf(out, "; the snapshot's copy beside the training: %.3f ms", v->copy_ms);
    if (f->end_wait_ms > 0) fprintf(out, "; %.3f ms waited at the end for the last write", f->end_wait_ms);
    fprintf(out, "\n");
    print_interval(p, f, v, not_perf, out);
}

void ckpt_report_json(const ckpt_plan *p, const ckpt_figures *f, const ckpt_verdict *v, json_writer *js)
{
    json_int(js, "checkpoint_every", p->on ? p->every : 0);  // auto: the interval it chose (0: none yet)
    json_bool(js, "checkpoint_auto", p->on && p->auto_every);
    json_num(js, "checkpoint_auto_wait_ms", f->auto_wait_ms);
    json_num(js, "checkpoint_auto_step_ms", p->cost.step_ms);  // the figures auto chose by
    json_num(js, "checkpoint_auto_stall_ms", p->cost.stall_ms);
    json_num(js, "checkpoint_auto_copy_ms", p->cost.copy_ms);
    json_num(js, "checkpoint_auto_write_ms", p->cost.write_ms);
    json_int(js, "checkpoint_loss_batches", v->loss_batches);
    json_num(js, "checkpoint_commit_ms", f->written ? f->commit_ms / f->written : 0);
    json_str(js, "checkpoint_mode", p->snapshot ? "snapshot" : "blocking");
    json_str(js, "checkpoint_busy", p->busy_skip ? "skip" : "wait");
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
    json_num(js, "checkpoint_ms_per_gb", v->ms_per_gb);
    json_num(js, "step_ms", v->step_ms);
    json_num(js, "loop_step_ms", v->loop_step_ms);
    json_num(js, "steady_step_ms", v->steady_step_ms);
}
