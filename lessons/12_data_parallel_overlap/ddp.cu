// STUDENT VERSION of solutions/12_data_parallel_overlap/ddp.cu, made by `make lessons` (checksum 245492196)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// ddp.cu: lesson 12's library (ddp.h), the step's machinery: the state, the shard, the losses
// averaged at the end. The step itself is in train.cu, where the student sees it call the
// exercises (buckets.cu); the plan and the checksums are in ddp_plan.cu.
#include "ddp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/check.h"   // defines: CUDA_CHECK
#include "common/gpu/memory.h"   // defines: device_alloc, pinned_alloc, device_free, pinned_free
#include "common/base/timing.h"  // defines: host_now_ms
#include "common/trace/trace.h"  // defines: trace_begin, trace_end, trace_name_stream

#include "common/base/stderr_line.h"  // defines: stderr_line

// The plan, checked: every other part of the step trusts it.
static void check_plan(const trainer *t, const ddp_state *dp)
{
    char why[256];
    if (ddp_plan_is_sound(&t->model.shape, &dp->plan, why, sizeof why)) return;
    stderr_line("%s: the bucket plan is wrong: %s", dp->dist->name, why);
    exit(EXIT_FAILURE);
}

static void create_events(ddp_state *dp)
{
    for (int s = 0; s < DDP_SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&dp->copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&dp->stepped[s], cudaEventDisableTiming));
    }
    for (int b = 0; b < DDP_MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&dp->grads_ready[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&dp->reduced[b], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&dp->losses_averaged, cudaEventDisableTiming));
}

void ddp_setup(trainer *t, ddp_state *dp, event_wait_fn wait)
{
    check_plan(t, dp);
    CUDA_CHECK(cudaStreamCreateWithPriority(&dp->comm_stream, cudaStreamNonBlocking, t->dev.priority_greatest));
    trace_name_stream(dp->comm_stream, "comm");
    size_t nparams = t->model.shape.nparams, batches = (size_t)t->opt.batches;
    dp->d_sum = (float *)device_alloc(sizeof(float) * nparams);
    CUDA_CHECK(cudaMemset(dp->d_sum, 0, sizeof(float) * nparams));
    // The update applies the mean gradient: lr x (sum / ranks) = (lr / ranks) x sum, the
    // division folded into the rate. With one rank, lr / 1 is lr: lesson 06's update, bit
    // for bit. (ncclAvg would divide in NCCL; NCCL 2.28.3 on one rank, out of place, left
    // the last count % 16 elements of a large average unwritten: notes/12, measured.)
    dp->averaged = t->model;  // a copy that shares every buffer, but for its gradients and rate
    dp->averaged.d_grads = dp->d_sum;
    dp->averaged.lr = t->model.lr / (float)dp->dist->world;
    dp->h_losses = (float *)pinned_alloc(sizeof(float) * batches);
    dp->d_losses = (float *)device_alloc(sizeof(float) * batches);
    CUDA_CHECK(cudaMemset(dp->d_losses, 0, sizeof(float) * batches));  // 12's line_up sums its first float
    create_events(dp);
    dp->wait = wait;
    loss_ring_create(&dp->losses, t, 0);
    loss_ring_wait_with(&dp->losses, wait, dp->dist);  // a rank that failed stops this one's waits too
    CUDA_CHECK(cudaDeviceSynchronize());
}

void ddp_teardown(ddp_state *dp)
{
    for (int s = 0; s < DDP_SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(dp->copied[s]));
        CUDA_CHECK(cudaEventDestroy(dp->stepped[s]));
    }
    for (int b = 0; b < DDP_MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventDestroy(dp->grads_ready[b]));
        CUDA_CHECK(cudaEventDestroy(dp->reduced[b]));
    }
    CUDA_CHECK(cudaEventDestroy(dp->losses_averaged));
    loss_ring_destroy(&dp->losses);
    device_free(dp->d_sum);
    device_free(dp->d_losses);
    pinned_free(dp->h_losses);
    CUDA_CHECK(cudaStreamDestroy(dp->comm_stream));
}

void ddp_prepare_shard(trainer *t, const ddp_state *dp, long i, float *h_batch)
{
    int shard = t->opt.batch;  // the trainer was built for one shard
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, dp->dist->rank * shard, shard, h_batch);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;  // only the main thread prepares here: no lock needed
    t->run.main_prep_ms += ms;
}

// ----------------------------------------------------------------------------
// the losses

void ddp_average_losses(trainer *t, ddp_state *dp)
{
    size_t n = (size_t)t->opt.batches;
    dist_env *d = dp->dist;
    cudaStream_t c = dp->comm_stream;
    for (size_t i = 0; i < n; i++) dp->h_losses[i] = (float)t->run.losses[i];
    CUDA_CHECK(cudaMemcpyAsync(dp->d_losses, dp->h_losses, sizeof(float) * n, cudaMemcpyHostToDevice, c));
    // one all-reduce of the whole run's losses, not one per batch: a collective costs tens of
    // microseconds, and the losses are read every 10 batches anyway
    NCCL_CHECK(d, ncclAllReduce(dp->d_losses, dp->d_losses, n, ncclFloat, ncclSum, d->comm, c));
    if (dp->hooks.issued) dp->hooks.issued(dp, t->opt.batches, n, c);
    CUDA_CHECK(cudaMemcpyAsync(dp->h_losses, dp->d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost, c));
    CUDA_CHECK(cudaEventRecord(dp->losses_averaged, c));
    HOST_SYNC(t, dp->wait(dp->dist, dp->losses_averaged));
    for (size_t i = 0; i < n; i++) t->run.losses[i] = dp->h_losses[i] / (float)d->world;
}
