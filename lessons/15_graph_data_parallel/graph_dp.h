// STUDENT VERSION of solutions/15_graph_data_parallel/graph_dp.h, made by `make lessons` (checksum 4074585371)
// No exercise in this file, read it as it stands; the TODOs are in graphs.cu.
// graph_dp.h: lesson 15's types, and what its files call in one another (the overview
// is in main.cu). graphs.cu: the warm-up, and the exercises (the capture around the all-reduces,
// the loss's event inside it, the replay); broken_rules.cu: the rules of capturing NCCL, each
// broken on purpose; main.cu: setup, options, the report, main.
// Everything else is lesson 12's library, built from its solution (the Makefile's STANDS_ON): the
// step's options and setup, how the ranks meet and stop, the buckets and their all-reduces, its
// loop and reference, its checks.
#ifndef GRAPH_DP_H
#define GRAPH_DP_H

#include "common/base/args.h"      // defines: arg_choice, arg_flag, args_parse, usage_error
#include "common/base/check.h"     // defines: CUDA_CHECK
#include "common/dist/dist.h"      // defines: dist_init, dist_connect, dist_event_wait, NCCL_CHECK,
                                   //          dist_fault_inject, dist_describe, dist_describe_json, dist_abort,
                                   //          dist_wait_issued, DIST_HOW_TO_RUN
#include "common/gpu/graphs.h"     // defines: graph_census, graph_census_of
#include "common/train/harness.h"  // defines: harness_run_with, harness_finish, rank_outputs
#include "common/base/json.h"      // defines: json_int, json_num, json_str, json_bool
#include "common/gpu/memory.h"     // defines: host_calloc
#include "common/base/timing.h"    // defines: host_now_ms
#include "common/trace/trace.h"    // defines: trace_begin, trace_end
#include "common/train/trainer.h"  // defines: train_options_default, train_option_specs, trainer_forward,
                                   //          trainer_loss_slot, mlp_model_use_workspace

#include "common/base/stderr_line.h"  // defines: stderr_line
// lesson 12's library, its one face: its step (ddp_step, ddp_average_losses, ddp_plan_text), its loop
// and reference (the eager variant), its options, a rank's bring-up and end, its checks, and lesson
// 08's loss ring (loss_ring_interval)
#include "12_data_parallel_overlap/ddp.h"  // defines: ddp_state, ddp_options, ddp_init, ddp_shard_of,
                                           //          ddp_rank_open, ddp_rank_close, ddp_step_setup,
                                           //          ddp_open_gradient_comm, ddp_train_loop, ddp_reference_loop,
                                           //          ddp_ranks_agree, ddp_cpu_check_whole_batch, ddp_copy_batch,
                                           //          DDP_SLOTS, DDP_SHARD, DDP_LOSS_RING, DDP_SYNC_INTERVAL

// The loss ring's slots: one graph each, and a multiple of the batch slots (lesson 11's rule), so
// that ring position k always means device slot k % DDP_SLOTS and loss slot k.
#define GRAPH_RING ((DDP_LOSS_RING + DDP_SLOTS - 1) / DDP_SLOTS * DDP_SLOTS)

typedef struct {
    ddp_state *dp;                     // lesson 12's step (its ddp.h): what every graph holds
    cudaGraph_t graph[GRAPH_RING];     // graph[k]: the step of ring position k, as captured
    cudaGraphExec_t exec[GRAPH_RING];  // exec[k]: graph[k] instantiated, what cudaGraphLaunch runs
    int library_workspace;             // --capture-workspace library: cuBLAS's own pool inside the capture
    int upload;                        // each graph uploaded after its instantiation (0: --no-upload)
    long launches;                     // cudaGraphLaunch calls in the last graph run
    double warm_up_ms;                 // the eager step before the capture
    double capture_ms;                 // capturing and instantiating every graph
    graph_census census;               // what graph[0] holds
    int census_alike;                  // every graph holds what graph[0] holds, node type by node type
    int loss_records;                  // graphs whose loss event is a node the host can wait on (15-loss-event)
} graph_dp;

// --break-rule: which rule of capturing NCCL to break, to show what CUDA or NCCL answers.
typedef enum { BREAK_NONE, BREAK_HOST_WAIT, BREAK_NEW_COMM, BREAK_ONE_RANK } broken_rule;

// graphs.cu
void warm_up(graph_dp *g, trainer *t);
void capture_graphs(graph_dp *g, trainer *t);
void instantiate_prioritized(const graph_dp *g, graph_dp *prioritized, trainer *t);
int graph_loop(trainer *t, void *ctx);
void destroy_graphs(graph_dp *g);

// broken_rules.cu
int break_rule(graph_dp *g, trainer *t, broken_rule what);

#endif
