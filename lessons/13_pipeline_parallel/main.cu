// STUDENT VERSION of solutions/13_pipeline_parallel/main.cu, made by `make lessons` (checksum 3125542502)
// No exercise in this file, read it as it stands; the TODOs are in stages.cu, train.cu.
// 13_pipeline_parallel: the MLP's layers cut into stages, one GPU each, and every batch
// cut into micro-batches that flow through the stages: GPipe and 1F1B.
//
// build: make build/lessons/13_pipeline_parallel      (where make finds NCCL: its first line says)
// run:   build/lessons/13_pipeline_parallel [--micro-batches 8] [--json]       one GPU: one stage
//        tools/launch -n 2 build/lessons/13_pipeline_parallel [--schedule gpipe]   two GPUs, two stages
//        tools/launch -n 4 --simulate-nodes build/lessons/13_pipeline_parallel   four stages on one GPU
//            (each a node of its own, over loopback sockets: every check holds, no timing is performance)
//        build/lessons/13_pipeline_parallel --show-schedule --stages 4       every stage's order, no GPU
//
// One process per GPU, each a rank (common/dist/dist.h, as in lesson 12) and a stage: stage s
// of p holds a contiguous range of the layers. Each batch of --batch samples is cut into
// --micro-batches M micro-batches. The first stage copies a micro-batch's features in and
// runs its layers; the activation it produces goes to the next stage (ncclSend, ncclRecv),
// and so on up to the last stage, which also copies in the targets and computes the
// micro-batch's share of the loss. Its error comes back down the same way. Every stage
// adds each micro-batch's gradients to its layers' gradients, in micro-batch order, and
// after the batch's last backward pass updates its layers.
//
// Two schedules run round-robin, every run checked bit for bit against the one-stage
// reference (the same micro-batched step on one GPU, which every rank computes itself):
//   1f1b   warm-up forwards, then one forward and one backward in turn, then the last
//          backwards (PipeDream-flush, Megatron-LM): a stage holds at most p micro-batches;
//   gpipe  every forward, then every backward: a stage holds all M micro-batches.
// Activations go forward on one communicator and one stream, errors back on another: on
// each, a stage receives from one neighbour and sends to the other in micro-batch order,
// so that every pair of neighbours issues its calls in the same order (notes/13).
// Every hand-over is ordered by events; the host waits only to stay two batches ahead.
//
// The files: pipeline.h (types), stages.cu, links.cu, train.cu (the step and the loop),
// report.cu, and this one (setup, options, main).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "13_pipeline_parallel";

static void setup(trainer *t, pipeline *pp, int stages, int micro_batches)
{
    const mlp_shape *s = &t->model.shape;
    stage_shape_init(&pp->st, s, pp->dist->rank, stages, micro_batches);
    stage_shape_init(&pp->whole, s, 0, 1, micro_batches);
    const stage_shape *st = &pp->st;
    int M = micro_batches;
    for (int k = 0; k < 2; k++) {
        pp->d_error_in[k] = (float *)device_alloc(sizeof(float) * aligned(output_floats(s, st)));
        pp->d_error_out[k] = (float *)device_alloc(sizeof(float) * aligned(input_floats(s, st)));
        cudaEvent_t *ev[5] = {&pp->error_received[k], &pp->error_read[k], &pp->error_ready[k], &pp->error_sent[k],
                              &pp->error_wanted[k]};
        for (int e = 0; e < 5; e++) CUDA_CHECK(cudaEventCreateWithFlags(ev[e], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&pp->links_idle[k], cudaEventDisableTiming));
    }
    pp->host_copied = (cudaEvent_t *)host_calloc((size_t)HOST_SLOTS * M, sizeof(cudaEvent_t),
                                                 "the host regions' events");
    for (int r = 0; r < HOST_SLOTS * M; r++)
        CUDA_CHECK(cudaEventCreateWithFlags(&pp->host_copied[r], cudaEventDisableTiming));
    pp->d_parts = (float *)device_alloc(sizeof(float) * STEP_RING * M);
    pp->h_parts = (float *)pinned_alloc(sizeof(float) * STEP_RING * M);
    for (int k = 0; k < STEP_RING; k++) CUDA_CHECK(cudaEventCreateWithFlags(&pp->step_done[k], cudaEventDisableTiming));
    pp->d_losses = (float *)device_alloc(sizeof(float) * (size_t)t->opt.batches);
    pp->h_losses = (float *)pinned_alloc(sizeof(float) * (size_t)t->opt.batches);
    CUDA_CHECK(cudaEventCreateWithFlags(&pp->losses_landed, cudaEventDisableTiming));
    pp->d_ref = (float *)device_alloc(sizeof(float) * pp->whole.slot_floats);
    CUDA_CHECK(cudaDeviceSynchronize());
    // cuBLAS sizes each product's grid for the SMs it is told it has: told fewer, a product
    // beside NCCL's kernels is not cut into a second, almost empty wave (notes/13)
    for (int k = 0; k < 2; k++) CUBLAS_CHECK(cublasSetSmCountTarget(t->model.handle[k], pp->sharing.gemm_sms));
    if (stages > 1) {
        pp->ln = links_open(pp->dist, &t->dev, pp->sharing.link_ctas, pp->grouping);
        links_connect(pp, s);
    }
}

