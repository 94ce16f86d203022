// options.cu: lesson 05's command line, and the sizes it asks for checked against
// the machine before anything is allocated: a size that cannot fit is bad usage
// (exit code 2, one line naming --size-mib), not a CUDA error halfway through.
#include "common/base/args.h"   // defines: arg_spec, arg_int, arg_double, arg_flag, arg_string, arg_choice, args_parse,
                                //          usage_error
#include "common/gpu/memory.h"  // defines: host_memory_bytes
#include "overlap.h"            // defines: options, delay_point, runs_part, needs_data

#define GIB 1073741824.0

options parse_options(int argc, char **argv)
{
    options o = {.size_mib = 256,
                 .streams = 4,
                 .chunks = 32,
                 .kernel_work = 0,
                 .kernel_ratio = 1.0,
                 .reps = 10,
                 .warmup = 2,
                 .batches = 8,
                 .priority_trials = 50,
                 .only = 0,
                 .delay_us = 0,
                 .delay_on = DELAY_ON_COMPUTE,
                 .json = 0,
                 .timeline = 0,
                 .trace_path = NULL};
    const arg_spec specs[] = {
        arg_int("size-mib", &o.size_mib, 1, 4096, "MIB", "data size, each direction"),
        arg_int("streams", &o.streams, 1, MAX_STREAMS, "N", "streams for the overlapped runs (part 3)"),
        arg_int("chunks", &o.chunks, 1, 4096, "N", "chunks the data is cut into (part 3)"),
        arg_int("kernel-work", &o.kernel_work, 0, 1000000, "N", "FMAs per element; 0 = chosen by --kernel-ratio"),
        arg_double("kernel-ratio", &o.kernel_ratio, 0.01, 100, "X",
                   "with --kernel-work 0: the kernel takes X times one copy"),
        arg_int("reps", &o.reps, 1, 1000, "N", "timed repetitions, round-robin (the median is reported)"),
        arg_int("warmup", &o.warmup, 0, 100, "N", "untimed repetitions first"),
        arg_int("batches", &o.batches, 2, 4096, "K", "batches in the two-stream pipeline (part 5)"),
        arg_int("priority-trials", &o.priority_trials, 1, 10000, "N", "probe launches per stream (part 4)"),
        arg_int("only", &o.only, 0, 5, "PART", "run only this part (0 = all)"),
        arg_int("delay-us", &o.delay_us, 0, 100000, "US",
                "test hook: part 5's checked run spins this long at each --delay-on point, so that a missing "
                "wait shows"),
        arg_choice("delay-on", &o.delay_on, "copy|compute",
                   "where --delay-us holds part 5 back: before every copy-in, or before every kernel"),
        arg_string("trace", &o.trace_path, "FILE", "write a Chrome/Perfetto trace of one run of each part"),
        arg_flag("timeline", &o.timeline, "print the sequential and overlapped runs' timelines"),
        arg_flag("json", &o.json, "print the results as one JSON object on stdout"),
    };
    args_parse(argc, argv, PROG, "Overlap copies and kernels with CUDA streams, and measure it.", specs,
               (int)(sizeof specs / sizeof specs[0]));
    long long elements = (long long)o.size_mib * 1048576 / sizeof(float);
    if (o.chunks > elements) usage_error(PROG, "--chunks %d is more than the %lld elements", o.chunks, elements);
    if (o.batches > elements) usage_error(PROG, "--batches %d is more than the %lld elements", o.batches, elements);
    return o;
}

// Pinned memory cannot be paged out: three buffers of --size-mib (input, reference,
// output), and part 2's two pageable ones, must leave the machine room to run.
void check_host_memory(const options *o)
{
    if (!needs_data(o)) return;
    double bytes = (double)o->size_mib * 1048576;
    double need = 3 * bytes + (runs_part(o, 2) ? 2 * bytes : 0);
    size_t have = host_memory_bytes();
    if (have && need > 0.8 * have)
        usage_error(PROG,
                    "--size-mib %d needs %.2f GiB of host memory (3 pinned buffers%s); the limit is 80%% of "
                    "this machine's %.2f GiB, %.2f GiB",
                    o->size_mib, need / GIB, runs_part(o, 2) ? " and part 2's 2 pageable ones" : "", have / GIB,
                    0.8 * have / GIB);
}

// The input and the output, and part 5's four slots (two in, two out, a batch
// each), with room left for the CUDA context's own allocations.
void check_device_memory(const options *o, const device_info *dev)
{
    if (!needs_data(o)) return;
    double elements = (double)o->size_mib * 1048576 / sizeof(float);
    double need = 2 * elements * sizeof(float);
    if (runs_part(o, 5)) need += 4 * (elements / o->batches + 2) * sizeof(float);
    double reserve = 64 << 20;  // the CUDA context's own allocations
    if (need + reserve > dev->mem_free)
        usage_error(PROG,
                    "--size-mib %d needs %.2f GiB of device memory (input, output%s); the limit is the GPU's "
                    "%.2f GiB free less 64 MiB for CUDA's own use, %.2f GiB",
                    o->size_mib, need / GIB, runs_part(o, 5) ? " and part 5's slots" : "", dev->mem_free / GIB,
                    dev->mem_free > reserve ? (dev->mem_free - reserve) / GIB : 0.0);
}
