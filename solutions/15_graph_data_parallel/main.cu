// 15_graph_data_parallel: lesson 12's data-parallel step, its all-reduces included, captured once
// as CUDA graphs and replayed with one launch per batch on every rank.
//
// build: make build/solutions/15_graph_data_parallel      (where make finds NCCL: its first line says)
// run:   tools/launch -n 2 build/solutions/15_graph_data_parallel [--batches 200] [--json]   two GPUs
//        tools/launch -n 2 build/solutions/15_graph_data_parallel --batch 128 --in 64 --hidden 256 --prep-work 0
//            (lesson 11's small model, 64 samples a rank: a step the host issues more slowly than it runs)
//        tools/launch -n 2 --simulate-nodes build/solutions/15_graph_data_parallel   two ranks on one GPU
//        tools/launch -n 2 build/solutions/15_graph_data_parallel --break-rule host-wait|new-comm|one-rank
//
// Lesson 11 made one GPU's step a single graph launch; lesson 12 spread the step over GPUs, each
// bucket's all-reduce on a communication stream under the backward pass. This lesson does both:
// lesson 12's step is captured, NCCL's calls and the events between the two streams included,
// once per ring position (a graph keeps the pointers it was captured with: the device slot it
// reads, the loss slot it writes), and every batch launches one graph on every rank.
//
// What NCCL needs for it (its documentation, "Using NCCL with CUDA Graphs"): NCCL 2.9 or later;
// every rank capturing the same collectives in the same order, and launching the same graph at
// the same batch, for a captured collective is a collective property of every rank; buffers that
// stay where they were captured. PyTorch's documentation adds the communicator made, and warmed up
// with eager steps, before the capture (graphs.cu's warm-up: one step issued call by call). --break-rule breaks one
// and shows what CUDA or NCCL answers (broken_rules.cu).
//
// Two variants run round-robin, every run checked bit for bit against lesson 12's synchronous
// reference: "graph" (one launch a batch) and "eager" (lesson 12's own loop, linked as its
// solution). --eager runs the eager one alone and captures nothing. A rank that fails stops every
// rank as in lesson 12, graphs in flight included: the host's waits are lesson 12's polled ones.
//
// The files: graph_dp.h (types), graphs.cu (the warm-up, and the exercises: the capture, the
// loss's event inside it, the replay), broken_rules.cu, and this one (options, the report, main).
// Everything else is lesson 12's library, its options and setup included (the Makefile's STANDS_ON).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_dp.h"  // the lesson's types, and through it lesson 12's and the course's

static const char *PROG = "15_graph_data_parallel";

// What the command line says: lesson 12's options but --overlap (always the buckets) and
// --grad-comm (the gradients' communicator is 12's blocking one, whose calls only queue their
// kernels: a non-blocking one may answer ncclInProgress and finish a call on NCCL's thread, which
// this lesson has not measured inside a capture), and the lesson's own.
typedef struct {
    train_options train;
    ddp_options dp;        // lesson 12's: --bucket-mib, --ready-after, --comm-ctas, --comm-policy, --gemm-sms, ...
    int eager_only;        // --eager
    int no_warm_up;        // --no-warm-up
    int compare_priority;  // --compare-priority
    int broken;            // --break-rule (BREAK_NONE: none)
    int workspace;         // --capture-workspace (0: own, 1: library)
    int no_upload;         // --no-upload
} options;

