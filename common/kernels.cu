// kernels.cu: kernels shared by the lessons, with their launchers.
#include "kernels.h"

#include <math.h>

#include "check.h"

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

__device__ static long long global_timer_ns(void)
{
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin_kernel(long long ns)
{
    long long start = global_timer_ns();
    while (global_timer_ns() - start < ns) {
    }
}

void launch_spin(int blocks, int threads, long long ns, cudaStream_t stream)
{
    spin_kernel<<<blocks, threads, 0, stream>>>(ns);
    CUDA_CHECK(cudaGetLastError());
}

__global__ void probe_kernel(int *flag, int value)
{
    if (threadIdx.x == 0) *flag = value;
}

void launch_probe(int *d_flag, int value, cudaStream_t stream)
{
    probe_kernel<<<1, 32, 0, stream>>>(d_flag, value);
    CUDA_CHECK(cudaGetLastError());
}