static void teardown(pipeline *pp)
{
    for (int k = 0; k < 2; k++) {
        device_free(pp->d_error_in[k]);
        device_free(pp->d_error_out[k]);
        cudaEvent_t ev[6] = {pp->error_received[k], pp->error_read[k],   pp->error_ready[k],
                             pp->error_sent[k],     pp->error_wanted[k], pp->links_idle[k]};
        for (int e = 0; e < 6; e++) CUDA_CHECK(cudaEventDestroy(ev[e]));
    }
    for (int r = 0; r < HOST_SLOTS * pp->st.micro_batches; r++) CUDA_CHECK(cudaEventDestroy(pp->host_copied[r]));
    free(pp->host_copied);
    device_free(pp->d_parts);
    pinned_free(pp->h_parts);
    for (int k = 0; k < STEP_RING; k++) CUDA_CHECK(cudaEventDestroy(pp->step_done[k]));
    device_free(pp->d_losses);
    pinned_free(pp->h_losses);
    CUDA_CHECK(cudaEventDestroy(pp->losses_landed));
    device_free(pp->d_ref);
    if (pp->ln) links_close(pp);
}

// A schedule's order on this stage (checked), its pool and its counters.
static void schedule_create(schedule_run *sched, pipeline *pp, schedule_kind kind)
{
    int M = pp->st.micro_batches;
    char why[200];
    memset(sched, 0, sizeof *sched);
    sched->pp = pp;
    sched->kind = kind;
    sched->ops = (step_op *)host_calloc((size_t)2 * M, sizeof(step_op), "the schedule");
    sched->nops = schedule_build(kind, &pp->st, sched->ops);
    if (!schedule_is_sound(&pp->st, sched->ops, sched->nops, why, sizeof why))
        dist_fail(pp->dist, "stage %d: the %s schedule is wrong: %s%s", pp->st.rank, SCHEDULE_NAMES[kind], why,
                  kind == SCHEDULE_1F1B ? " (exercise 13-one-f-one-b)" : "");
    sched->pool.capacity = M;
    sched->pool.slots = (act_slot *)host_calloc((size_t)M, sizeof(act_slot), "the activation slots");
    sched->slot_of = (int *)host_calloc((size_t)M, sizeof(int), "the activation slots");
    sched->crossed = (long *)host_calloc((size_t)CROSSING_KINDS * M, sizeof(long), "the crossings");
    sched->crossings_ok = 1;
}

static void schedule_destroy(schedule_run *sched)
{
    for (int k = 0; k < sched->pool.allocated; k++) slot_destroy(&sched->pool.slots[k]);
    free(sched->pool.slots);
    free(sched->ops);
    free(sched->slot_of);
    free(sched->crossed);
}

