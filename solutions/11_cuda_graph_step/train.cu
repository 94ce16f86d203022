// 11_cuda_graph_step: the whole training step captured once as a CUDA graph, then
// launched with one call per batch.
//
// build: make build/solutions/11_cuda_graph_step
// run:   build/solutions/11_cuda_graph_step [--batches 200] [--json]
//        build/solutions/11_cuda_graph_step --batch 64 --in 64 --hidden 256 --prep-work 0   (a small model)
//        build/solutions/11_cuda_graph_step --capture-error   (a host wait inside a capture: refused)
//
// Once the host no longer waits for the GPU (08-10), what is left of its time per
// step is preparing the batch and issuing the step: two copies, 24 kernels (11 of
// them cuBLAS calls) and eight event calls, each a few microseconds of CPU time.
// With a small model the GPU runs the step faster than the host can issue it. This
// lesson records one step (the batch copy, forward, backward and update, the loss
// copy, on lesson 09's streams, forked from one origin stream and joined back to
// it by events) into a CUDA graph, once, and launches that graph once per batch.
//
//   - A graph keeps the pointers it was captured with. Each batch's step reads a
//     pinned host slot and writes a loss-ring slot, so there is one graph per
//     position of the loss ring, and the ring is a multiple of the host slots:
//     ring position k always means host slot k % 2 and loss slot k.
//   - Inside a capture nothing may wait or allocate. cuBLAS is set up, and each of
//     its handles bound to its stream with its own workspace, by one step issued
//     call by call before the capture; --capture-error shows what CUDA answers to
//     a host synchronisation inside a capture.
//   - The events the host waits on (a host slot has been copied out, a loss has
//     landed) are recorded as external event nodes: inside a capture a plain
//     record is an edge of the graph, not a signal the host can wait for.
//   - Graph launches on one stream run one after another, so batch i+1's copy
//     starts after step i's update: one device slot is enough, and the copy is no
//     longer hidden under the step before it.
//
// Two variants run round-robin, each run checked bit for bit against the
// synchronous reference: "graph" (one cudaGraphLaunch per batch) and "eager" (the
// same step, issued call by call, in the same order on the same streams). --eager
// runs the eager variant alone and captures nothing.
#include <stdio.h>
#include <stdlib.h>

#include "common/base/args.h"      // defines: arg_spec, arg_int, arg_flag, args_parse
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/gpu/graphs.h"     // defines: graph_census, graph_census_of
#include "common/train/harness.h"  // defines: train_variant, harness_extras, harness_run, harness_run_with,
                                   //          harness_finish
#include "common/base/json.h"      // defines: json_int, json_num, json_str, json_bool, json_end
#include "common/gpu/memory.h"     // defines: host_calloc, blocks_in_use
#include "common/base/timing.h"    // defines: host_now_ms
#include "common/trace/trace.h"    // defines: trace_begin, trace_end, trace_name_stream
#include "common/train/trainer.h"  // defines: trainer, train_options, train_options_default, train_option_specs,
                                   //          trainer_init, trainer_destroy, trainer_prepare, trainer_forward,
                                   //          trainer_backward, trainer_loss_slot, test_delay, event_pending, SLOT_WAIT
#include "08_interval_sync/loss_ring.h"  // defines: loss_ring, loss_ring_create, loss_ring_destroy, loss_ring_interval

static const char *PROG = "11_cuda_graph_step";

#define HOST_SLOTS 2           // pinned batches: the host prepares one while the other waits for its copy
#define MAX_SYNC_INTERVAL 100  // each loss-ring slot costs a graph

typedef struct {
    int sync_interval;               // batches between two host synchronisations (lesson 08)
    int replay;                      // 1: launch the captured graphs ("graph"); 0: issue every call ("eager")
    int ring;                        // loss-ring slots, one graph each (ring_slots)
    cudaStream_t origin;             // the trainer's copy stream: each step starts there (the copy) and ends
                                     // there (the join); graphs are captured from it and launched on it
    cudaStream_t forward, backward;  // lesson 09's compute streams
    cudaEvent_t landed;              // fork: the batch is on the device, the forward pass may start
    cudaEvent_t forwarded;           // the forward pass has finished, the backward pass may start
    cudaEvent_t stepped;             // join: the backward pass, update and loss copy have finished
    cudaEvent_t copied[HOST_SLOTS];  // host slot s has been copied out: the host may refill it
    loss_ring losses;                // lesson 08's ring; its events are recorded inside the step
    cudaGraph_t *graph;              // graph[k]: the step of ring position k, as captured
    cudaGraphExec_t *exec;           // exec[k]: graph[k] instantiated: what cudaGraphLaunch runs
    long launches;                   // cudaGraphLaunch calls in the last graph run
    double capture_ms;               // capturing and instantiating every graph
    graph_census census;             // what graph[0] holds (every graph holds the same)
} graph_step;