static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    train_options_default(&o->train);
    o->train.batch = DDP_SHARD * d->world;
    ddp_options_default(&o->dp);
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    specs[n++] = arg_flag("eager", &o->eager_only,
                          "issue every step call by call (lesson 12's loop) and capture no graph (default: both, "
                          "round-robin)");
    specs[n++] = arg_flag("no-warm-up", &o->no_warm_up,
                          "capture without an eager step first (NCCL then connects the ranks inside the capture)");
    specs[n++] = arg_flag("compare-priority", &o->compare_priority,
                          "also run the graphs instantiated with their nodes' priorities (variant \"prioritized\")");
    specs[n++] = arg_choice("break-rule", &o->broken, "none|host-wait|new-comm|one-rank",
                            "break one rule of capturing NCCL, show what CUDA or NCCL answers, exit 1");
    specs[n++] = arg_choice(
        "capture-workspace", &o->workspace, "own|library",
        "cuBLAS's workspace inside the capture: the model's own 32 MiB per handle, or none set "
        "(cuBLAS's pool: its allocations become nodes of the graph; the eager runs keep the model's)");
    specs[n++] = arg_flag("no-upload", &o->no_upload,
                          "leave each graph on the host until its first launch (no cudaGraphUpload after its "
                          "instantiation)");
    ddp_option_specs(&o->dp, specs, &n);  // lesson 12's
    const char *summary =
        "Train an MLP on every GPU, each rank's step (its all-reduces too) one CUDA graph launch.\n" DIST_HOW_TO_RUN(
            "ranks");
    args_parse(argc, argv, d->name, summary, specs, n);
    ddp_options_check(d, &o->dp, &o->train);  // lesson 12's
    if (o->eager_only && (o->no_warm_up || o->compare_priority || o->workspace || o->no_upload))
        usage_error(d->name, "--eager captures no graph: --no-warm-up, --compare-priority, --capture-workspace "
                             "library and --no-upload need the graphs");
    // a graph with allocation nodes has one executable form at a time (cuGraphInstantiate): no prioritized one
    if (o->workspace && o->compare_priority)
        usage_error(d->name, "--capture-workspace library: its graphs may allocate, and CUDA instantiates such a "
                             "graph once at a time: not with --compare-priority");
    if (o->broken == BREAK_ONE_RANK && d->world < 2)
        usage_error(d->name, "--break-rule one-rank needs two ranks or more (tools/launch -n 2)");
}

// ----------------------------------------------------------------------------
// the report

static void report(trainer *t, const graph_dp *g, const harness_extras *x, const options *o, FILE *out)
{
    const dist_env *d = g->dp->dist;
    const graph_census *c = &g->census;
    double t_graph = x->step_ms[0], t_eager = x->step_ms[1];
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    char plan[128];
    ddp_plan_text(&g->dp->plan, plan, sizeof plan);
    if (out) {
        dist_describe(d, out);
        fprintf(out, "data parallel: %d samples per batch, %d per rank, %d buckets (layers %s)\n", o->train.batch,
                t->opt.batch, g->dp->plan.count, plan);
        char warm[48] = "none (--no-warm-up)";
        if (!o->no_warm_up) snprintf(warm, sizeof warm, "%.1f ms", g->warm_up_ms);
        fprintf(out,
                "graphs: %d, one per loss-ring slot; warm-up step %s, captured and instantiated in %.1f ms; "
                "%s %d nodes: %d kernels (NCCL's among them), %d copies, %d event records (the loss's a node "
                "of its own in %d graphs), %d other (%d event waits, %d host functions, %d empty); %ld launches "
                "in the last graph run (%d batches)\n",
                GRAPH_RING, warm, g->capture_ms, g->census_alike ? "each holds" : "NOT ALIKE: graph 0 holds", c->nodes,
                c->kernels, c->copies, c->event_records, g->loss_records, c->others, c->event_waits, c->hosts,
                c->empties, g->launches, o->train.batches);
        fprintf(out, "step: graph %.3f ms, eager (lesson 12) %.3f ms: %.2fx%s\n", t_graph, t_eager, t_eager / t_graph,
                not_perf);
        if (o->compare_priority)
            fprintf(out,
                    "  the same graphs run at their nodes' priorities (prioritized): %.3f ms, %.3fx the graph's%s\n",
                    x->step_ms[2], x->step_ms[2] / t_graph, not_perf);
        fprintf(out, "  capture: cuBLAS's workspace %s; graph 0 holds %d allocation and %d free nodes; graphs %s\n",
                g->library_workspace ? "none set, its pool (--capture-workspace library)" : "the model's own",
                c->allocs, c->frees, g->upload ? "uploaded after instantiation" : "not uploaded (--no-upload)");
    }
    if (!t->opt.json) return;
    json_writer *js = &t->js;
    dist_describe_json(d, js);
    json_int(js, "global_batch", o->train.batch);
    json_int(js, "shard_batch", t->opt.batch);
    json_int(js, "buckets", g->dp->plan.count);
    json_str(js, "bucket_plan", plan);
    json_int(js, "comm_ctas", o->dp.sharing.comm_ctas);
    json_int(js, "gemm_sms", o->dp.sharing.gemm_sms);
    json_int(js, "graphs", GRAPH_RING);
    json_int(js, "graph_nodes", c->nodes);
    json_int(js, "graph_kernel_nodes", c->kernels);
    json_int(js, "graph_memcpy_nodes", c->copies);
    json_int(js, "graph_event_record_nodes", c->event_records);
    json_int(js, "graph_other_nodes", c->others);
    json_int(js, "graph_event_wait_nodes", c->event_waits);
    json_int(js, "graph_host_nodes", c->hosts);
    json_int(js, "graph_empty_nodes", c->empties);
    json_bool(js, "graph_census_alike", g->census_alike);
    json_int(js, "graph_loss_record_nodes", g->loss_records);
    json_int(js, "graph_launches", g->launches);
    json_bool(js, "warm_up", !o->no_warm_up);
    json_num(js, "warm_up_ms", g->warm_up_ms);
    json_num(js, "capture_ms", g->capture_ms);
    json_num(js, "speedup", t_eager / t_graph);
    json_num(js, "timeout_s", d->timeout_s);
    json_str(js, "capture_workspace", g->library_workspace ? "library" : "own");
    json_int(js, "graph_alloc_nodes", c->allocs);
    json_int(js, "graph_free_nodes", c->frees);
    json_bool(js, "graph_uploaded", g->upload);
}

