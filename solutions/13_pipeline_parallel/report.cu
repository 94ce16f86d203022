// report.cu (lesson 13): each part alone (what the prediction is made of), the checks
// across stages, and the report.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"  // the lesson's types, and through it the course's headers

// each part alone: what the prediction is made of

// One micro-batch's forward and backward through this stage, and the stage's update, each
// timed with events, median of 5 after a warm-up. Before each, the stream spins for 2 ms, long
// enough for the host to queue what follows: the time is the GPU's, not the host's issuing.
// No hand-over is timed: the prediction leaves them out (notes/13).
void profile_parts(trainer *t, pipeline *pp, part_times *p)
{
    const stage_shape *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t c = t->compute_stream;
    double fwd[PART_REPS], bwd[PART_REPS], upd[PART_REPS];
    double *compute_parts[3] = {fwd, bwd, upd};
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    float *act = (float *)device_alloc(sizeof(float) * st->slot_floats);
    CUDA_CHECK(cudaMemsetAsync(act, 0, sizeof(float) * st->slot_floats, c));
    CUDA_CHECK(cudaMemsetAsync(pp->d_error_in[0], 0, sizeof(float) * output_floats(s, st), c));
    CUDA_CHECK(cudaMemsetAsync(t->model.d_grads, 0, sizeof(float) * s->nparams, c));  // the backward adds to them
    cudaEvent_t ev[4];
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventCreate(&ev[k]));
    for (int k = -1; k < PART_REPS; k++) {  // k = -1 is a warm-up
        launch_spin(1, 32, QUEUE_AHEAD_NS, c);
        CUDA_CHECK(cudaEventRecord(ev[0], c));
        stage_forward(&t->model, st, act, c);
        CUDA_CHECK(cudaEventRecord(ev[1], c));
        stage_backward(&t->model, st, act, pp->d_error_in[0], pp->d_error_out[0], pp->d_parts, 1, c);
        CUDA_CHECK(cudaEventRecord(ev[2], c));
        mlp_update(&t->model, first, end - first, c);
        CUDA_CHECK(cudaEventRecord(ev[3], c));
        CUDA_CHECK(dist_event_wait(pp->dist, ev[3]));
        if (k >= 0) parts_ms(ev, 4, compute_parts, k);  // forward, backward, update
    }
    for (int k = 0; k < 4; k++) CUDA_CHECK(cudaEventDestroy(ev[k]));
    device_free(act);
    p->forward_ms = stats_of(fwd, PART_REPS).median;
    p->backward_ms = stats_of(bwd, PART_REPS).median;
    p->update_ms = stats_of(upd, PART_REPS).median;
}

// ----------------------------------------------------------------------------
// the checks across stages, and the report

// FNV-1a of each layer's parameters (W_l then b_l, one range): the stage's own layers are
// this rank's to report; the test compares them with a one-stage run's.
static void layer_checksums(trainer *t, uint64_t *sums)
{
    const mlp_shape *s = &t->model.shape;
    size_t bytes = sizeof(float) * s->nparams;
    float *h = (float *)host_alloc(bytes, "a copy of the weights");
    CUDA_CHECK(cudaMemcpyAsync(h, t->model.d_params, bytes, cudaMemcpyDeviceToHost, t->compute_stream));
    CUDA_CHECK(cudaStreamSynchronize(t->compute_stream));  // nothing of NCCL's is queued any more
    for (int l = 1; l <= s->layers; l++) {
        size_t end = s->b_off[l] + (size_t)s->dims[l];
        sums[l] = fnv1a(h + s->w_off[l], sizeof(float) * (end - s->w_off[l]), FNV1A_START);
    }
    free(h);
}

typedef enum { PEAK_SLOTS, PEAK_BYTES, GROUPED_SENDS, FORWARD_MS, BACKWARD_MS, UPDATE_MS } stage_figure;

