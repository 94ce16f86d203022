// STUDENT VERSION of solutions/15_graph_data_parallel/graphs.cu, made by `make lessons` (checksum 3283145177)
// Fill in its 3 TODOs.
// graphs.cu (lesson 15): lesson 12's data-parallel step, its all-reduces included, captured once
// per ring position into a CUDA graph and replayed with one launch per batch. The exercises: the
// capture around the all-reduces (15-capture), the loss's event the host waits on inside it
// (15-loss-event), the replay (15-replay); and the eager step before any capture.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>  // memcmp: one graph's census against another's

#include "graph_dp.h"  // the lesson's types, and through it lesson 12's and the course's

// ----------------------------------------------------------------------------
// before the capture

// One step of lesson 12, issued call by call on the streams the capture will use, and waited for.
// PyTorch's documentation asks for the communicator to be made, and used in a few eager steps,
// before any capture. NCCL 2.28.3 did not need it here (measured, notes/15): its first collective
// connected the ranks inside the capture, NCCL switching its own thread to relaxed capture mode
// while it allocates. The time is not saved, only moved (the twelve captures took 172 ms instead
// of 6, simulated nodes: connecting waits for every rank). What the step buys is order: everything
// of cuBLAS and NCCL that sets itself up on first use does it here, outside any capture, where a
// rank that fails is seen by the polled wait. The step changes the weights; the harness starts
// every run from the same ones.
void warm_up(graph_dp *g, trainer *t)
{
    ddp_state *dp = g->dp;
    double t0 = host_now_ms();
    float *d_batch = ddp_copy_batch(t, dp, 0, 0);
    ddp_step(t, dp, 0, d_batch);
    CUDA_CHECK(cudaEventRecord(dp->stepped[0], t->compute_stream));
    CUDA_CHECK(dist_event_wait(dp->dist, dp->stepped[0]));
    g->warm_up_ms = host_now_ms() - t0;
}

// ----------------------------------------------------------------------------
// the capture

// Inside the capture, after the step: the loss of ring position k copied to its pinned slot, and
// the loss ring's event for it recorded behind the copy. The host waits on that event (lesson 08's
// ring, every 10 batches); inside a capture a plain record is only an edge between two nodes of
// the graph, and the event is left "last recorded in a capturing stream": the host's wait on it
// is refused (cudaErrorCapturedEvent, lesson 11).
static void capture_loss(trainer *t, ddp_state *dp, int k)
{
    cudaStream_t compute = t->compute_stream;
    CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[k], trainer_loss_slot(t, k), sizeof(float), cudaMemcpyDeviceToHost, compute));
    // TODO(15-loss-event): record dp->losses.ready[k] on the compute stream as a node the
    // host can wait on (lesson 11's flag). Unsolved, the loss ring's wait fails with
    // cudaErrorCapturedEvent
    CUDA_CHECK(cudaEventRecord(dp->losses.ready[k], compute));
}

// Records the step of ring position k into g->graph[k] (nothing runs: not the products, not the
// all-reduces) and makes it launchable as g->exec[k]. The capture starts on the compute stream;
// the communication stream joins it by waiting on an event recorded there (12's grads_ready[b]),
// and leaves it the same way (the compute stream waits on reduced[b] before each update), so that
// the all-reduces become nodes of the graph, beside the products that follow them. Instantiated
// with flags 0, every node runs at the priority of the stream the graph is launched into
// (instantiate_prioritized says why).
static void capture_graph(graph_dp *g, trainer *t, int k)
{
    ddp_state *dp = g->dp;
    cudaStream_t compute = t->compute_stream;
    float *d_batch = t->d_batch[k % DDP_SLOTS];  // the slot ddp_copy_batch fills for every batch of this position
    // TODO(15-capture): begin capturing on the compute stream (global mode: an unsafe
    // call in any thread fails the capture); issue lesson 12's step (ddp_step) for batch k, then
    // its loss's copy (capture_loss); end the capture into g->graph[k]; instantiate it into
    // g->exec[k]
    (void)dp, (void)compute, (void)d_batch, (void)k;
}

// How many of the graph's event record nodes record `event`: a node the host can wait on, where a
// plain record inside a capture is only an edge between two nodes (lesson 11).
static int records_of(cudaGraph_t graph, cudaEvent_t event)
{
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &n));
    if (n == 0) return 0;
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)host_calloc(n, sizeof(cudaGraphNode_t), "the graph's nodes");
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes, &n));
    int found = 0;
    for (size_t j = 0; j < n; j++) {
        enum cudaGraphNodeType type;
        cudaEvent_t recorded = NULL;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[j], &type));
        if (type != cudaGraphNodeTypeEventRecord) continue;
        CUDA_CHECK(cudaGraphEventRecordNodeGetEvent(nodes[j], &recorded));
        found += recorded == event;
    }
    free(nodes);
    return found;
}

