// host_memory.c: checked host allocations and the machine's memory (no CUDA here:
// host-only tools link it too).
#define _DEFAULT_SOURCE  // sysconf(_SC_PHYS_PAGES)
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/base/host_memory.h"

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

void *host_alloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        stderr_line("out of host memory: %s needs %.3f GiB", what, bytes / 1073741824.0);
        exit(EXIT_FAILURE);
    }
    return p;
}

void *host_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        stderr_line("out of host memory: %s needs %.3f GiB", what, (double)count * size / 1073741824.0);
        exit(EXIT_FAILURE);
    }
    return p;
}

size_t host_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (size_t)pages * (size_t)size : 0;
}
