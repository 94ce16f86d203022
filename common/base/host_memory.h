// host_memory.h: host allocations that never return NULL, and the machine's memory. No CUDA:
// the host-only tools link it too (host_memory.c). The device's and pinned memory are a layer
// up, in memory.h.
#ifndef COMMON_HOST_MEMORY_H
#define COMMON_HOST_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// malloc / calloc that never return NULL: on failure one line on stderr names
// `what` and the size, and the program exits with code 1.
void *host_alloc(size_t bytes, const char *what);
void *host_calloc(size_t count, size_t size, const char *what);

// The machine's physical memory in bytes (0 when unknown): what sizes chosen on
// the command line are checked against before anything is allocated.
size_t host_memory_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
