// device.h: finding the GPU, and what the course reports about it.
#ifndef COMMON_DEVICE_H
#define COMMON_DEVICE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[256];
    int cc_major, cc_minor;
    int sms;
    int copy_engines;        // cudaDevAttrAsyncEngineCount: 2 = copies in both directions at once
    int concurrent_kernels;  // cudaDevAttrConcurrentKernels
    int priority_least;      // cudaDeviceGetStreamPriorityRange: numerically largest, lowest priority
    int priority_greatest;   // numerically smallest, highest priority
    int mig;                 // a MIG instance (its name says so): a slice of a GPU, shared with others
    int driver_version;      // e.g. 13000 for 13.0
    int runtime_version;
    size_t mem_total, mem_free;
} device_info;

// Opens the GPU the program selected (cudaSetDevice before this call: lesson 12's
// ranks each take their own; device 0 otherwise) and fills `info`. When there is no usable GPU (no driver, no
// device, or this build has no code for the device) prints
// "prog: no usable GPU: <why>" on stderr and exits with EXIT_NO_GPU.
void gpu_open(const char *prog, device_info *info);

// The device report every program prints first.
void device_report(FILE *out, const device_info *info);

#ifdef __cplusplus
}
#endif
#endif