// "a,b,c": one figure per stage (the peaks of schedule `which`).
static void per_stage(const stage_report *all, int stages, schedule_kind which, stage_figure f, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (int r = 0; r < stages && at < size; r++) {
        const stage_report *x = &all[r];
        double v = f == PEAK_SLOTS      ? (double)x->peak_slots[which]
                   : f == PEAK_BYTES    ? (double)x->act_device_bytes[which]
                   : f == GROUPED_SENDS ? (double)x->p2p_pairs[which]
                   : f == FORWARD_MS    ? x->forward_ms
                   : f == BACKWARD_MS   ? x->backward_ms
                                        : x->update_ms;
        at += (size_t)snprintf(out + at, size - at, f <= GROUPED_SENDS ? "%s%.0f" : "%s%.4f", r ? "," : "", v);
    }
}

// The same list in the JSON, under `key`.
static void json_per_stage(json_writer *js, const char *key, const stage_report *all, int stages, schedule_kind which,
                           stage_figure f)
{
    char list[512];
    per_stage(all, stages, which, f, list, sizeof list);
    json_str(js, key, list);
}

// What rank 0 makes of every stage's report.
typedef struct {
    int verified, once;               // every rank's checks passed; every crossing counted once
    long act, error, expected;        // the lesson's own schedule's last run: sends up, sends down
    double max_f, max_b, max_u;       // the slowest stage's parts alone
    double predicted, ideal, bubble;  // the model of the step
    char layers[128], sums[(MLP_MAX_LAYERS + 1) * 18];
} pipeline_figures;

static void figures_of(const trainer *t, const stage_report *all, int p, int M, schedule_kind first,
                       pipeline_figures *g)
{
    const mlp_shape *s = &t->model.shape;
    double sum_fb = 0, max_fb = 0;
    memset(g, 0, sizeof *g);
    g->verified = g->once = 1;
    for (int r = 0; r < p; r++) {
        const stage_report *a = &all[r];
        g->verified = g->verified && a->ok == 1;
        g->once = g->once && a->crossings_ok[0] == 1 && a->crossings_ok[1] == 1;
        g->act += (long)a->act_sent[first];
        g->error += (long)a->error_sent[first];
        double fb = a->forward_ms + a->backward_ms;
        sum_fb += fb;
        if (fb > max_fb) max_fb = fb;
        if (a->forward_ms > g->max_f) g->max_f = a->forward_ms;
        if (a->backward_ms > g->max_b) g->max_b = a->backward_ms;
        if (a->update_ms > g->max_u) g->max_u = a->update_ms;
    }
    g->expected = (long)(p - 1) * M * t->opt.batches;
    g->once = g->once && g->act == g->expected && g->error == g->expected;
    // the step's critical path (GPipe's model): the first micro-batch goes up and down every
    // stage, each of the other M - 1 waits for the slowest stage; then the update. Hand-overs
    // are left out. With equal stages: (M + p - 1)(t_f + t_b) + t_u.
    g->predicted = sum_fb + (M - 1) * max_fb + g->max_u;
    g->ideal = M * max_fb + g->max_u;
    g->bubble = (double)(p - 1) / (M + p - 1);
    size_t at = 0;
    for (int r = 0; r < p; r++) {
        stage_shape other;
        stage_shape_init(&other, s, r, p, M);
        at += (size_t)snprintf(g->layers + at, sizeof g->layers - at, "%s%d", r ? "|" : "", other.first_layer);
        if (other.last_layer > other.first_layer)
            at += (size_t)snprintf(g->layers + at, sizeof g->layers - at, "-%d", other.last_layer);
    }
    at = 0;
    for (int l = 1; l <= s->layers; l++) {  // layer l's checksum from the stage that trains it
        int owner = 0;
        while (owner + 1 < p && 1 + (owner + 1) * s->layers / p <= l) owner++;
        at += (size_t)snprintf(g->sums + at, sizeof g->sums - at, "%s%016llx", l > 1 ? "," : "",
                               (unsigned long long)all[owner].layer_sums[l]);
    }
}

