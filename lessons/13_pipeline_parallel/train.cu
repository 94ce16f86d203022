// STUDENT VERSION of solutions/13_pipeline_parallel/train.cu, made by `make lessons` (checksum 3993547324)
// Fill in its 4 TODOs.
// train.cu (lesson 13): one micro-batch through this stage, forward and backward, with its
// hand-overs (exercises 13-send-after-forward, 13-recv-wait, 13-accumulate, 13-slot-return);
// the training loop; the one-stage reference every run must match.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"  // the lesson's types, and through it the course's headers

// the data

// Host work: samples [m * cols, (m + 1) * cols) of batch i, features then targets, the same
// bits as those columns of lesson 06's whole batch (a prep range on the timeline).
static void prepare_micro_batch(trainer *t, const stage_shape *st, long i, int m, float *h)
{
    trace_range r = trace_begin(TL_RANGE_PREP, "prep", (int)i);
    double t0 = host_now_ms();
    dataset_prepare_shard(&t->data, i, m * st->cols, st->cols, h);
    double ms = host_now_ms() - t0;
    trace_end(&r);
    t->run.prep_ms += ms;  // only the main thread prepares here: no lock needed
    t->run.main_prep_ms += ms;
}

// What this stage needs of micro-batch m from the host, into its slot on the copy stream:
// the features on the first stage, the targets on the last (both with one stage). Each
// pinned region is refilled only once its last copy has left it (lesson 08).
static void copy_in(trainer *t, pipeline *pp, act_slot *slot, long i, int m)
{
    const stage_shape *st = &pp->st;
    int region = (int)(i % HOST_SLOTS) * st->micro_batches + m;
    float *h = t->h_batch[i % HOST_SLOTS] + (size_t)m * st->cols * (st->in_dim + st->out_dim);
    cudaEvent_t left = pp->host_copied[region];
    if (event_pending(left)) SLOT_WAIT(t, dist_event_wait(pp->dist, left));
    prepare_micro_batch(t, st, i, m, h);
    // the slot is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(t->copy_stream, slot->freed, 0));
    test_delay(t, DELAY_COPY, t->copy_stream);
    if (stage_is_first(st))
        CUDA_CHECK(cudaMemcpyAsync(layer_input(st, slot->d_act, st->first_layer), h,
                                   sizeof(float) * st->cols * st->in_dim, cudaMemcpyHostToDevice, t->copy_stream));
    if (stage_is_last(st))
        CUDA_CHECK(cudaMemcpyAsync(stage_targets(st, slot->d_act), h + (size_t)st->cols * st->in_dim,
                                   sizeof(float) * st->cols * st->out_dim, cudaMemcpyHostToDevice, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(slot->copied, t->copy_stream));
    CUDA_CHECK(cudaEventRecord(left, t->copy_stream));
}

// ----------------------------------------------------------------------------
// one micro-batch: its forward (F) and its backward (B) on this stage

// A receive's kernel holds its SMs from the moment it starts until its data has come, and the
// host issues the schedule well ahead of the GPU: posted as soon as its buffer is free, a
// receive would spin beside the stage's products for most of the step (notes/13, measured).
// Posted late, the link's stream first waits until the compute stream has finished everything
// before the work that reads the receive: it then runs while the compute stream waits for it.
static void post_when_wanted(trainer *t, cudaEvent_t wanted, cudaStream_t link)
{
    CUDA_CHECK(cudaEventRecord(wanted, t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(link, wanted, 0));
}

// The activation of micro-batch m from the previous stage, into the slot's input.
static void receive_activation(trainer *t, schedule_run *sched, act_slot *slot, int m)
{
    const stage_shape *st = &sched->pp->st;
    p2p_link *up = &sched->pp->ln->fwd;
    // the slot is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(up->stream, slot->freed, 0));
    if (sched->pp->post_recv == POST_RECV_LATE) post_when_wanted(t, slot->wanted, up->stream);
    test_delay(t, DELAY_COPY, up->stream);  // the test hook holds the hand-overs back with the copies
    HAND_OVER(sched, ACT_RECEIVED, m,
              ncclRecv(layer_input(st, slot->d_act, st->first_layer), input_floats(&t->model.shape, st), ncclFloat,
                       st->rank - 1, up->comm, up->stream));
    CUDA_CHECK(cudaEventRecord(slot->received, up->stream));
}

// The stage's output for micro-batch m, to the next stage.
static void send_activation(trainer *t, schedule_run *sched, act_slot *slot, int m)
{
    const stage_shape *st = &sched->pp->st;
    p2p_link *up = &sched->pp->ln->fwd;
    // TODO(13-send-after-forward): the send must not read the stage's output before the
    // forward pass has written it: mark that point on the compute stream with the slot's forwarded
    // event, and make the forward link's stream (up->stream), not the host, wait for it
    test_delay(t, DELAY_COPY, up->stream);
    HAND_OVER(sched, ACT_SENT, m,
              ncclSend(layer_output(st, slot->d_act, st->last_layer), output_floats(&t->model.shape, st), ncclFloat,
                       st->rank + 1, up->comm, up->stream));
    hand_over_record(sched->pp, slot->sent, up->stream);  // --p2p-group pairs: once its group has ended
}

static void forward_micro_batch(trainer *t, schedule_run *sched, long i, int m)
{
    pipeline *pp = sched->pp;
    const stage_shape *st = &pp->st;
    cudaStream_t compute = t->compute_stream;
    act_slot *slot = pool_take(sched, m);
    if (stage_is_first(st) || stage_is_last(st)) copy_in(t, pp, slot, i, m);
    if (!stage_is_first(st)) receive_activation(t, sched, slot, m);
    if (stage_is_first(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, slot->copied, 0));
    // TODO(13-recv-wait): on every stage but the first, the forward pass reads the
    // activation that the forward link receives into the slot: make the compute stream wait for the
    // slot's received event (recorded on that link's stream after the ncclRecv)
    // the output is rewritten: the send of the slot's last micro-batch must have read it
    if (!stage_is_last(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, slot->sent, 0));
    test_delay(t, DELAY_COMPUTE, compute);
    stage_forward(&t->model, st, slot->d_act, compute);
    if (!stage_is_last(st)) send_activation(t, sched, slot, m);
}

// The error of micro-batch m's output, from the next stage, into error buffer k.
static void receive_error(trainer *t, schedule_run *sched, int k, int m)
{
    pipeline *pp = sched->pp;
    p2p_link *down = &pp->ln->bwd;
    // the buffer is refilled: the backward pass that read it last must have finished
    CUDA_CHECK(cudaStreamWaitEvent(down->stream, pp->error_read[k], 0));
    if (pp->post_recv == POST_RECV_LATE) post_when_wanted(t, pp->error_wanted[k], down->stream);
    test_delay(t, DELAY_COPY, down->stream);
    HAND_OVER(sched, ERROR_RECEIVED, m,
              ncclRecv(pp->d_error_in[k], output_floats(&t->model.shape, &pp->st), ncclFloat, pp->st.rank + 1,
                       down->comm, down->stream));
    CUDA_CHECK(cudaEventRecord(pp->error_received[k], down->stream));
}

// The error of micro-batch m's input, to the previous stage: the mirror of send_activation.
static void send_error(trainer *t, schedule_run *sched, int k, int m)
{
    pipeline *pp = sched->pp;
    p2p_link *down = &pp->ln->bwd;
    CUDA_CHECK(cudaEventRecord(pp->error_ready[k], t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(down->stream, pp->error_ready[k], 0));
    test_delay(t, DELAY_COPY, down->stream);
    HAND_OVER(sched, ERROR_SENT, m,
              ncclSend(pp->d_error_out[k], input_floats(&t->model.shape, &pp->st), ncclFloat, pp->st.rank - 1,
                       down->comm, down->stream));
    hand_over_record(pp, pp->error_sent[k], down->stream);  // --p2p-group pairs: once its group has ended
}

static void backward_micro_batch(trainer *t, schedule_run *sched, long i, int m)
{
    pipeline *pp = sched->pp;
    const stage_shape *st = &pp->st;
    cudaStream_t compute = t->compute_stream;
    act_slot *slot = &sched->pool.slots[sched->slot_of[m]];
    int k = m % 2;  // the error buffers, ping-pong: micro-batch m+1's may arrive while m's is read
    if (!stage_is_last(st)) {
        receive_error(t, sched, k, m);
        CUDA_CHECK(cudaStreamWaitEvent(compute, pp->error_received[k], 0));
    } else {
        CUDA_CHECK(cudaStreamWaitEvent(compute, slot->copied, 0));  // the targets, for the loss
    }
    // the error for the previous stage is rewritten: its last send must have read it
    if (!stage_is_first(st)) CUDA_CHECK(cudaStreamWaitEvent(compute, pp->error_sent[k], 0));
    test_delay(t, DELAY_COMPUTE, compute);
    // TODO(13-accumulate): d_grads must end the batch holding the sum of every
    // micro-batch's gradients, summed in micro-batch order: say whether this backward pass replaces
    // what d_grads holds (it still holds the previous batch's) or adds to it
    int accumulate = 0;
    stage_backward(&t->model, st, slot->d_act, pp->d_error_in[k], pp->d_error_out[k],
                   &pp->d_parts[(i % STEP_RING) * st->micro_batches + m], accumulate, compute);
    if (!stage_is_last(st)) CUDA_CHECK(cudaEventRecord(pp->error_read[k], compute));
    // TODO(13-slot-return): the slot's activations have been read once this backward pass
    // is done: record the slot's freed event on the compute stream (whatever refills the slot waits
    // for it), then give the slot back to the pool (pool_return) for a later forward
    if (!stage_is_first(st)) send_error(t, sched, k, m);
}

// ----------------------------------------------------------------------------
// the training loop

// After the batch's last backward pass: the update of this stage's layers (W_l then b_l, the
// layers in increasing order: one range), the partial losses' copy on the last stage, and the
// event the host waits for. After the last batch the compute stream also waits for the links'
// last hand-overs, so that the event covers every stream of this rank.
static void finish_step(trainer *t, pipeline *pp, long i)
{
    const stage_shape *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t compute = t->compute_stream;
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    mlp_update(&t->model, first, end - first, compute);
    if (stage_is_last(st)) {
        size_t at = (size_t)(i % STEP_RING) * st->micro_batches;
        CUDA_CHECK(cudaMemcpyAsync(pp->h_parts + at, pp->d_parts + at, sizeof(float) * st->micro_batches,
                                   cudaMemcpyDeviceToHost, compute));
    }
    if (i == t->opt.batches - 1 && pp->ln) {
        cudaStream_t streams[2] = {pp->ln->fwd.stream, pp->ln->bwd.stream};
        for (int k = 0; k < 2; k++) {
            CUDA_CHECK(cudaEventRecord(pp->links_idle[k], streams[k]));
            CUDA_CHECK(cudaStreamWaitEvent(compute, pp->links_idle[k], 0));
        }
    }
    CUDA_CHECK(cudaEventRecord(pp->step_done[i % STEP_RING], compute));
}

// The host waits (polled: it gives up when another rank failed) for batch j's step; the last
// stage then takes batch j's loss, its micro-batches' shares summed.
static void step_wait(trainer *t, pipeline *pp, long j)
{
    HOST_SYNC(t, dist_event_wait(pp->dist, pp->step_done[j % STEP_RING]));
    if (!stage_is_last(&pp->st)) return;
    t->h_loss[j % t->loss_slots] = batch_loss(pp->h_parts + (size_t)(j % STEP_RING) * pp->st.micro_batches,
                                              pp->st.micro_batches);
    trainer_take_loss(t, j);
}

// The losses live on the last stage; every rank's checks need them: one broadcast of the
// run's losses at its end (a collective costs tens of microseconds: not one per batch).
static void broadcast_losses(trainer *t, pipeline *pp)
{
    int n = t->opt.batches, last = pp->st.stages - 1;
    cudaStream_t s = t->compute_stream;
    for (int i = 0; i < n; i++) pp->h_losses[i] = stage_is_last(&pp->st) ? (float)t->run.losses[i] : 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(pp->d_losses, pp->h_losses, sizeof(float) * n, cudaMemcpyHostToDevice, s));
    NCCL_CHECK(pp->dist, ncclBroadcast(pp->d_losses, pp->d_losses, (size_t)n, ncclFloat, last, pp->dist->comm, s));
    CUDA_CHECK(cudaMemcpyAsync(pp->h_losses, pp->d_losses, sizeof(float) * n, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaEventRecord(pp->losses_landed, s));
    HOST_SYNC(t, dist_event_wait(pp->dist, pp->losses_landed));
    if (stage_is_last(&pp->st)) return;
    for (int i = 0; i < n; i++) {
        t->h_loss[i % t->loss_slots] = pp->h_losses[i];
        trainer_take_loss(t, i);
    }
}

// Each micro-batch crosses each boundary once each way per batch: a stage sends (and the
// next receives) every activation but on the last stage, every error but on the first.
static void check_crossings(trainer *t, schedule_run *sched)
{
    const stage_shape *st = &sched->pp->st;
    static const char *const what[CROSSING_KINDS] = {"activations sent", "activations received", "errors sent",
                                                     "errors received"};
    long n = t->opt.batches;
    long want[CROSSING_KINDS] = {stage_is_last(st) ? 0 : n, stage_is_first(st) ? 0 : n, stage_is_first(st) ? 0 : n,
                                 stage_is_last(st) ? 0 : n};
    sched->act_sent = sched->error_sent = 0;
    for (int kind = 0; kind < CROSSING_KINDS; kind++)
        for (int m = 0; m < st->micro_batches; m++) {
            long got = sched->crossed[kind * st->micro_batches + m];
            if (kind == ACT_SENT) sched->act_sent += got;
            if (kind == ERROR_SENT) sched->error_sent += got;
            if (got != want[kind] && sched->crossings_ok) {
                sched->crossings_ok = 0;
                snprintf(sched->crossing_problem, sizeof sched->crossing_problem,
                         "stage %d (%s): micro-batch %d: %ld %s in a run of %ld batches, expected %ld", st->rank,
                         SCHEDULE_NAMES[sched->kind], m, got, what[kind], n, want[kind]);
            }
        }
}

// Whether a forward or backward on this stage hands nothing over before its receive: a
// forward but on the first stage, a backward but on the last (--p2p-group pairs).
static int begins_with_receive(const stage_shape *st, const step_op *op)
{
    return op->backward ? !stage_is_last(st) : !stage_is_first(st);
}

int train_loop(trainer *t, void *ctx)
{
    schedule_run *sched = (schedule_run *)ctx;
    pipeline *pp = sched->pp;
    const stage_shape *st = &pp->st;
    long n = t->opt.batches;
    size_t parts = (size_t)STEP_RING * st->micro_batches;
    // poisoned: a share of the loss read before its copy lands is NaN, and the loss with it
    memset(pp->h_parts, 0xFF, sizeof(float) * parts);
    CUDA_CHECK(cudaMemsetAsync(pp->d_parts, 0xFF, sizeof(float) * parts, t->compute_stream));
    memset(sched->crossed, 0, sizeof(long) * CROSSING_KINDS * (size_t)st->micro_batches);
    sched->pairs = 0;
    for (long i = 0; i < n; i++) {
        dist_fault_inject(pp->dist, &pp->fault, i, t->compute_stream);  // --fault: a failure on purpose
        if (i >= 2) step_wait(t, pp, i - 2);  // two batches ahead at most: events and buffers stay in their rings
        for (int k = 0; k < sched->nops; k++) {
            const step_op *op = &sched->ops[k];
            // --p2p-group pairs: the last send stays in its group only for a receive that comes first
            if (!begins_with_receive(st, op)) links_group_close(pp);
            if (op->backward)
                backward_micro_batch(t, sched, i, op->micro_batch);
            else
                forward_micro_batch(t, sched, i, op->micro_batch);
        }
        links_group_close(pp);
        finish_step(t, pp, i);
    }
    for (long j = n >= 2 ? n - 2 : 0; j < n; j++) step_wait(t, pp, j);
    if (st->stages > 1) broadcast_losses(t, pp);
    check_crossings(t, sched);
    return 0;
}

// ----------------------------------------------------------------------------
// the reference

// What every run must match, computed on every rank: the one-stage run, every layer on this
// GPU, micro-batch after micro-batch (forward, then backward), the gradients summed in
// micro-batch order, the host waiting for every batch. The same layer operations on the same
// bits as the pipeline, whatever the stage count or the schedule: the same bits. A pipelined
// run trains only this stage's layers, so at the end the others get their initial values
// back: the harness's checksum of the whole model then compares this stage's layers.
int reference_loop(trainer *t, void *ctx)
{
    pipeline *pp = (pipeline *)ctx;
    const stage_shape *w = &pp->whole, *st = &pp->st;
    const mlp_shape *s = &t->model.shape;
    cudaStream_t stream = t->compute_stream;
    int M = w->micro_batches;
    for (long i = 0; i < t->opt.batches; i++) {
        for (int m = 0; m < M; m++) {
            float *h = t->h_batch[0] + (size_t)m * w->cols * (w->in_dim + w->out_dim);
            dataset_prepare_shard(&t->data, i, m * w->cols, w->cols, h);
            CUDA_CHECK(cudaMemcpyAsync(layer_input(w, pp->d_ref, 1), h, sizeof(float) * w->cols * w->in_dim,
                                       cudaMemcpyHostToDevice, stream));
            CUDA_CHECK(cudaMemcpyAsync(stage_targets(w, pp->d_ref), h + (size_t)w->cols * w->in_dim,
                                       sizeof(float) * w->cols * w->out_dim, cudaMemcpyHostToDevice, stream));
            stage_forward(&t->model, w, pp->d_ref, stream);
            stage_backward(&t->model, w, pp->d_ref, NULL, NULL, &pp->d_parts[m], m > 0, stream);
        }
        mlp_update(&t->model, 0, s->nparams, stream);
        CUDA_CHECK(cudaMemcpyAsync(pp->h_parts, pp->d_parts, sizeof(float) * M, cudaMemcpyDeviceToHost, stream));
        CUDA_CHECK(cudaEventRecord(pp->step_done[0], stream));
        CUDA_CHECK(dist_event_wait(pp->dist, pp->step_done[0]));  // also: the pinned regions may be refilled
        t->h_loss[i % t->loss_slots] = batch_loss(pp->h_parts, M);
        trainer_take_loss(t, i);
    }
    size_t first = s->w_off[st->first_layer], end = s->b_off[st->last_layer] + (size_t)s->dims[st->last_layer];
    if (first > 0)
        CUDA_CHECK(cudaMemcpyAsync(t->model.d_params, t->model.d_params_init, sizeof(float) * first,
                                   cudaMemcpyDeviceToDevice, stream));
    if (end < s->nparams)
        CUDA_CHECK(cudaMemcpyAsync(t->model.d_params + end, t->model.d_params_init + end,
                                   sizeof(float) * (s->nparams - end), cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaEventRecord(pp->step_done[0], stream));
    CUDA_CHECK(dist_event_wait(pp->dist, pp->step_done[0]));
    return 0;
}