// --show-schedule: every stage's order of forwards and backwards, and nothing else (no GPU).
static int show_schedule(const train_options *o, schedule_kind kind, int stages, int micro_batches)
{
    mlp_shape s;
    mlp_shape_init(&s, o->in_dim, o->hidden, o->hidden_layers, o->out_dim, o->batch);
    step_op *ops = (step_op *)host_calloc((size_t)2 * micro_batches, sizeof(step_op), "the schedule");
    size_t size = (size_t)micro_batches * 16 + 16;
    char *text = (char *)host_alloc(size, "the schedule"), why[200];
    int ok = 1;
    printf("%s: the %s schedule of %d stage%s and %d micro-batches (Fm: micro-batch m's forward, Bm: its backward)\n",
           PROG, SCHEDULE_NAMES[kind], stages, stages == 1 ? "" : "s", micro_batches);
    for (int r = 0; r < stages; r++) {
        stage_shape st;
        stage_shape_init(&st, &s, r, stages, micro_batches);
        int n = schedule_build(kind, &st, ops);
        schedule_text(ops, n, text, size);
        printf("stage %d: %s\n", r, text);
        if (!schedule_is_sound(&st, ops, n, why, sizeof why)) {
            stderr_line("%s: stage %d: the %s schedule is wrong: %s%s", PROG, r, SCHEDULE_NAMES[kind], why,
                        kind == SCHEDULE_1F1B ? " (exercise 13-one-f-one-b)" : "");
            ok = 0;
        }
    }
    free(ops);
    free(text);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}

// What the command line says: the training options, the lesson's own.
typedef struct {
    train_options train;
    int first;           // --schedule: the lesson's own schedule, run first
    int stages;          // --stages (0 on the command line: as many as ranks)
    int micro_batches;   // --micro-batches
    int showing;         // --show-schedule
    int post_recv;       // --post-recv
    int grouping;        // --p2p-group
    sm_sharing sharing;  // --link-ctas, --gemm-sms
    dist_options dist;   // --rendezvous, --timeout-s
} options;

// Options that depend on each other, on the model or on the number of ranks.
static void check_options(const dist_env *d, const options *o, const pipeline *pp)
{
    const train_options *t = &o->train;
    int layers = t->hidden_layers + 1;
    if (o->stages > layers)
        usage_error(d->name,
                    "--stages %d: the model has %d weight layers (--layers %d hidden, and the output layer); "
                    "every stage needs one at least",
                    o->stages, layers, t->hidden_layers);
    if (!o->showing && o->stages != d->world)
        usage_error(d->name,
                    "--stages %d: this run has %d rank%s; every stage is a rank on a GPU of its own "
                    "(tools/launch -n %d ...)",
                    o->stages, d->world, d->world == 1 ? "" : "s", o->stages);
    if (t->batch % o->micro_batches != 0)
        usage_error(d->name,
                    "--batch %d is not divisible by --micro-batches %d: every micro-batch holds as many "
                    "samples",
                    t->batch, o->micro_batches);
    dist_fault_check(d, &pp->fault, t->batches);
}