static void print_report(FILE *out, const dist_env *d, const stage_shape *st, const stage_report *all,
                         schedule_run *runs[2], const harness_extras *x, schedule_kind first, const pipeline_figures *g)
{
    int p = st->stages;
    char slots[256];
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    dist_describe(d, out);
    fprintf(out, "pipeline: %d stage%s (layers %s), %d micro-batches of %d samples, %s first\n", p, p == 1 ? "" : "s",
            g->layers, st->micro_batches, st->cols, SCHEDULE_NAMES[first]);
    for (int r = 0; r < p; r++)
        fprintf(out,
                "  stage %d alone, per micro-batch (median of %d): forward %.3f ms, backward %.3f ms; "
                "update %.3f ms%s\n",
                r, PART_REPS, all[r].forward_ms, all[r].backward_ms, all[r].update_ms, not_perf);
    fprintf(out,
            "  predicted step (critical path, no hand-over time): %.3f ms; without a bubble: %.3f ms; "
            "bubble (p-1)/(m+p-1) = %.1f%% of the step%s\n",
            g->predicted, g->ideal, 100 * g->bubble, not_perf);
    for (int k = 0; k < 2; k++) {
        schedule_kind which = runs[k]->kind;
        per_stage(all, p, which, PEAK_SLOTS, slots, sizeof slots);
        fprintf(out,
                "  %-5s step %.3f ms (%.2f x predicted; bubble from the step %.1f%%)%s; activation slots per "
                "stage: %s\n",
                SCHEDULE_NAMES[which], x->step_ms[k], x->step_ms[k] / g->predicted,
                100 * (1 - g->ideal / x->step_ms[k]), not_perf, slots);
    }
    if (runs[0]->pp->grouping == P2P_PAIRS)
        for (int k = 0; k < 2; k++) {
            per_stage(all, p, runs[k]->kind, GROUPED_SENDS, slots, sizeof slots);
            fprintf(out, "  %-5s sends grouped with a receive (--p2p-group pairs), last run, per stage: %s\n",
                    SCHEDULE_NAMES[runs[k]->kind], slots);
        }
    fprintf(out, "  crossings per run: %ld activations, %ld errors (%ld each expected): %s\n", g->act, g->error,
            g->expected, g->once ? "every micro-batch once each way" : "NOT once each way");
    fprintf(out, "  every stage's own checks passed: %s\n", g->verified ? "yes" : "NO");
}

