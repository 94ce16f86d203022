// gpus.c: how many GPUs this process may use, and, when none, the one true reason (gpus.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/gpus.h"

#include <dlfcn.h>  // dlopen: is there a driver at all?
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

// "13.0" from 13000
static void version_text(int v, char *out, size_t size) { snprintf(out, size, "%d.%d", v / 1000, v % 1000 / 10); }

// Without a driver the runtime answers "CUDA driver version is insufficient", as it would for
// an old one: look for the driver's library first, so that the two are told apart.
static int driver_present(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return 0;
    dlclose(lib);
    return 1;
}

int gpu_count(char *why, size_t size)
{
    if (why && size) why[0] = '\0';
    if (!driver_present()) {
        if (why) snprintf(why, size, "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)");
        return 0;
    }
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count > 0) return count;
    if (!why) return 0;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (err == cudaErrorInsufficientDriver) {
        int driver = 0, runtime = 0;
        char d[16] = "?", r[16] = "?";
        if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) version_text(driver, d, sizeof d);
        if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) version_text(runtime, r, sizeof r);
        snprintf(why, size,
                 "the NVIDIA driver supports CUDA %s, older than this build's runtime (CUDA %s): update the driver", d,
                 r);
    } else if (err == cudaSuccess || err == cudaErrorNoDevice) {
        if (visible)
            snprintf(why, size, "the NVIDIA driver sees no GPU that CUDA_VISIBLE_DEVICES='%s' lets this process use",
                     visible);
        else
            snprintf(why, size, "the NVIDIA driver is installed but sees no GPU");
    } else {
        snprintf(why, size, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorName(err), cudaGetErrorString(err));
    }
    return 0;
}
