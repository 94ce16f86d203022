// dist_connect.c: the meeting of the ranks (begun, ended: which GPU each rank runs on), and
// dist_connect, the whole of it for the lessons after 12; the buffers of the all-gathers the
// checks use after the runs, and dist_allgather, the whole of one (dist.h).
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>  // gethostname

#include "common/base/check.h"  // CUDA_CHECK
#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"
#include "common/gpu/memory.h"  // device_alloc, pinned_alloc, host_calloc and their frees

// Where a rank runs: its machine (a hash of its host name) and its GPU (the UUID).
typedef struct {
    uint64_t host;
    unsigned char uuid[16];
} rank_place;

// Every rank says where it runs; d->gpus counts the distinct GPUs. Fewer GPUs than ranks means
// simulated nodes (tools/launch --simulate-nodes): ranks that share a GPU and talk through
// NCCL's network transport over loopback, whose timings are not the performance of GPUs.
static void survey(dist_env *d)
{
    rank_place mine;
    memset(&mine, 0, sizeof mine);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    mine.host = 1469598103934665603ULL;
    for (const char *c = host; *c; c++) mine.host = (mine.host ^ (unsigned char)*c) * 1099511628211ULL;
    int dev = 0;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
    rank_place *all = (rank_place *)host_calloc((size_t)d->world, sizeof(rank_place), "where every rank runs");
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    dist_allgather(d, &mine, all, sizeof mine, s);
    CUDA_CHECK(cudaStreamDestroy(s));
    d->gpus = 0;
    for (int r = 0; r < d->world; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = memcmp(&all[q], &all[r], sizeof all[r]) == 0;
        d->gpus += !seen;
    }
    d->simulated = d->world > 1 && (d->gpus < d->world || d->simulate_asked);
    free(all);
}

void dist_meet_begin(dist_env *d)
{
    d->connecting = 1;
    if (d->world > 1) dist_watchdog_start(d);
}

void dist_connected(dist_env *d, ncclComm_t comm)
{
    d->comm = comm;
    if (d->rank == 0 && d->world > 1) dist_remove_id(d);  // every rank has read it: the communicator exists
    d->gpus = 1;
    if (d->world > 1) survey(d);
}

// Lesson 12's meet_ranks (its meet.cu shows and explains every step), for the lessons after it.
void dist_connect(dist_env *d)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    dist_meet_begin(d);
    if (d->rank == 0) {
        NCCL_CHECK(d, ncclGetUniqueId(&id));
        dist_write_id(d, &id);
    } else {
        dist_read_id(d, &id);
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    dist_enter_(d, "ncclCommInitRankConfig");
    ncclResult_t r = ncclCommInitRankConfig(&comm, d->world, id, d->rank, &config);
    dist_watch(d, comm, "the parent communicator");
    dist_check_nccl_(d, r, "ncclCommInitRankConfig(&comm, d->world, id, d->rank, &config)", __FILE__, __LINE__);
    dist_connected(d, comm);
}

void dist_gather_begin(dist_env *d, dist_gather *g, const void *mine, size_t bytes, cudaStream_t stream)
{
    g->bytes = bytes;
    size_t total = bytes * (size_t)d->world;
    g->d_all = (unsigned char *)device_alloc(total);
    g->h_all = (unsigned char *)pinned_alloc(total);
    g->d_mine = g->d_all + bytes * (size_t)d->rank;  // in place: this rank's part where the gathered array puts it
    CUDA_CHECK(cudaEventCreateWithFlags(&g->landed, cudaEventDisableTiming));
    memcpy(g->h_all + bytes * (size_t)d->rank, mine, bytes);
    CUDA_CHECK(cudaMemcpyAsync(g->d_mine, g->h_all + bytes * (size_t)d->rank, bytes, cudaMemcpyHostToDevice, stream));
}

void dist_gather_end(dist_env *d, dist_gather *g, void *all, cudaStream_t stream)
{
    size_t total = g->bytes * (size_t)d->world;
    CUDA_CHECK(cudaMemcpyAsync(g->h_all, g->d_all, total, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(g->landed, stream));
    CUDA_CHECK(dist_event_wait(d, g->landed));
    memcpy(all, g->h_all, total);
    CUDA_CHECK(cudaEventDestroy(g->landed));
    device_free(g->d_all);
    pinned_free(g->h_all);
}

void dist_allgather(dist_env *d, const void *mine, void *all, size_t bytes, cudaStream_t stream)
{
    dist_gather g;
    dist_gather_begin(d, &g, mine, bytes, stream);
    NCCL_CHECK(d, ncclAllGather(g.d_mine, g.d_all, bytes, ncclUint8, d->comm, stream));
    dist_gather_end(d, &g, all, stream);
}
