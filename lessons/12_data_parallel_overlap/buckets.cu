// STUDENT VERSION of solutions/12_data_parallel_overlap/buckets.cu, made by `make lessons` (checksum 2368716023)
// Fill in its 4 TODOs.
// buckets.cu (lesson 12): the gradients grouped into buckets in the order the backward pass
// finishes them (exercise 12-bucket-plan); each bucket's all-reduce issued on the communication
// stream as soon as its gradients are written (12-ready, 12-allreduce), and waited for before
// its update (12-update-wait). The step (train.cu, ddp_step) calls the last two as its hooks;
// the lessons after this one link this file as it is (the course's own solution, never a student's).
#include <string.h>

#include "ddp.h"  // these exercises' declarations, the step's state (ddp_state, ddp_bucket_plan), NCCL_CHECK

// ----------------------------------------------------------------------------
// the buckets

// Groups the layers into buckets in the order the backward pass finishes them, the
// last layer first. A bucket closes once it holds at least `bytes` of gradients (the
// first layer's may hold less). Layer l's parameters are W_l then b_l, and the layers
// lie in increasing order in d_grads (mlp_shape_init), so a bucket of layers
// first..last is one range: from W_first to the end of b_last.
void ddp_plan_buckets(const mlp_shape *s, size_t bytes, ddp_bucket_plan *p)
{
    memset(p, 0, sizeof *p);
    // TODO(12-bucket-plan): walk down from the last layer; a bucket closes at the layer
    // where its range of parameters (from that layer's W to its top layer's b: s->w_off, s->b_off,
    // s->dims) reaches `bytes`, or at layer 1; fill first_layer, last_layer, first, floats, count
    (void)s, (void)bytes;
}

// ----------------------------------------------------------------------------
// each bucket's all-reduce

// Sums floats [first, first + floats) of the gradients over the ranks into the same range of
// dp->d_sum, on `stream`. Every path that all-reduces gradients calls it: the step (one bucket),
// the reference, and the parts timed alone (every bucket, then the whole gradient at once).
void ddp_allreduce_gradients(trainer *t, ddp_state *dp, size_t first, size_t floats, cudaStream_t stream)
{
    // TODO(12-allreduce): sum that range of t->model.d_grads over the ranks into the same
    // range of dp->d_sum: ncclAllReduce (ncclFloat, ncclSum, the gradients' communicator dp->grads)
    // on `stream`, inside NCCL_CHECK(dp->dist, ...)
    (void)t, (void)dp, (void)first, (void)floats, (void)stream;
}

// hooks.issue: bucket b's gradients are queued on the compute stream (ddp.cu's backward pass
// calls this right after the layer that completes it); its all-reduce goes on the communication
// stream, after them, and reduced[b] behind it.
void ddp_issue_bucket(trainer *t, ddp_state *dp, long batch, int b)
{
    (void)batch;  // the same all-reduce for every batch (lesson 14 records which)
    // TODO(12-ready): the all-reduce must not read the bucket's gradients before the
    // backward pass has written them: mark that point on the compute stream with grads_ready[b],
    // and make the communication stream (not the host) wait for it
    test_delay(t, DELAY_COPY, dp->comm_stream);  // the test hook holds communication back with the copies
    ddp_allreduce_gradients(t, dp, dp->plan.first[b], dp->plan.floats[b], dp->comm_stream);
    CUDA_CHECK(cudaEventRecord(dp->reduced[b], dp->comm_stream));
}

// hooks.wait: before bucket b's update on the compute stream.
void ddp_wait_reduced(trainer *t, ddp_state *dp, int b)
{
    // TODO(12-update-wait): the update of bucket b reads its range of dp->d_sum,
    // which its all-reduce writes on the other stream: make the compute stream wait for that
    // all-reduce first
    (void)t, (void)dp, (void)b;
}
