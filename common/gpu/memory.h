// memory.h: device and pinned allocations, checked and counted, so that every lesson
// can report how much memory its loop uses, and a failed allocation says what it was
// for instead of crashing later. Call from the main thread. The host's own (malloc,
// the machine's memory) are one layer down, in host_memory.h, which this includes.
#ifndef COMMON_MEMORY_H
#define COMMON_MEMORY_H

#include <stddef.h>

#include <cuda_runtime.h>  // cudaStream_t

#include "common/base/host_memory.h"  // host_alloc, host_calloc, host_memory_bytes

#ifdef __cplusplus
extern "C" {
#endif

void *device_alloc(size_t bytes);  // cudaMalloc, checked and counted
void device_free(void *p);
void *pinned_alloc(size_t bytes);  // cudaMallocHost (page-locked), checked and counted
void pinned_free(void *p);

size_t device_bytes_in_use(void);
size_t pinned_bytes_in_use(void);
size_t device_bytes_peak(void);
size_t pinned_bytes_peak(void);
long blocks_in_use(void);  // device and pinned blocks not yet freed

// The rate of a copy of `bytes` from the device to pinned memory on `stream`, timed alone (one
// warm-up, the median of five): GB/s (lesson 05's pinned rate, measured in the run that needs it).
double pinned_copy_gbs(void *h_dst, const void *d_src, size_t bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