static void parse_options(dist_env *d, int argc, char **argv, options *o, pipeline *pp)
{
    train_options_default(&o->train);
    o->first = SCHEDULE_1F1B;
    o->stages = 0;
    o->micro_batches = 8;
    o->showing = 0;
    o->post_recv = POST_RECV_LATE;
    o->grouping = P2P_APART;
    memset(&o->sharing, 0, sizeof o->sharing);
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    specs[n++] = arg_int("stages", &o->stages, 0, MLP_MAX_LAYERS, "P",
                         "pipeline stages, one per rank; 0: as many as ranks; 1 is the one-stage reference");
    specs[n++] = arg_int("micro-batches", &o->micro_batches, 1, 65536, "M",
                         "micro-batches per batch (must divide --batch)");
    specs[n++] = arg_choice("schedule", &o->first, "1f1b|gpipe",
                            "the lesson's own schedule (both run, round-robin): one forward one backward, or all "
                            "forwards then all backwards");
    specs[n++] = arg_flag("show-schedule", &o->showing,
                          "print every stage's order of forwards and backwards and stop (no GPU; with --stages)");
    specs[n++] = arg_choice("post-recv", &o->post_recv, "early|late",
                            "a receive starts on the GPU as soon as its buffer is free, or once the compute stream "
                            "has done what comes before the work that reads it");
    specs[n++] = arg_choice("p2p-group", &o->grouping, "none|pairs",
                            "each send and receive on its own, a communicator per direction; or one communicator, "
                            "each send in one NCCL group with the receive after it (Megatron-LM's way)");
    specs[n++] = arg_int("link-ctas", &o->sharing.link_ctas, 0, 64, "N",
                         "at most N CTAs (an SM each) per send or receive; 0: NCCL chooses");
    specs[n++] = arg_int("gemm-sms", &o->sharing.gemm_sms, 0, 1024, "N",
                         "cuBLAS sizes its products for N SMs (cublasSetSmCountTarget); 0: every SM");
    dist_option_specs(&o->dist, specs, &n);
    dist_fault_options(&pp->fault, DIST_FAULT_WORDS, DIST_FAULT_HELP, specs, &n);
    const char *summary =
        "Train an MLP cut into pipeline stages, one GPU each, on micro-batches (GPipe, 1F1B).\n" DIST_HOW_TO_RUN(
            "stages");
    args_parse(argc, argv, d->name, summary, specs, n);
    if (o->stages == 0) o->stages = d->world;
    check_options(d, o, pp);
}

// The parts alone, both schedules round-robin against the one-stage reference, the checks
// across stages and the report. Returns 1 when every check passed.
static int run_and_report(trainer *t, pipeline *pp, const options *o, FILE *out)
{
    part_times parts;
    profile_parts(t, pp, &parts);
    schedule_run own, other;
    schedule_create(&own, pp, (schedule_kind)o->first);
    schedule_create(&other, pp, o->first == SCHEDULE_1F1B ? SCHEDULE_GPIPE : SCHEDULE_1F1B);
    train_variant variants[2] = {{SCHEDULE_NAMES[own.kind], train_loop, &own},
                                 {SCHEDULE_NAMES[other.kind], train_loop, &other}};
    train_variant reference = {"reference", reference_loop, pp};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = harness_run_with(t, variants, 2, &x);
    schedule_run *runs[2] = {&own, &other};
    ok = stages_agree(t, pp, runs, &parts, &x, (schedule_kind)o->first, ok, out) && ok;  // every rank: a collective
    schedule_destroy(&own);
    schedule_destroy(&other);
    return ok;
}

int main(int argc, char **argv)
{
    // NCCL's kernels wait for their peers on the GPU; a stream that shared a hardware queue
    // with a waiting one would wait too, and could close a cycle. Enough queues for every
    // stream here (ours and NCCL's), unless the user chose: before the first CUDA call.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    pipeline pp;
    memset(&pp, 0, sizeof pp);
    pp.dist = &d;
    options o;
    parse_options(&d, argc, argv, &o, &pp);
    if (o.showing) return show_schedule(&o.train, (schedule_kind)o.first, o.stages, o.micro_batches);
    pp.post_recv = (recv_posting)o.post_recv;
    pp.grouping = (p2p_grouping)o.grouping;
    pp.sharing = o.sharing;
    dist_configure(&d, o.dist.rendezvous, o.dist.timeout_s);
    train_options mine = o.train;
    rank_outputs outs = harness_rank_outputs(d.name, d.rank, d.world, &mine);  // rank 0 reports for every rank
    mine.json = outs.json;
    mine.trace_path = outs.trace_path[0] ? outs.trace_path : NULL;
    dist_select_device(&d);
    trainer t;
    trainer_init(&t, d.name, &mine, HOST_SLOTS, 1, STEP_RING);
    t.human = outs.human;
    if (o.sharing.gemm_sms > t.dev.sms)
        usage_error(d.name, "--gemm-sms %d: this GPU has %d SMs", o.sharing.gemm_sms, t.dev.sms);
    dist_connect(&d);  // lesson 12's meet_ranks
    setup(&t, &pp, o.stages, o.micro_batches);
    int ok = run_and_report(&t, &pp, &o, outs.report);
    teardown(&pp);
    dist_finish(&d);
    return harness_finish(&t, ok);
}
