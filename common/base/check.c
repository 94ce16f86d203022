// check.c: the one place that reports a failed CUDA/cuBLAS/CUPTI call.
#include "common/base/check.h"

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

#include <stdio.h>

void check_fail(const char *expr, const char *file, int line, const char *name, const char *text)
{
    stderr_line("%s:%d: %s failed: %s (%s)", file, line, expr, name, text);
    exit(EXIT_FAILURE);
}

void check_message(char *buf, size_t size, const char *expr, const char *file, int line, cudaError_t err)
{
    snprintf(buf, size, "%s:%d: %s failed: %s (%s)", file, line, expr, cudaGetErrorName(err), cudaGetErrorString(err));
}
