// memory.c: counted allocations (a small table remembers each block's size).
#include "memory.h"

#include <stdio.h>

#include "check.h"

#define MAX_BLOCKS 1024

typedef struct {
    void *p;
    size_t bytes;
    int pinned;
} block;

static block blocks[MAX_BLOCKS];
static size_t in_use[2], peak[2];  // [0] device, [1] pinned

static void remember(void *p, size_t bytes, int pinned)
{
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (!blocks[i].p) {
            blocks[i] = (block){p, bytes, pinned};
            in_use[pinned] += bytes;
            if (in_use[pinned] > peak[pinned]) peak[pinned] = in_use[pinned];
            return;
        }
    fprintf(stderr, "memory.c: more than %d blocks allocated\n", MAX_BLOCKS);
    exit(EXIT_FAILURE);
}

static void forget(void *p)
{
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p == p) {
            in_use[blocks[i].pinned] -= blocks[i].bytes;
            blocks[i].p = NULL;
            return;
        }
}

void *device_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    remember(p, bytes, 0);
    return p;
}

void device_free(void *p)
{
    if (!p) return;
    forget(p);
    CUDA_CHECK(cudaFree(p));
}

void *pinned_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    remember(p, bytes, 1);
    return p;
}

void pinned_free(void *p)
{
    if (!p) return;
    forget(p);
    CUDA_CHECK(cudaFreeHost(p));
}

size_t device_bytes_in_use(void) { return in_use[0]; }
size_t pinned_bytes_in_use(void) { return in_use[1]; }
size_t device_bytes_peak(void) { return peak[0]; }
size_t pinned_bytes_peak(void) { return peak[1]; }
