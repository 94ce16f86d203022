// graphs.h: what a CUDA graph holds, its nodes counted by type (lesson 11 reports it).
#ifndef COMMON_GRAPHS_H
#define COMMON_GRAPHS_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int nodes, kernels, copies, event_records, others;
    int event_waits, hosts, empties;  // of the others: waits on an event, host functions, empty nodes
    int allocs, frees;                // of the others: memory allocated and freed by the graph itself
} graph_census;

// Counts the nodes of `graph`: kernels, copies, event records, the others.
graph_census graph_census_of(cudaGraph_t graph);

#ifdef __cplusplus
}
#endif
#endif