// ----------------------------------------------------------------------------
// one step, issued call by call or recorded into a graph

// The step of batch i, from the origin stream back to it: eagerly, or recorded into
// a graph when the origin stream is capturing (`capturing` says which).
static void issue_step(graph_step *g, trainer *t, long i, int capturing)
{
    int s = (int)(i % HOST_SLOTS), k = (int)(i % g->ring);
    float *d_batch = t->d_batch[0];  // one device slot: the next step's copy waits for this step (the join)
    // BEGIN SOLUTION(11-external): the host waits on copied[s] and on the loss ring's events, but
    // inside a capture a plain record is only an edge of the graph: pick the record flag that makes
    // it a node the host can wait on (CUDA refuses that flag outside a capture)
    unsigned host_visible = capturing ? cudaEventRecordExternal : cudaEventRecordDefault;
    //| (void)capturing;
    //| unsigned host_visible = cudaEventRecordDefault;
    // END SOLUTION

    test_delay(t, DELAY_COPY, g->origin);
    CUDA_CHECK(cudaMemcpyAsync(d_batch, t->h_batch[s], t->batch_bytes, cudaMemcpyHostToDevice, g->origin));
    CUDA_CHECK(cudaEventRecordWithFlags(g->copied[s], g->origin, host_visible));
    // BEGIN SOLUTION(11-fork): the forward stream joins the capture (and, eagerly, waits for the
    // batch) only by waiting on an event recorded on the origin stream after the copy: use
    // g->landed
    CUDA_CHECK(cudaEventRecord(g->landed, g->origin));
    CUDA_CHECK(cudaStreamWaitEvent(g->forward, g->landed, 0));
    // END SOLUTION
    trainer_forward(t, d_batch, g->forward);
    CUDA_CHECK(cudaEventRecord(g->forwarded, g->forward));
    // BEGIN SOLUTION(11-backward-wait): backward(i) reads what forward(i) wrote (lesson 09's wait),
    // and the backward stream joins the capture only by waiting on an event of a stream already in
    // it: use g->forwarded
    CUDA_CHECK(cudaStreamWaitEvent(g->backward, g->forwarded, 0));
    // END SOLUTION
    trainer_backward(t, i, d_batch, g->backward);
    CUDA_CHECK(
        cudaMemcpyAsync(&t->h_loss[k], trainer_loss_slot(t, i), sizeof(float), cudaMemcpyDeviceToHost, g->backward));
    CUDA_CHECK(cudaEventRecordWithFlags(g->losses.ready[k], g->backward, host_visible));
    // BEGIN SOLUTION(11-join): every stream forked from the origin must join it again before the
    // capture ends, and the next step's copy must not overwrite the batch this step still reads:
    // use g->stepped
    CUDA_CHECK(cudaEventRecord(g->stepped, g->backward));
    CUDA_CHECK(cudaStreamWaitEvent(g->origin, g->stepped, 0));
    // END SOLUTION
}

// ----------------------------------------------------------------------------
// the graphs

// The loss ring's slots, one graph each. A graph keeps the host slot its copy reads
// and the loss slot it writes: ring position k must always mean host slot
// k % HOST_SLOTS and loss slot k.
static int ring_slots(int sync_interval)
{
    // BEGIN SOLUTION(11-ring): lesson 08 needs at least sync_interval + 1 loss slots; batch i
    // launches graph i % ring but the host prepares it into slot i % HOST_SLOTS: round the ring up
    // so that both agree for every i
    int ring = sync_interval + 1;
    return (ring + HOST_SLOTS - 1) / HOST_SLOTS * HOST_SLOTS;
    //| return sync_interval + 1;  // lesson 08's ring
    // END SOLUTION
}

// Records the step of ring position k into g->graph[k] (nothing runs) and makes it
// launchable as g->exec[k].
static void capture_graph(graph_step *g, trainer *t, int k)
{
    // BEGIN SOLUTION(11-capture): begin capturing on the origin stream (global mode: any unsafe
    // call anywhere in the process fails the capture), issue the step of batch k as capturing, end
    // the capture into g->graph[k], and instantiate it into g->exec[k]
    CUDA_CHECK(cudaStreamBeginCapture(g->origin, cudaStreamCaptureModeGlobal));
    issue_step(g, t, k, 1);
    CUDA_CHECK(cudaStreamEndCapture(g->origin, &g->graph[k]));
    CUDA_CHECK(cudaGraphInstantiate(&g->exec[k], g->graph[k], 0));
    //| (void)g, (void)t, (void)k;
    // END SOLUTION
}