// What the graphs hold: graph 0's nodes by type, whether every graph holds the same, and in how
// many the loss's event is a node of its own (each bucket's records may be nodes too: counted apart).
static void take_census(graph_dp *g)
{
    g->census = graph_census_of(g->graph[0]);
    g->census_alike = 1;
    g->loss_records = 0;
    for (int k = 0; k < GRAPH_RING; k++) {
        graph_census c = graph_census_of(g->graph[k]);
        g->census_alike = g->census_alike && memcmp(&c, &g->census, sizeof c) == 0;
        g->loss_records += records_of(g->graph[k], g->dp->losses.ready[k]) == 1;
    }
}

// Every rank captures the same graphs, in the same order, each holding the same all-reduces in
// the same order: NCCL treats a captured collective as a collective property of the capture, and
// the launch of a graph holding one as a collective call of every rank that captured it.
void capture_graphs(graph_dp *g, trainer *t)
{
    // A graph replays what was captured, test delays included; the harness turns them on only
    // during its runs, so the lesson turns them on for the capture (lesson 11).
    int delays_were_on = t->delays_on;
    t->delays_on = 1;
    trace_range phase = trace_begin(TL_RANGE_PHASE, "capture", -1);
    double t0 = host_now_ms();
    // --capture-workspace library: both handles on cuBLAS's default pool, as in a program that never
    // set a workspace (the course's model sets its own: common/model/model.cu), for the captures alone
    if (g->library_workspace) mlp_model_use_workspace(&t->model, 0, t->compute_stream);
    for (int k = 0; k < GRAPH_RING; k++) {
        capture_graph(g, t, k);
        if (!g->graph[k] || !g->exec[k]) {  // say so now, rather than fail at the first launch
            stderr_line("%s: capture_graph left graph %d (or its executable form) empty", t->prog, k);
            exit(EXIT_FAILURE);
        }
        if (g->upload) CUDA_CHECK(cudaGraphUpload(g->exec[k], t->compute_stream));  // else the first launch pays
    }
    if (g->library_workspace) mlp_model_use_workspace(&t->model, 1, t->compute_stream);  // the eager runs: ours
    g->capture_ms = host_now_ms() - t0;
    trace_end(&phase);
    t->delays_on = delays_were_on;
    take_census(g);
}

// --compare-priority: the same graphs instantiated again into `prioritized`, each kernel node run at
// the priority it was captured with (the all-reduces at the communication stream's high one). A
// kernel node keeps its stream's priority as an attribute, but a graph runs every node at the
// priority of the stream it is launched into unless instantiated with
// cudaGraphInstantiateFlagUseNodePriority. Kept, lesson 12's high priority for the all-reduces
// made the GPU-bound step 1.4 to 2.4% slower (measured: notes/15), so the lesson leaves it out.
void instantiate_prioritized(const graph_dp *g, graph_dp *prioritized, trainer *t)
{
    *prioritized = *g;
    for (int k = 0; k < GRAPH_RING; k++) {
        CUDA_CHECK(cudaGraphInstantiate(&prioritized->exec[k], g->graph[k], cudaGraphInstantiateFlagUseNodePriority));
        if (g->upload) CUDA_CHECK(cudaGraphUpload(prioritized->exec[k], t->compute_stream));
        prioritized->graph[k] = NULL;  // g owns the graphs
    }
}

void destroy_graphs(graph_dp *g)
{
    for (int k = 0; k < GRAPH_RING; k++) {
        if (g->exec[k]) CUDA_CHECK(cudaGraphExecDestroy(g->exec[k]));
        if (g->graph[k]) CUDA_CHECK(cudaGraphDestroy(g->graph[k]));
    }
}

// ----------------------------------------------------------------------------
// the replay

// Lesson 12's loop with its step replaced by one launch: the batch's copy as lesson 12 issues it
// (ddp_copy_batch: lesson 08's two slots), then the graph of the batch's ring position on the compute
// stream, which waits for the copy. Launches on one stream run one after another, as the steps
// must; the copy of the next batch runs on the copy stream under this one's graph.
int graph_loop(trainer *t, void *ctx)
{
    graph_dp *g = (graph_dp *)ctx;
    ddp_state *dp = g->dp;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    g->launches = 0;
    for (long i = 0; i < t->opt.batches; i++) {
        dist_fault_inject(dp->dist, &dp->fault, i, t->compute_stream);  // --fault: a failure on purpose
        ddp_copy_batch(t, dp, i, 0);  // lesson 12's, into device slot i % DDP_SLOTS: the one graph i % GRAPH_RING reads
        // TODO(15-replay): the whole step in one call: launch the graph of batch i's ring
        // position on the compute stream (every rank launches the same one), and count it in
        // g->launches
        CUDA_CHECK(cudaEventRecord(dp->stepped[i % DDP_SLOTS], t->compute_stream));  // ddp_copy_batch's device slot
        loss_ring_interval(&dp->losses, t, i, DDP_SYNC_INTERVAL, &next_loss);        // lesson 08's, its waits polled
    }
    ddp_average_losses(t, dp);  // the last loss's copy came after the last update: the GPU is done
    return 0;
}
