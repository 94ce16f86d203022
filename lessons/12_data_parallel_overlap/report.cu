// STUDENT VERSION of solutions/12_data_parallel_overlap/report.cu, made by `make lessons` (checksum 533420584)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// report.cu (lesson 12): each part alone (what the figures are made of) and the report. The checks
// across ranks are the library's (checks.cu), which the lessons after this one use too.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// each part alone: what the figures are made of

// The ranks line up on a one-float all-reduce; then `stream` spins for 2 ms, long
// enough for the host to queue everything that follows: the time measured after the
// spin is the GPU's work, not the host's issuing (NCCL issues each call from a thread).
static void line_up(ddp_state *dp, cudaStream_t stream, cudaEvent_t lined_up)
{
    NCCL_CHECK(dp->dist,
               ncclAllReduce(dp->d_losses, dp->d_losses, 1, ncclFloat, ncclSum, dp->dist->comm, dp->comm_stream));
    CUDA_CHECK(cudaEventRecord(lined_up, dp->comm_stream));
    CUDA_CHECK(cudaStreamWaitEvent(stream, lined_up, 0));
    launch_spin(1, 32, QUEUE_AHEAD_NS, stream);
}

// The backward pass with every bucket's all-reduce issued as the step issues them: the time of
// the compute stream alone, against the backward pass with nothing beside it. NCCL's kernels
// hold SMs while they run (waiting for the other ranks included); the products get the rest.
static double backward_beside_ms(trainer *t, ddp_state *dp, float *d_batch, cudaEvent_t *ev, cudaEvent_t lined_up)
{
    cudaStream_t s = t->compute_stream, c = dp->comm_stream;
    line_up(dp, s, lined_up);
    CUDA_CHECK(cudaEventRecord(ev[0], s));
    ddp_backward(t, dp, 0, d_batch, s, 1);
    CUDA_CHECK(cudaEventRecord(ev[1], s));
    CUDA_CHECK(cudaEventRecord(ev[2], c));
    CUDA_CHECK(dist_event_wait(dp->dist, ev[1]));
    CUDA_CHECK(dist_event_wait(dp->dist, ev[2]));
    return event_ms(ev[0], ev[1]);
}

void profile_parts(trainer *t, ddp_state *dp, part_times *p)
{
    cudaStream_t s = t->compute_stream, c = dp->comm_stream;
    const ddp_bucket_plan *plan = &dp->plan;
    float *d_batch = t->d_batch[0];
    double fwd[PART_REPS], bwd[PART_REPS], upd[PART_REPS], comm[PART_REPS], one[PART_REPS], beside[PART_REPS];
    double *compute_parts[3] = {fwd, bwd, upd};
    cudaEvent_t ev[4], lined_up;  // lined_up: every rank has reached line_up's one-float all-reduce
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventCreate(&ev[k]));
    CUDA_CHECK(cudaEventCreateWithFlags(&lined_up, cudaEventDisableTiming));
    ddp_prepare_shard(t, dp, 0, t->h_batch[0]);
    CUDA_CHECK(cudaMemcpyAsync(d_batch, t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice, s));
    for (int k = -1; k < PART_REPS; k++) {  // k = -1 is a warm-up: NCCL connects on first use
        line_up(dp, s, lined_up);
        CUDA_CHECK(cudaEventRecord(ev[0], s));
        mlp_forward(&t->model, batch_features(d_batch), s);
        CUDA_CHECK(cudaEventRecord(ev[1], s));
        ddp_backward(t, dp, 0, d_batch, s, 0);
        CUDA_CHECK(cudaEventRecord(ev[2], s));
        for (int b = 0; b < plan->count; b++) mlp_update(&dp->averaged, plan->first[b], plan->floats[b], s);
        CUDA_CHECK(cudaEventRecord(ev[3], s));
        CUDA_CHECK(dist_event_wait(dp->dist, ev[3]));
        if (k >= 0) parts_ms(ev, 4, compute_parts, k);  // forward, backward, update
        double b = backward_beside_ms(t, dp, d_batch, ev, lined_up);
        if (k >= 0) beside[k] = b;
        line_up(dp, c, lined_up);
        CUDA_CHECK(cudaEventRecord(ev[0], c));
        for (int b = 0; b < plan->count; b++) ddp_allreduce_gradients(t, dp, plan->first[b], plan->floats[b], c);
        CUDA_CHECK(cudaEventRecord(ev[1], c));
        line_up(dp, c, lined_up);
        CUDA_CHECK(cudaEventRecord(ev[2], c));
        ddp_allreduce_gradients(t, dp, 0, t->model.shape.nparams, c);
        CUDA_CHECK(cudaEventRecord(ev[3], c));
        CUDA_CHECK(dist_event_wait(dp->dist, ev[3]));
        if (k >= 0) {
            comm[k] = event_ms(ev[0], ev[1]);
            one[k] = event_ms(ev[2], ev[3]);
        }
    }
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventDestroy(ev[k]));
    CUDA_CHECK(cudaEventDestroy(lined_up));
    p->forward_ms = stats_of(fwd, PART_REPS).median;
    p->backward_ms = stats_of(bwd, PART_REPS).median;
    p->update_ms = stats_of(upd, PART_REPS).median;
    p->comm_ms = stats_of(comm, PART_REPS).median;
    p->comm_one_ms = stats_of(one, PART_REPS).median;
    p->backward_beside_ms = stats_of(beside, PART_REPS).median;
}

// ----------------------------------------------------------------------------
// the checks across ranks, and the report

