// Probe (2026-11-23): a one-rank ncclAllReduce of a few counts, Sum and Avg, in place and out of
// place, blocking and non-blocking communicators; counts the output elements that differ from
// the input. Build on a machine with NCCL:
//   nvcc -O2 -o /tmp/probe notes/measurements/2026-11-23-nccl-one-rank-avg.cu -Xlinker /usr/lib/x86_64-linux-gnu/libnccl.so.2
#include <stdio.h>
#include <stdlib.h>
#include <nccl.h>
#include <cuda_runtime.h>
int main(void) {
    size_t counts[] = {8, 9, 15, 16, 17, 150280, 150272, 150281, 1048576, 1048584};
    for (int blocking = 1; blocking >= 0; blocking--) {
        ncclComm_t comm; ncclUniqueId id; ncclGetUniqueId(&id);
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER; cfg.blocking = blocking;
        ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress) ncclCommGetAsyncError(comm, &st);
        printf("blocking=%d init %d %d\n", blocking, r, st);
        cudaStream_t s; cudaStreamCreate(&s);
        for (int op = 0; op < 2; op++) for (int inplace = 0; inplace < 2; inplace++)
        for (unsigned k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            size_t n = counts[k];
            float *h = (float *)malloc(n * 4), *g = (float *)malloc(n * 4);
            for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000) * 0.37f - 3.0f;
            float *a, *b; cudaMalloc(&a, n * 4); cudaMalloc(&b, n * 4);
            cudaMemcpy(a, h, n * 4, cudaMemcpyHostToDevice); cudaMemset(b, 0, n * 4);
            r = ncclAllReduce(a, inplace ? a : b, n, ncclFloat, op ? ncclAvg : ncclSum, comm, s);
            st = r;
            while (st == ncclInProgress) ncclCommGetAsyncError(comm, &st);
            cudaStreamSynchronize(s);
            cudaMemcpy(g, inplace ? a : b, n * 4, cudaMemcpyDeviceToHost);
            size_t bad = 0, first = n;
            for (size_t i = 0; i < n; i++) if (g[i] != h[i]) { bad++; if (first == n) first = i; }
            printf("  %s %s n=%zu: r=%d st=%d, %zu differ (first %zu)\n", op ? "avg" : "sum", inplace ? "in " : "out", n, r, st, bad, first);
            cudaFree(a); cudaFree(b); free(h); free(g);
        }
        ncclCommDestroy(comm);
    }
    return 0;
}
