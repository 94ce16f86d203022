// device.cu: opening the GPU and reading its attributes.
//
// CUDA 13 removed several cudaDeviceProp fields (deviceOverlap, clockRate, ...):
// the course reads attributes one by one with cudaDeviceGetAttribute.
#include "common/gpu/device.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/check.h"
#include "common/base/gpus.h"  // defines: gpu_count (the count, or the reason there is none)

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

// An empty kernel: launching it proves that this build has code for the GPU.
__global__ void probe_build_kernel(void) {}

static void no_gpu(const char *prog, const char *why, cudaError_t err)
{
    stderr_line("%s: no usable GPU: %s (%s)", prog, why, cudaGetErrorString(err));
    exit(EXIT_NO_GPU);
}

void gpu_open(const char *prog, device_info *info)
{
    char why[256];
    if (gpu_count(why, sizeof why) == 0) {
        stderr_line("%s: no usable GPU: %s", prog, why);
        exit(EXIT_NO_GPU);
    }
    // the device the program chose with cudaSetDevice before this call (lesson 12: its
    // rank's, LOCAL_RANK), else device 0
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) no_gpu(prog, "cudaGetDevice failed", err);
    err = cudaSetDevice(dev);
    if (err != cudaSuccess) no_gpu(prog, "cudaSetDevice failed", err);

    probe_build_kernel<<<1, 1>>>();
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) no_gpu(prog, "cannot run a kernel (rebuild with ARCH= for this GPU?)", err);

    memset(info, 0, sizeof *info);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(info->name, sizeof info->name, "%s", prop.name);
    info->mig = strstr(prop.name, "MIG") != NULL;
    CUDA_CHECK(cudaDeviceGetAttribute(&info->cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&info->cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&info->sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&info->copy_engines, cudaDevAttrAsyncEngineCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&info->concurrent_kernels, cudaDevAttrConcurrentKernels, dev));
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&info->priority_least, &info->priority_greatest));
    CUDA_CHECK(cudaDriverGetVersion(&info->driver_version));
    CUDA_CHECK(cudaRuntimeGetVersion(&info->runtime_version));
    CUDA_CHECK(cudaMemGetInfo(&info->mem_free, &info->mem_total));
}

void device_report(FILE *out, const device_info *d)
{
    fprintf(out, "device: %s (compute capability %d.%d, %d SMs, %.1f GiB)\n", d->name, d->cc_major, d->cc_minor, d->sms,
            d->mem_total / 1073741824.0);
    fprintf(out, "  copy engines: %d (%s)\n", d->copy_engines,
            d->copy_engines >= 2   ? "host-to-device and device-to-host copies can run at once"
            : d->copy_engines == 1 ? "copies in the two directions take turns"
                                   : "no copy/kernel overlap");
    fprintf(out, "  concurrent kernels: %s\n", d->concurrent_kernels ? "yes" : "no");
    fprintf(out, "  stream priorities: %d (lowest) to %d (highest)\n", d->priority_least, d->priority_greatest);
    fprintf(out, "  driver %d.%d, runtime %d.%d\n", d->driver_version / 1000, (d->driver_version % 1000) / 10,
            d->runtime_version / 1000, (d->runtime_version % 1000) / 10);
}
