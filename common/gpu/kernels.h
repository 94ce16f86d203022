// kernels.h: the kernels lessons share, each with a launcher. (Lesson 05's
// fma_chain_kernel, the work it overlaps, is in the lesson itself.)
#ifndef COMMON_KERNELS_H
#define COMMON_KERNELS_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// `blocks` blocks of `threads` threads, each thread busy for `ns` nanoseconds
// (read from the GPU's global timer), doing nothing else. Lessons 06+ use one
// small block as a test delay; lesson 05 floods the GPU with many.
void launch_spin(int blocks, int threads, long long ns, cudaStream_t stream);

// How many spin blocks of `threads` threads one SM holds at once (the occupancy
// calculator's answer for this GPU): a flood of sms x this many blocks is one wave.
int spin_blocks_per_sm(int threads);

// The smallest useful kernel: one warp that writes *flag = value.
void launch_probe(int *d_flag, int value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
