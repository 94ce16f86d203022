// STUDENT VERSION of solutions/05_stream_overlap/fma_chain.cu, made by `make lessons` (checksum 2226910119)
// No exercise in this file, read it as it stands; the TODOs are in overlap.cu, pipeline.cu, priority.cu.
// fma_chain.cu: the kernel lesson 05 overlaps with its copies, its launcher, and
// its host twin.
//
// out[i] = f^work(in[i]) with f(x) = fmaf(x, A, B): `work` dependent fused
// multiply-adds per element, so the kernel's time grows linearly with `work` and
// it touches memory only once (a read and a write per element). fmaf is correctly
// rounded on the host and on the device, so fma_chain_host gives the GPU's bits
// exactly: the sequential run is checked against it.
#include <math.h>  // fmaf

#include "common/base/check.h"  // defines: CUDA_CHECK
#include "overlap.h"            // declares: launch_fma_chain, fma_chain_host

#define FMA_CHAIN_A 0.9999f
#define FMA_CHAIN_B 0.0001f

__global__ void fma_chain_kernel(const float *in, float *out, int n, int work)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    for (int k = 0; k < work; k++) x = fmaf(x, FMA_CHAIN_A, FMA_CHAIN_B);
    out[i] = x;
}

void launch_fma_chain(const float *d_in, float *d_out, int n, int work, cudaStream_t stream)
{
    const int threads = 256;
    fma_chain_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(d_in, d_out, n, work);
    CUDA_CHECK(cudaGetLastError());
}

float fma_chain_host(float x, int work)
{
    for (int k = 0; k < work; k++) x = fmaf(x, FMA_CHAIN_A, FMA_CHAIN_B);
    return x;
}
