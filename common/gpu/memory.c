// memory.c: counted device and pinned allocations (a table, grown as needed,
// remembers each block's size). The host-only part is in host_memory.c.
#include "common/gpu/memory.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/base/check.h"
#include "common/base/timing.h"  // time_gpu_work

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

typedef struct {
    void *p;
    size_t bytes;
    int pinned;
} block;

static block *blocks;
static long nblocks, capacity;
static size_t in_use[2], peak[2];  // [0] device, [1] pinned

static void remember(void *p, size_t bytes, int pinned)
{
    if (nblocks == capacity) {
        capacity = capacity ? 2 * capacity : 256;
        block *grown = (block *)realloc(blocks, sizeof(block) * (size_t)capacity);
        if (!grown) {
            stderr_line("out of host memory: the table of allocations");
            exit(EXIT_FAILURE);
        }
        blocks = grown;
    }
    blocks[nblocks++] = (block){p, bytes, pinned};
    in_use[pinned] += bytes;
    if (in_use[pinned] > peak[pinned]) peak[pinned] = in_use[pinned];
}

static void forget(void *p)
{
    for (long i = nblocks - 1; i >= 0; i--)
        if (blocks[i].p == p) {
            in_use[blocks[i].pinned] -= blocks[i].bytes;
            blocks[i] = blocks[--nblocks];
            break;
        }
    if (nblocks == 0) {  // everything freed: so is the table (no leak to report)
        free(blocks);
        blocks = NULL;
        capacity = 0;
    }
}

// One place allocates, checks and counts, for both kinds: cudaMalloc, or pinned,
// cudaMallocHost; and one place forgets and frees.
static void *counted_alloc(size_t bytes, int pinned)
{
    void *p = NULL;
    if (pinned)
        CUDA_CHECK(cudaMallocHost(&p, bytes));
    else
        CUDA_CHECK(cudaMalloc(&p, bytes));
    remember(p, bytes, pinned);
    return p;
}

static void counted_free(void *p, int pinned)
{
    if (!p) return;
    forget(p);
    if (pinned)
        CUDA_CHECK(cudaFreeHost(p));
    else
        CUDA_CHECK(cudaFree(p));
}

void *device_alloc(size_t bytes) { return counted_alloc(bytes, 0); }
void device_free(void *p) { counted_free(p, 0); }
void *pinned_alloc(size_t bytes) { return counted_alloc(bytes, 1); }
void pinned_free(void *p) { counted_free(p, 1); }

size_t device_bytes_in_use(void) { return in_use[0]; }
size_t pinned_bytes_in_use(void) { return in_use[1]; }
size_t device_bytes_peak(void) { return peak[0]; }
size_t pinned_bytes_peak(void) { return peak[1]; }
long blocks_in_use(void) { return nblocks; }

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaStream_t stream;
} pinned_copy;

static void copy_once(void *ctx)
{
    pinned_copy *c = (pinned_copy *)ctx;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToHost, c->stream));
}

double pinned_copy_gbs(void *h_dst, const void *d_src, size_t bytes, cudaStream_t stream)
{
    pinned_copy c = {h_dst, d_src, bytes, stream};
    stats alone = time_gpu_work(copy_once, &c, &c.stream, 1, 1, 5);
    return alone.median > 0 ? bytes / (alone.median * 1e6) : 0;
}
