// priority.cu: part 4, what stream priority does. A flood of spin blocks fills
// every SM for many waves; a small probe kernel is queued once the flood runs, on
// a stream of the flood's priority and on a high-priority one, and timed from
// the moment it is queued to its end. Priority lets the probe's block go next
// when an SM frees up; it never stops running blocks, and it does not reorder copies.
#include <stdio.h>   // fprintf
#include <stdlib.h>  // free
#include <time.h>    // nanosleep

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/device.h"   // defines: device_info
#include "common/gpu/kernels.h"  // defines: launch_spin, spin_blocks_per_sm, launch_probe
#include "common/gpu/memory.h"   // defines: host_alloc
#include "common/base/timing.h"  // defines: stats, stats_of, event_ms
#include "overlap.h"             // defines: options, report, report_*

#define SPIN_THREADS 1024
#define FLOOD_BLOCK_NS 20000  // each flood block spins 20 us
#define FLOOD_WAVES 200       // so the flood lasts about 200 x 20 us = 4 ms, long against a host's hiccup
#define QUEUE_AFTER_US 200    // the probe is queued this long after the flood, which then fills every SM

typedef struct {
    cudaStream_t flood;
    int blocks_per_sm, flood_blocks;
    int *d_flag;
    cudaEvent_t flood_start, flood_end;  // on the flood stream, around the flood
    cudaEvent_t queued, done;            // on the probe's stream, around the probe
} flood_probe;

typedef struct {
    double wait_us;  // from the probe's queuing to its end
    int in_flood;    // it was queued after the flood started and before the flood ended
} probe_result;

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

// the probe's events have completed: the caller synchronised the device
static double elapsed_us(cudaEvent_t from, cudaEvent_t to) { return event_ms(from, to) * 1e3; }

static probe_result probe_once(flood_probe *f, cudaStream_t probe)
{
    CUDA_CHECK(cudaEventRecord(f->flood_start, f->flood));
    launch_spin(f->flood_blocks, SPIN_THREADS, FLOOD_BLOCK_NS, f->flood);
    CUDA_CHECK(cudaEventRecord(f->flood_end, f->flood));
    sleep_us(QUEUE_AFTER_US);
    CUDA_CHECK(cudaEventRecord(f->queued, probe));
    launch_probe(f->d_flag, 1, probe);
    CUDA_CHECK(cudaEventRecord(f->done, probe));
    CUDA_CHECK(cudaDeviceSynchronize());
    double queued_at = elapsed_us(f->flood_start, f->queued);
    probe_result p = {.wait_us = elapsed_us(f->queued, f->done),
                      .in_flood = queued_at > 0 && queued_at < elapsed_us(f->flood_start, f->flood_end)};
    return p;
}

static void flood_create(flood_probe *f, const device_info *dev)
{
    f->blocks_per_sm = spin_blocks_per_sm(SPIN_THREADS);  // 2 on sm_80/90, 1 on sm_75/86/89
    f->flood_blocks = dev->sms * f->blocks_per_sm * FLOOD_WAVES;
    CUDA_CHECK(cudaStreamCreateWithPriority(&f->flood, cudaStreamNonBlocking, dev->priority_least));
    CUDA_CHECK(cudaMalloc((void **)&f->d_flag, sizeof(int)));
    cudaEvent_t *events[4] = {&f->flood_start, &f->flood_end, &f->queued, &f->done};
    for (int e = 0; e < 4; e++) CUDA_CHECK(cudaEventCreate(events[e]));
}

static void flood_destroy(flood_probe *f)
{
    cudaEvent_t events[4] = {f->flood_start, f->flood_end, f->queued, f->done};
    for (int e = 0; e < 4; e++) CUDA_CHECK(cudaEventDestroy(events[e]));
    CUDA_CHECK(cudaFree(f->d_flag));
    CUDA_CHECK(cudaStreamDestroy(f->flood));
}

static void print_probe(report *r, const char *what, cudaStream_t s, stats st)
{
    int priority = 0;
    CUDA_CHECK(cudaStreamGetPriority(s, &priority));
    fprintf(r->out, "  %-16s (priority %3d): median %8.1f us   worst %8.1f us\n", what, priority, st.median, st.max);
}

void part4_priority(const device_info *dev, const options *o, report *r)
{
    flood_probe f;
    flood_create(&f, dev);
    cudaStream_t control, high;
    CUDA_CHECK(cudaStreamCreateWithPriority(&control, cudaStreamNonBlocking, dev->priority_least));
    // BEGIN SOLUTION(05-priority): create `high` so that its blocks are scheduled before the
    // flood's: which end of the device's priority range is the highest?
    CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, dev->priority_greatest));
    //| CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, dev->priority_least));
    // END SOLUTION
    int n = o->priority_trials, in_flood = 0, tries = 0, kept = 0;
    double *wait_control = (double *)host_alloc(sizeof(double) * (size_t)n, "part 4's control waits");
    double *wait_high = (double *)host_alloc(sizeof(double) * (size_t)n, "part 4's high-priority waits");
    probe_once(&f, control);  // warm-up
    // a pair counts only when both probes were queued while the flood ran: on a
    // shared machine the host's sleep can overshoot, and then there was nothing to wait behind
    for (; kept < n && tries < 3 * n; tries++) {
        probe_result c = probe_once(&f, control), h = probe_once(&f, high);
        in_flood += c.in_flood + h.in_flood;
        if (!c.in_flood || !h.in_flood) continue;
        wait_control[kept] = c.wait_us;
        wait_high[kept] = h.wait_us;
        kept++;
    }
    stats c = stats_of(wait_control, kept), h = stats_of(wait_high, kept);

    fprintf(r->out,
            "\npart 4: a probe kernel queued %d us into a flood of %d blocks of %d us "
            "(%d per SM at once, %d waves), %d trials\n",
            QUEUE_AFTER_US, f.flood_blocks, FLOOD_BLOCK_NS / 1000, f.blocks_per_sm, FLOOD_WAVES, n);
    print_probe(r, "equal priority", control, c);
    print_probe(r, "high priority", high, h);
    fprintf(r->out, "  the probe was queued while the flood ran in %d of %d launches%s\n", in_flood, 2 * tries,
            in_flood == 2 * tries ? "" : ": pairs with a probe queued too late are left out (a busy host)");
    report_int(r, "priority_blocks_per_sm", f.blocks_per_sm);
    report_int(r, "priority_flood_blocks", f.flood_blocks);
    report_num(r, "priority_control_median_us", c.median);
    report_num(r, "priority_control_worst_us", c.max);
    report_num(r, "priority_high_median_us", h.median);
    report_num(r, "priority_high_worst_us", h.max);
    report_int(r, "priority_probes", 2 * tries);
    report_int(r, "priority_probes_in_flood", in_flood);
    report_int(r, "priority_pairs_kept", kept);
    free(wait_control);
    free(wait_high);
    CUDA_CHECK(cudaStreamDestroy(control));
    CUDA_CHECK(cudaStreamDestroy(high));
    flood_destroy(&f);
}
