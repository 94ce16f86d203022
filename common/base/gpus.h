// gpus.h: the GPUs this process may use, counted by the CUDA runtime (cudaGetDeviceCount),
// never by reading nvidia-smi's text. Plain C: the tools use it too (tools/gpu-probe).
#ifndef COMMON_GPUS_H
#define COMMON_GPUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The number of GPUs this process may use. When it is 0, `why` (if not NULL) says why, in
// one clause that names the real cause: no driver at all, a driver older than this build's
// CUDA runtime, a driver that sees no GPU (CUDA_VISIBLE_DEVICES named when it is set), or
// the runtime's own error.
int gpu_count(char *why, size_t size);

#ifdef __cplusplus
}
#endif
#endif
