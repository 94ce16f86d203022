// memory.h: allocations that are checked and counted, so that every lesson can
// report how much memory its loop uses, and a failed allocation says what it was
// for instead of crashing later. Device and pinned: call from the main thread.
#ifndef COMMON_MEMORY_H
#define COMMON_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *device_alloc(size_t bytes);  // cudaMalloc, checked and counted
void device_free(void *p);
void *pinned_alloc(size_t bytes);  // cudaMallocHost (page-locked), checked and counted
void pinned_free(void *p);

// malloc / calloc that never return NULL: on failure one line on stderr names
// `what` and the size, and the program exits with code 1.
void *host_alloc(size_t bytes, const char *what);
void *host_calloc(size_t count, size_t size, const char *what);

// The machine's physical memory in bytes (0 when unknown): what sizes chosen on
// the command line are checked against before anything is allocated.
size_t host_memory_bytes(void);

size_t device_bytes_in_use(void);
size_t pinned_bytes_in_use(void);
size_t device_bytes_peak(void);
size_t pinned_bytes_peak(void);
long blocks_in_use(void);  // device and pinned blocks not yet freed

#ifdef __cplusplus
}
#endif
#endif
