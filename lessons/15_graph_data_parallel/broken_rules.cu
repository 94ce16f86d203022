// STUDENT VERSION of solutions/15_graph_data_parallel/broken_rules.cu, made by `make lessons` (checksum 3212531025)
// No exercise in this file, read it as it stands; the TODOs are in graphs.cu.
// broken_rules.cu (lesson 15): the rules of capturing NCCL, each broken on purpose (--break-rule),
// with what CUDA or NCCL answers. Each ends the program with exit code 1 and says what happened.
//   host-wait  lesson 12's polled host wait, typed inside the capture: CUDA refuses it, and the
//              capture is lost;
//   new-comm   a communicator split inside the capture. NCCL's documentation asks for it before;
//              NCCL 2.28.3 makes it all the same (measured: notes/15), switching its own thread to
//              relaxed capture mode while it allocates. The program says which it saw;
//   one-rank   the ranks' graphs differ: rank 0 captures an all-reduce of the gradients'
//              communicator and launches it, the others captured nothing and go on to a collective
//              of the parent. Each waits for ranks that will never come, until --timeout-s stops
//              every rank. NCCL cannot know at capture time what another rank captured.
#include <stdio.h>
#include <stdlib.h>

#include "graph_dp.h"  // the lesson's types, and through it lesson 12's and the course's

static int show_host_wait(trainer *t, ddp_state *dp)
{
    cudaStream_t s = t->compute_stream;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    trainer_forward(t, t->d_batch[0], s);
    CUDA_CHECK(cudaEventRecord(dp->stepped[0], s));
    cudaError_t waited = cudaEventQuery(dp->stepped[0]);  // what dist_event_wait asks, until it is done
    cudaGraph_t graph = NULL;
    cudaError_t ended = cudaStreamEndCapture(s, &graph);
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    if (dp->dist->rank == 0)
        stderr_line("%s: --break-rule host-wait: cudaEventQuery inside the capture returned %s (%s); "
                    "cudaStreamEndCapture then returned %s and %s: a capture records work without running it, so "
                    "there is nothing to wait for yet",
                    t->prog, cudaGetErrorName(waited), cudaGetErrorString(waited), cudaGetErrorName(ended),
                    graph ? "a graph" : "no graph");
    if (t->opt.json) {
        json_str(&t->js, "broken_rule", "host-wait");
        json_str(&t->js, "capture_error", cudaGetErrorName(waited));
        json_str(&t->js, "end_capture", cudaGetErrorName(ended));
    }
    return 1;
}

static int show_new_comm(trainer *t, ddp_state *dp)
{
    dist_env *d = dp->dist;
    cudaStream_t s = t->compute_stream;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclComm_t child = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    ncclResult_t split = ncclCommSplit(d->comm, 1, d->rank, &child, &config);
    // the parent is non-blocking: its thread goes on making the child; wait until it has answered
    if (split == ncclInProgress) split = dist_wait_issued(d, "splitting a communicator inside a capture");
    cudaGraph_t graph = NULL;
    cudaError_t ended = cudaStreamEndCapture(s, &graph);
    // no JSON: dist_abort ends the program below, with the object unfinished
    int nodes = 0;
    if (graph) nodes = graph_census_of(graph).nodes;
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    if (split == ncclSuccess && ended == cudaSuccess)
        dist_abort(d,
                   "--break-rule new-comm: ncclCommSplit inside the capture answered ncclSuccess, and "
                   "cudaStreamEndCapture cudaSuccess with a graph of %d nodes: this NCCL made the communicator "
                   "inside a capture; NCCL's documentation still asks for it before (notes/15)",
                   nodes);
    // the parent may be broken now: no finalize, the abort ends every rank's communicators
    dist_abort(d,
               "--break-rule new-comm: ncclCommSplit inside the capture answered %s (%s); cudaStreamEndCapture "
               "then returned %s: a communicator is made before the capture, never inside it",
               ncclGetErrorString(split), ncclGetLastError(d->comm), cudaGetErrorName(ended));
    return 1;
}

static int show_one_rank(trainer *t, ddp_state *dp)
{
    dist_env *d = dp->dist;
    cudaStream_t s = t->compute_stream;
    // every rank connects the gradients' communicator first (the warm-up): rank 0's capture would
    // otherwise wait, inside ncclAllReduce, for the others to connect, and never reach its launch
    NCCL_CHECK(d, ncclAllReduce(dp->d_sum, dp->d_sum, 1, ncclFloat, ncclSum, dp->grads, s));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (d->rank == 0) {
        CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        NCCL_CHECK(d, ncclAllReduce(dp->d_sum, dp->d_sum, 1, ncclFloat, ncclSum, dp->grads, s));
        CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        stderr_line("%s: --break-rule one-rank: rank 0 launches a graph holding an all-reduce that no other rank "
                    "captured; its NCCL kernel waits for them, until --timeout-s (%g s) stops every rank",
                    t->prog, d->timeout_s);
        CUDA_CHECK(cudaGraphLaunch(exec, s));
    } else {
        // these ranks captured nothing and went on to the next collective, of the parent communicator
        NCCL_CHECK(d, ncclAllReduce(dp->d_losses, dp->d_losses, 1, ncclFloat, ncclSum, d->comm, s));
    }
    CUDA_CHECK(cudaEventRecord(dp->stepped[0], s));
    CUDA_CHECK(dist_event_wait(d, dp->stepped[0]));  // common/dist: ends at --timeout-s, or at rank 0's note
    stderr_line("%s: --break-rule one-rank: the graph's all-reduce completed, which it must not", t->prog);
    if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    return 1;
}

int break_rule(graph_dp *g, trainer *t, broken_rule what)
{
    if (what == BREAK_HOST_WAIT) return show_host_wait(t, g->dp);
    if (what == BREAK_NEW_COMM) return show_new_comm(t, g->dp);
    return show_one_rank(t, g->dp);
}