// Captures one graph per ring position, before the runs.
static void capture_graphs(graph_step *g, trainer *t)
{
    g->graph = (cudaGraph_t *)host_calloc((size_t)g->ring, sizeof(cudaGraph_t), "the graphs");
    g->exec = (cudaGraphExec_t *)host_calloc((size_t)g->ring, sizeof(cudaGraphExec_t), "the graph execs");
    // A graph replays what was captured, test delays included; the harness turns
    // them on only during its runs, so the lesson turns them on for the capture.
    t->delays_on = 1;
    // One step issued call by call first: cuBLAS's first calls set it up (and may
    // allocate), which a capture refuses; and common/model/model.cu binds each handle to
    // this step's streams with its own workspace (cublasSetStream, then
    // cublasSetWorkspace), so that inside the capture neither call is made.
    trainer_prepare(t, 0, t->h_batch[0]);
    issue_step(g, t, 0, 0);
    CUDA_CHECK(cudaStreamSynchronize(g->origin));  // the join: the whole step
    trace_range phase = trace_begin(TL_RANGE_PHASE, "capture", -1);
    double t0 = host_now_ms();
    for (int k = 0; k < g->ring; k++) {
        capture_graph(g, t, k);
        if (!g->graph[k] || !g->exec[k]) {  // say so now, rather than fail at the first launch
            fprintf(stderr, "%s: capture_graph left graph %d (or its executable form) empty\n", t->prog, k);
            exit(EXIT_FAILURE);
        }
        CUDA_CHECK(cudaGraphUpload(g->exec[k], g->origin));  // else the first launch pays for moving it to the GPU
    }
    g->capture_ms = host_now_ms() - t0;
    trace_end(&phase);
    t->delays_on = 0;
    g->census = graph_census_of(g->graph[0]);
}

// ----------------------------------------------------------------------------
// the training loop

static int train_loop(trainer *t, void *ctx)
{
    graph_step *g = (graph_step *)ctx;
    long next_loss = 0;
    g->launches = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        int s = (int)(i % HOST_SLOTS);
        // host slot s fed the copy of batch i-2, inside its step or its graph: refill it once that copy has run
        if (i >= HOST_SLOTS && event_pending(g->copied[s])) SLOT_WAIT(t, cudaEventSynchronize(g->copied[s]));
        trainer_prepare(t, i, t->h_batch[s]);
        if (g->replay) {
            // BEGIN SOLUTION(11-launch): the whole step in one call: launch the graph of batch i's
            // ring position on the origin stream (launches on one stream run one after another, as
            // the steps must), and count it in g->launches
            CUDA_CHECK(cudaGraphLaunch(g->exec[i % g->ring], g->origin));
            g->launches++;
            // END SOLUTION
        } else {
            issue_step(g, t, i, 0);  // the same step, call by call
        }
        loss_ring_interval(&g->losses, t, i, g->sync_interval, &next_loss);  // lesson 08's ring, one batch behind
    }
    return 0;
}

// The GPU's work of one step for the harness's bound: a graph runs its kernels
// back to back; a step issued call by call leaves gaps whenever the host issues
// more slowly than the GPU runs, and would make a bound the graph can beat.
static void profile_graph_step(trainer *t, cudaStream_t stream, void *ctx)
{
    graph_step *g = (graph_step *)ctx;
    (void)t;
    CUDA_CHECK(cudaGraphLaunch(g->exec[0], stream));  // batch 0's ring position: host slot 0, as prepared
}

// ----------------------------------------------------------------------------
// --capture-error

// Lesson 06's wait for the copy, typed inside a capture. A capturing stream only
// records: nothing has run yet for the host to wait for, so CUDA refuses the wait
// and the capture is lost. Returns the exit code (1); main frees everything.
static int show_capture_error(graph_step *g, trainer *t)
{
    CUDA_CHECK(cudaStreamBeginCapture(g->origin, cudaStreamCaptureModeGlobal));
    CUDA_CHECK(cudaMemcpyAsync(t->d_batch[0], t->h_batch[0], t->batch_bytes, cudaMemcpyHostToDevice, g->origin));
    cudaError_t waited = cudaStreamSynchronize(g->origin);  // the mistake: not checked, reported
    cudaGraph_t graph = NULL;
    cudaError_t ended = cudaStreamEndCapture(g->origin, &graph);
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    fprintf(stderr,
            "%s: --capture-error: cudaStreamSynchronize inside the capture returned %s (%s); cudaStreamEndCapture "
            "then returned %s and no graph: a capture records work without running it, so there is nothing to "
            "wait for yet\n",
            t->prog, cudaGetErrorName(waited), cudaGetErrorString(waited), cudaGetErrorName(ended));
    if (t->opt.json) {
        json_str(&t->js, "capture_error", cudaGetErrorName(waited));
        json_str(&t->js, "end_capture", cudaGetErrorName(ended));
        json_bool(&t->js, "verified", 0);
        json_end(&t->js);
    }
    return 1;
}

// ----------------------------------------------------------------------------

