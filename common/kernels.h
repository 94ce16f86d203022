// kernels.h: the kernels lessons share, each with a launcher and (where it
// computes something) a host reference that gives the same bits.
#ifndef COMMON_KERNELS_H
#define COMMON_KERNELS_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

// out[i] = f^work(in[i]) with f(x) = fmaf(x, FMA_CHAIN_A, FMA_CHAIN_B): `work`
// dependent fused multiply-adds per element, so its time grows linearly with
// `work` and it touches memory only once. fmaf is correctly rounded on the host
// and the device, so fma_chain_host gives the GPU's bits exactly.
#define FMA_CHAIN_A 0.9999f
#define FMA_CHAIN_B 0.0001f
void launch_fma_chain(const float *d_in, float *d_out, int n, int work, cudaStream_t stream);
float fma_chain_host(float x, int work);

// One block of `threads` threads per launch block, each thread busy for `ns`
// nanoseconds (read from the GPU's global timer), doing nothing else.
void launch_spin(int blocks, int threads, long long ns, cudaStream_t stream);

// The smallest useful kernel: one warp that writes *flag = value.
void launch_probe(int *d_flag, int value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
