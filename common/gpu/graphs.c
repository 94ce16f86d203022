// graphs.c: a CUDA graph's nodes counted by type (graphs.h).
#include <stdlib.h>

#include "common/base/check.h"  // CUDA_CHECK
#include "common/gpu/graphs.h"
#include "common/gpu/memory.h"  // host_calloc

graph_census graph_census_of(cudaGraph_t graph)
{
    graph_census c = {0};
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &n));
    if (n == 0) return c;  // an empty graph (a capture that recorded nothing): no array to fill
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)host_calloc(n, sizeof(cudaGraphNode_t), "the graph's nodes");
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes, &n));
    for (size_t j = 0; j < n; j++) {
        enum cudaGraphNodeType type;  // C spells the runtime's enums with their keyword
        CUDA_CHECK(cudaGraphNodeGetType(nodes[j], &type));
        if (type == cudaGraphNodeTypeKernel)
            c.kernels++;
        else if (type == cudaGraphNodeTypeMemcpy)
            c.copies++;
        else if (type == cudaGraphNodeTypeEventRecord)
            c.event_records++;
        else
            c.others++;
        if (type == cudaGraphNodeTypeWaitEvent) c.event_waits++;
        if (type == cudaGraphNodeTypeHost) c.hosts++;
        if (type == cudaGraphNodeTypeEmpty) c.empties++;
        if (type == cudaGraphNodeTypeMemAlloc) c.allocs++;
        if (type == cudaGraphNodeTypeMemFree) c.frees++;
    }
    c.nodes = (int)n;
    free(nodes);
    return c;
}