// The figures the lesson is about, from the parts alone and the two variants' steps. The share
// of the all-reduce hidden needs something to hide: not with one rank (NCCL copies, nothing
// crosses). Under simulated nodes every figure is printed, said to be no performance figure.
void report(trainer *t, const ddp_state *dp, const part_times *p, const harness_extras *x, overlap_mode first,
            int global_batch, const ddp_options *o, FILE *out)
{
    const ddp_sharing *sharing = &o->sharing;
    const dist_env *d = dp->dist;
    int n = d->world;
    double bytes = sizeof(float) * (double)t->model.shape.nparams;
    double factor = 2.0 * (n - 1) / n;  // nccl-tests' all-reduce bus bandwidth: algbw x 2(n-1)/n
    double algbw = bytes / (p->comm_ms * 1e6), one_algbw = bytes / (p->comm_one_ms * 1e6);
    double t_buckets = x->step_ms[first == OVERLAP_BUCKETS ? 0 : 1], t_none = x->step_ms[first == OVERLAP_NONE ? 0 : 1];
    double hideable = p->comm_ms < p->backward_ms ? p->comm_ms : p->backward_ms;
    double saved_share = (t_none - t_buckets) / hideable;
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    char plan[128], ctas[24] = "as many as NCCL chooses", gemm[16] = "all";
    ddp_plan_text(&dp->plan, plan, sizeof plan);
    if (sharing->comm_ctas > 0) snprintf(ctas, sizeof ctas, "%d", sharing->comm_ctas);
    if (sharing->gemm_sms > 0) snprintf(gemm, sizeof gemm, "%d", sharing->gemm_sms);
    if (out) {
        dist_describe(d, out);
        fprintf(out, "data parallel: %d samples per batch, %d per rank\n", global_batch, t->opt.batch);
        fprintf(out, "  gradients: %.1f MB per step in %d buckets of about %g MiB (layers %s, issued in that order)\n",
                bytes / 1e6, dp->plan.count, o->bucket_mib, plan);
        fprintf(out, "  alone (median of %d): forward %.3f ms, backward %.3f ms, update %.3f ms%s\n", PART_REPS,
                p->forward_ms, p->backward_ms, p->update_ms, not_perf);
        if (n > 1)
            fprintf(out,
                    "  all-reduce alone: the buckets back to back %.3f ms (bus bandwidth %.0f GB/s), "
                    "the whole gradient at once %.3f ms (%.0f GB/s)%s\n",
                    p->comm_ms, algbw * factor, p->comm_one_ms, one_algbw * factor, not_perf);
        if (n > 1)
            fprintf(out,
                    "  backward beside the buckets' all-reduces %.3f ms, %.2fx alone (NCCL's CTAs: %s%s; "
                    "products sized for %s SMs)%s\n",
                    p->backward_beside_ms, p->backward_beside_ms / p->backward_ms, ctas,
                    sharing->efficiency ? ", efficiency policy" : "", gemm, not_perf);
        fprintf(out, "  step: buckets %.3f ms, none %.3f ms: %.3f ms saved%s\n", t_buckets, t_none, t_none - t_buckets,
                not_perf);
        if (n > 1)
            fprintf(out,
                    "  saved / min(all-reduce alone, backward alone): %.0f%% (the trace measures what was "
                    "hidden: tools/tracestat)%s\n",
                    100 * saved_share, not_perf);
        fprintf(out, "  throughput: %.0f samples/s overlapped, %.0f without overlap%s\n",
                global_batch / t_buckets * 1e3, global_batch / t_none * 1e3, not_perf);
    }
    if (!t->opt.json) return;
    json_writer *js = &t->js;
    dist_describe_json(d, js);
    json_int(js, "global_batch", global_batch);
    json_int(js, "shard_batch", t->opt.batch);
    json_str(js, "overlap", first == OVERLAP_BUCKETS ? "buckets" : "none");
    json_num(js, "bucket_mib", o->bucket_mib);
    json_int(js, "buckets", dp->plan.count);
    json_str(js, "bucket_plan", plan);
    json_str(js, "ready_after", dp->ready_after == DDP_READY_WEIGHTS ? "weights" : "layer");
    json_int(js, "comm_ctas", sharing->comm_ctas);
    json_str(js, "comm_policy", sharing->efficiency ? "efficiency" : "auto");
    json_int(js, "gemm_sms", sharing->gemm_sms);
    json_str(js, "grad_comm", sharing->nonblocking ? "nonblocking" : "blocking");
    json_int(js, "grad_bytes", (long long)bytes);
    json_num(js, "forward_ms", p->forward_ms);
    json_num(js, "backward_ms", p->backward_ms);
    json_num(js, "update_ms", p->update_ms);
    json_num(js, "comm_ms", p->comm_ms);
    json_num(js, "comm_one_ms", p->comm_one_ms);
    if (n > 1) {  // with one rank nothing crosses: no bandwidth, nothing to hide
        json_num(js, "comm_algbw_gbs", algbw);
        json_num(js, "comm_busbw_gbs", algbw * factor);
        json_num(js, "comm_one_busbw_gbs", one_algbw * factor);
        json_num(js, "saved_share", saved_share);
        json_num(js, "backward_beside_ms", p->backward_beside_ms);
        json_num(js, "backward_stretch", p->backward_beside_ms / p->backward_ms);
    }
    json_num(js, "saved_ms", t_none - t_buckets);
    json_num(js, "buckets_samples_per_s", global_batch / t_buckets * 1e3);
    json_num(js, "none_samples_per_s", global_batch / t_none * 1e3);
    json_num(js, "timeout_s", d->timeout_s);
}