// Both variants round-robin against lesson 12's reference, the checks across ranks, the report.
// Returns 1 when every check passed.
static int run_and_report(trainer *t, graph_dp *g, const options *o, FILE *out)
{
    graph_dp prioritized;  // --compare-priority: the same graphs, the all-reduces at their captured priority
    memset(&prioritized, 0, sizeof prioritized);
    train_variant variants[3] = {
        {"graph", graph_loop, g}, {"eager", ddp_train_loop, g->dp}, {"prioritized", graph_loop, &prioritized}};
    int count = 2;
    if (o->compare_priority) {
        instantiate_prioritized(g, &prioritized, t);
        count = 3;
    }
    train_variant reference = {"reference", ddp_reference_loop, g->dp};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = o->eager_only ? harness_run_with(t, &variants[1], 1, &x) : harness_run_with(t, variants, count, &x);
    ok = ddp_ranks_agree(t, g->dp, ok, out);
    if (!o->eager_only && x.step_ms[0] > 0) report(t, g, &x, o, out);
    destroy_graphs(&prioritized);
    return ok;
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    options o;
    memset(&o, 0, sizeof o);
    parse_options(&d, argc, argv, &o);
    ddp_state dp;         // lesson 12's step, its hooks lesson 12's exercises
    ddp_init(&dp, &d);    // each bucket's all-reduce under the backward pass, inside the graph too
    train_options shard;  // what this rank's trainer is built for: one shard of every batch
    rank_outputs outs;
    ddp_shard_of(&d, &o.train, &shard, &outs);
    trainer t;
    ddp_rank_open(&d, &t, &shard, &outs, GRAPH_RING);  // this rank's GPU, its trainer: a loss slot a graph
    ddp_step_setup(&t, &dp, &o.dp);                    // lesson 12's: the plan, the hooks, the step's state
    dist_connect(&d);                                  // the ranks meet (common/dist, lesson 12's meet.cu in one call)
    dp.grads = ddp_open_gradient_comm(&d, &o.dp.sharing);  // blocking: each call only queues (sharing.nonblocking 0)
    graph_dp graphs;
    memset(&graphs, 0, sizeof graphs);
    graphs.dp = &dp;
    graphs.library_workspace = o.workspace;
    graphs.upload = !o.no_upload;
    int ok = 0;
    if (o.broken != BREAK_NONE) {
        ok = break_rule(&graphs, &t, (broken_rule)o.broken) == 0;
    } else {
        if (!o.eager_only) {
            if (!o.no_warm_up) warm_up(&graphs, &t);  // graphs.cu: one step call by call, outside any capture
            capture_graphs(&graphs, &t);
        }
        ok = run_and_report(&t, &graphs, &o, outs.report);
    }
    destroy_graphs(&graphs);
    ddp_rank_close(&dp);  // lesson 12's: the step's state freed, every communicator finalized (dist_finish)
    if (o.train.check_cpu && d.world > 1 && d.rank == 0 && o.broken == BREAK_NONE)
        ok = ddp_cpu_check_whole_batch(&t, &o.train, outs.report) && ok;
    return harness_finish(&t, ok);
}