static void write_report(json_writer *js, const dist_env *d, const stage_shape *st, const stage_report *all,
                         schedule_run *runs[2], const harness_extras *x, schedule_kind first, const pipeline_figures *g)
{
    int p = st->stages;
    const pipeline *pp = runs[0]->pp;
    char key[64];
    dist_describe_json(d, js);
    json_int(js, "stages", p);
    json_str(js, "stage_layers", g->layers);
    json_int(js, "micro_batches", st->micro_batches);
    json_int(js, "micro_batch", st->cols);
    json_str(js, "schedule", SCHEDULE_NAMES[first]);
    json_str(js, "post_recv", pp->post_recv == POST_RECV_LATE ? "late" : "early");
    json_str(js, "p2p_group", pp->grouping == P2P_PAIRS ? "pairs" : "none");
    json_int(js, "link_ctas", pp->sharing.link_ctas);
    json_int(js, "gemm_sms", pp->sharing.gemm_sms);
    json_per_stage(js, "stage_forward_ms", all, p, first, FORWARD_MS);
    json_per_stage(js, "stage_backward_ms", all, p, first, BACKWARD_MS);
    json_per_stage(js, "stage_update_ms", all, p, first, UPDATE_MS);
    // the model of the step: the slowest stage's parts alone, and what they predict
    const char *model_keys[6] = {"forward_ms",        "backward_ms",   "update_ms",
                                 "predicted_step_ms", "ideal_step_ms", "bubble_model"};
    double model[6] = {g->max_f, g->max_b, g->max_u, g->predicted, g->ideal, g->bubble};
    for (int k = 0; k < 6; k++) json_num(js, model_keys[k], model[k]);
    for (int k = 0; k < 2; k++) {
        schedule_kind which = runs[k]->kind;
        const char *name = SCHEDULE_NAMES[which];
        uint64_t most = 0, most_bytes = 0;
        for (int r = 0; r < p; r++) {
            if (all[r].peak_slots[which] > most) most = all[r].peak_slots[which];
            if (all[r].act_device_bytes[which] > most_bytes) most_bytes = all[r].act_device_bytes[which];
        }
#define KEY(what) (snprintf(key, sizeof key, "%s_%s", name, what), key)
        json_num(js, KEY("step_over_predicted"), x->step_ms[k] / g->predicted);
        json_num(js, KEY("bubble_from_step"), 1 - g->ideal / x->step_ms[k]);
        json_int(js, KEY("peak_slots"), (long long)most);
        json_int(js, KEY("peak_act_bytes"), (long long)most_bytes);
        json_per_stage(js, KEY("peak_slots_per_stage"), all, p, which, PEAK_SLOTS);
        json_per_stage(js, KEY("peak_act_bytes_per_stage"), all, p, which, PEAK_BYTES);
        json_per_stage(js, KEY("p2p_pairs_per_stage"), all, p, which, GROUPED_SENDS);
#undef KEY
    }
    json_int(js, "act_crossings", g->act);
    json_int(js, "error_crossings", g->error);
    json_int(js, "expected_crossings", g->expected);
    json_bool(js, "crossings_once", g->once);
    json_str(js, "layer_checksums", g->sums);
    json_bool(js, "ranks_verified", g->verified);
    json_num(js, "timeout_s", d->timeout_s);
}

// Every rank's report (its checks, its layers' checksums, its schedules' peaks and crossings,
// its parts alone) gathered to rank 0, which prints and writes the figures the lesson is
// about. Every rank calls it (a collective). Returns 1 when every rank's checks passed and
// every micro-batch crossed once each way.
int stages_agree(trainer *t, pipeline *pp, schedule_run *runs[2], const part_times *parts, const harness_extras *x,
                 schedule_kind first, int ok, FILE *out)
{
    dist_env *d = pp->dist;
    const stage_shape *st = &pp->st;
    stage_report mine;
    memset(&mine, 0, sizeof mine);
    mine.ok = (uint64_t)ok;
    layer_checksums(t, mine.layer_sums);
    for (int k = 0; k < 2; k++) {
        const schedule_run *sched = runs[k];
        mine.peak_slots[sched->kind] = (uint64_t)sched->pool.allocated;
        mine.act_device_bytes[sched->kind] = (uint64_t)sched->pool.device_bytes;
        mine.crossings_ok[sched->kind] = (uint64_t)sched->crossings_ok;
        mine.act_sent[sched->kind] = (uint64_t)sched->act_sent;
        mine.error_sent[sched->kind] = (uint64_t)sched->error_sent;
        mine.p2p_pairs[sched->kind] = (uint64_t)sched->pairs;
        if (!sched->crossings_ok && out) fprintf(out, "%s: crossings: %s\n", d->name, sched->crossing_problem);
        if (!sched->crossings_ok && !out) stderr_line("%s: crossings: %s", d->name, sched->crossing_problem);
    }
    mine.slot_bytes = sizeof(float) * st->slot_floats;
    mine.forward_ms = parts->forward_ms;
    mine.backward_ms = parts->backward_ms;
    mine.update_ms = parts->update_ms;
    stage_report *all = (stage_report *)host_calloc((size_t)d->world, sizeof(stage_report), "every stage's report");
    dist_allgather(d, &mine, all, sizeof mine, t->compute_stream);
    pipeline_figures g;
    figures_of(t, all, st->stages, st->micro_batches, first, &g);
    if (out) print_report(out, d, st, all, runs, x, first, &g);
    if (t->opt.json) write_report(&t->js, d, st, all, runs, x, first, &g);
    free(all);
    return g.verified && g.once;
}
