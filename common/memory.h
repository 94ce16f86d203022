// memory.h: device and pinned host allocations that are counted, so that every
// lesson can report how much memory its loop uses. Call from the main thread.
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

size_t device_bytes_in_use(void);
size_t pinned_bytes_in_use(void);
size_t device_bytes_peak(void);
size_t pinned_bytes_peak(void);

#ifdef __cplusplus
}
#endif
#endif