static void create_streams_and_events(graph_step *g, trainer *t)
{
    g->origin = t->copy_stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->forward, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g->backward, cudaStreamNonBlocking));
    trace_name_stream(g->forward, "forward");
    trace_name_stream(g->backward, "backward");
    cudaEvent_t *events[3] = {&g->landed, &g->forwarded, &g->stepped};
    for (int e = 0; e < 3; e++) CUDA_CHECK(cudaEventCreateWithFlags(events[e], cudaEventDisableTiming));
    for (int s = 0; s < HOST_SLOTS; s++) CUDA_CHECK(cudaEventCreateWithFlags(&g->copied[s], cudaEventDisableTiming));
    loss_ring_create(&g->losses, t, 0);
}

static void destroy_all(graph_step *g)
{
    for (int k = 0; g->graph && k < g->ring; k++) {
        if (g->exec[k]) CUDA_CHECK(cudaGraphExecDestroy(g->exec[k]));
        if (g->graph[k]) CUDA_CHECK(cudaGraphDestroy(g->graph[k]));
    }
    free(g->graph);
    free(g->exec);
    loss_ring_destroy(&g->losses);
    cudaEvent_t events[3] = {g->landed, g->forwarded, g->stepped};
    for (int e = 0; e < 3; e++) CUDA_CHECK(cudaEventDestroy(events[e]));
    for (int s = 0; s < HOST_SLOTS; s++) CUDA_CHECK(cudaEventDestroy(g->copied[s]));
    CUDA_CHECK(cudaStreamDestroy(g->forward));
    CUDA_CHECK(cudaStreamDestroy(g->backward));
}

static void report_graphs(const graph_step *g, trainer *t)
{
    FILE *out = t->opt.json ? stderr : stdout;
    const graph_census *c = &g->census;
    if (g->graph)
        fprintf(out,
                "graphs: %d, one per loss-ring slot, captured and instantiated in %.1f ms; each holds %d nodes: %d "
                "kernels, %d copies, %d event records, %d other; %ld launches in the last graph run (%d batches)\n",
                g->ring, g->capture_ms, c->nodes, c->kernels, c->copies, c->event_records, c->others, g->launches,
                t->opt.batches);
    else
        fprintf(out, "graphs: none (--eager)\n");
    if (!t->opt.json) return;
    json_int(&t->js, "sync_interval", g->sync_interval);
    json_int(&t->js, "loss_ring_slots", g->ring);
    json_int(&t->js, "graphs", g->graph ? g->ring : 0);
    json_int(&t->js, "graph_nodes", c->nodes);
    json_int(&t->js, "graph_kernel_nodes", c->kernels);
    json_int(&t->js, "graph_memcpy_nodes", c->copies);
    json_int(&t->js, "graph_event_record_nodes", c->event_records);
    json_int(&t->js, "graph_other_nodes", c->others);
    json_int(&t->js, "graph_launches", g->launches);
    json_num(&t->js, "capture_ms", g->capture_ms);
}

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    graph_step graphs = {.sync_interval = 10, .replay = 1};
    int eager_only = 0, capture_error = 0;
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    specs[n++] = arg_int("sync-interval", &graphs.sync_interval, 1, MAX_SYNC_INTERVAL, "N",
                         "batches between two host synchronisations (each loss-ring slot costs a graph)");
    specs[n++] = arg_flag("eager", &eager_only,
                          "issue every step call by call and capture no graph (default: both, round-robin)");
    specs[n++] = arg_flag("capture-error", &capture_error,
                          "put a host synchronisation inside a capture, show what CUDA answers, exit 1");
    args_parse(argc, argv, PROG, "Train an MLP, launching the whole step as one CUDA graph per batch.", specs, n);

    graphs.ring = ring_slots(graphs.sync_interval);
    trainer t;
    trainer_init(&t, PROG, &o, HOST_SLOTS, 1, graphs.ring);
    create_streams_and_events(&graphs, &t);
    if (capture_error) {
        int code = show_capture_error(&graphs, &t);
        destroy_all(&graphs);
        trainer_destroy(&t);
        if (blocks_in_use() != 0)
            fprintf(stderr, "%s: %ld device or pinned buffers were never freed\n", PROG, blocks_in_use());
        return code;
    }
    if (!eager_only) capture_graphs(&graphs, &t);
    graph_step eager = graphs;  // the same streams, events and ring, every call issued
    eager.replay = 0;
    train_variant variants[2] = {{"graph", train_loop, &graphs}, {"eager", train_loop, &eager}};
    harness_extras x = {.profile_step = profile_graph_step, .profile_ctx = &graphs};
    int ok = eager_only ? harness_run(&t, &variants[1], 1) : harness_run_with(&t, variants, 2, &x);
    report_graphs(&graphs, &t);
    destroy_all(&graphs);
    return harness_finish(&t, ok);
}
