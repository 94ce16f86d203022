// kernels.cu: kernels shared by the lessons, with their launchers.
#include "common/gpu/kernels.h"

#include "common/base/check.h"  // CUDA_CHECK

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

int spin_blocks_per_sm(int threads)
{
    int blocks = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, spin_kernel, threads, 0));
    return blocks;
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
