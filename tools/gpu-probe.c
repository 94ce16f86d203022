// gpu-probe: how many GPUs this process may use, counted by the CUDA runtime; when there is
// none, the one reason why. The tests, tools/bench and tools/timelines ask it, not nvidia-smi.
//
//   build/tools/gpu-probe            "gpus=N", and "why=..." when N is 0
//   build/tools/gpu-probe --count    N alone (0 when there is none)
//
// Exit codes: 0 at least one GPU (or --count), 2 bad usage, 3 no usable GPU.
#include <stdio.h>
#include <string.h>

#include "common/base/exit_codes.h"  // defines: EXIT_USAGE, EXIT_NO_GPU
#include "common/base/gpus.h"        // defines: gpu_count

int main(int argc, char **argv)
{
    int count_only = 0;
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--count") == 0) {
            count_only = 1;
        } else if (strcmp(argv[k], "-h") == 0 || strcmp(argv[k], "--help") == 0) {
            printf("usage: gpu-probe [--count]\n"
                   "  the GPUs this process may use (cudaGetDeviceCount): gpus=N, and why=... when N is 0\n"
                   "  --count  print N alone, and exit 0 even when it is 0\n"
                   "exit codes: 0 at least one GPU, 2 bad usage, 3 no usable GPU\n");
            return 0;
        } else {
            fprintf(stderr, "gpu-probe: unknown option '%s' (try --help)\n", argv[k]);
            return EXIT_USAGE;
        }
    }
    char why[256];
    int n = gpu_count(why, sizeof why);
    if (count_only) {
        printf("%d\n", n);
        return 0;
    }
    printf("gpus=%d\n", n);
    if (n == 0) printf("why=%s\n", why);
    return n > 0 ? 0 : EXIT_NO_GPU;
}
