// stages.cu (lesson 13): where a stage stands in the model, its forward and backward over
// a micro-batch, the schedules (exercise 13-one-f-one-b), and the activation slots.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"  // the lesson's types, and through it the course's headers

// the stages

// Stage s of p holds layers 1 + s*L/p to (s+1)*L/p: contiguous, in order, one layer at least.
void stage_shape_init(stage_shape *st, const mlp_shape *s, int rank, int stages, int micro_batches)
{
    memset(st, 0, sizeof *st);
    st->rank = rank;
    st->stages = stages;
    st->first_layer = 1 + rank * s->layers / stages;
    st->last_layer = (rank + 1) * s->layers / stages;
    st->layers = st->last_layer - st->first_layer + 1;
    st->micro_batches = micro_batches;
    st->batch = s->batch;
    st->cols = s->batch / micro_batches;
    st->in_dim = s->dims[0];
    st->out_dim = s->dims[s->layers];
    size_t at = aligned((size_t)s->dims[st->first_layer - 1] * st->cols);
    for (int k = 1; k <= st->layers; k++) {
        st->off[k] = at;
        at += aligned((size_t)s->dims[st->first_layer + k - 1] * st->cols);
    }
    st->off[st->layers + 1] = at;
    if (stage_is_last(st)) at += aligned((size_t)st->out_dim * st->cols);
    st->slot_floats = at;
}

// The stage's layers, bottom to top, on the micro-batch whose activations are at `act`.
void stage_forward(mlp_model *model, const stage_shape *st, float *act, cudaStream_t stream)
{
    for (int l = st->first_layer; l <= st->last_layer; l++)
        mlp_forward_layer(model, l, layer_input(st, act, l), layer_output(st, act, l), st->cols, stream);
}

// The micro-batch's backward pass through the stage's layers, top to bottom, as mlp_backward
// does. The last stage starts from the loss (the micro-batch's share of the batch's loss into
// *loss: the mean is over the whole batch); the others from `error_in`, the error of their
// output that the next stage sent. The bottom layer's error goes to `error_out`, but on the
// first stage: layer 1 has no layer below. With `accumulate` the layers' gradients are added
// to what d_grads holds, else they replace it.
void stage_backward(mlp_model *model, const stage_shape *st, float *act, const float *error_in, float *error_out,
                    float *loss, int accumulate, cudaStream_t stream)
{
    const float *delta = error_in;
    int scratch = 0;  // which of the model's two error buffers the next layer writes
    if (stage_is_last(st)) {
        mlp_loss(model, layer_output(st, act, st->last_layer), stage_targets(st, act), model->d_delta[0], loss,
                 st->cols, st->batch, stream);
        delta = model->d_delta[0];
        scratch = 1;
    }
    for (int l = st->last_layer; l >= st->first_layer; l--) {
        float *prev = l > st->first_layer ? model->d_delta[scratch] : stage_is_first(st) ? NULL : error_out;
        mlp_backward_layer(model, l, layer_input(st, act, l), delta, prev, st->cols, accumulate, stream);
        delta = prev;
        scratch ^= 1;
    }
}

// The batch's loss: its micro-batches' shares, summed on the host in micro-batch order (the
// run and the reference add the same floats in the same order: the same bits).
float batch_loss(const float *parts, int micro_batches)
{
    float sum = 0.0f;
    for (int m = 0; m < micro_batches; m++) sum += parts[m];
    return sum;
}

// ----------------------------------------------------------------------------
// the schedules: the order in which a stage issues its forwards (F) and backwards (B)

static void push_op(step_op *ops, int *n, int backward, int m)
{
    ops[*n].backward = backward;
    ops[*n].micro_batch = m;
    (*n)++;
}

// GPipe: every forward, then every backward, each in micro-batch order.
static int schedule_gpipe(const stage_shape *st, step_op *ops)
{
    int n = 0;
    for (int m = 0; m < st->micro_batches; m++) push_op(ops, &n, 0, m);
    for (int m = 0; m < st->micro_batches; m++) push_op(ops, &n, 1, m);
    return n;
}

// 1F1B: stage s of p first runs min(p - s - 1, M) warm-up forwards (the first stage most,
// the last none), then one forward and one backward in turn, then the backwards left. A
// stage then holds at most p - s micro-batches: every backward frees one before the next
// forward needs one.
static int schedule_1f1b(const stage_shape *st, step_op *ops)
{
    int n = 0;
    // BEGIN SOLUTION(13-one-f-one-b): fill ops[] in 1F1B order with push_op (0: forward, 1:
    // backward): w = min(p - s - 1, M) warm-up forwards, then for each further micro-batch its
    // forward followed by the oldest backward not yet issued, then the last w backwards; p =
    // st->stages, s = st->rank, M = st->micro_batches
    int M = st->micro_batches, warmup = st->stages - st->rank - 1;
    if (warmup > M) warmup = M;
    for (int m = 0; m < warmup; m++) push_op(ops, &n, 0, m);
    for (int m = warmup; m < M; m++) {
        push_op(ops, &n, 0, m);
        push_op(ops, &n, 1, m - warmup);
    }
    for (int m = M - warmup; m < M; m++) push_op(ops, &n, 1, m);
    //| (void)st, (void)ops;
    // END SOLUTION
    return n;
}

int schedule_build(schedule_kind kind, const stage_shape *st, step_op *ops)
{
    return kind == SCHEDULE_1F1B ? schedule_1f1b(st, ops) : schedule_gpipe(st, ops);
}

// Every micro-batch's forward and backward exactly once, the forwards in micro-batch order,
// the backwards too (the gradients are summed in that order: the reference's), each
// backward after its forward. The program checks each stage's order before training.
int schedule_is_sound(const stage_shape *st, const step_op *ops, int n, char *why, size_t size)
{
    int M = st->micro_batches, next_forward = 0, next_backward = 0;
    if (n != 2 * M) {
        snprintf(why, size, "%d operations for %d micro-batches: each needs one forward and one backward", n, M);
        return 0;
    }
    for (int k = 0; k < n; k++) {
        int m = ops[k].micro_batch;
        if (!ops[k].backward) {
            if (m != next_forward) {
                snprintf(why, size, "operation %d is the forward of micro-batch %d where %d comes next", k, m,
                         next_forward);
                return 0;
            }
            next_forward++;
        } else if (m != next_backward || m >= next_forward) {
            snprintf(why, size,
                     "operation %d is the backward of micro-batch %d: the backwards go in micro-batch "
                     "order (%d comes next), each after its forward",
                     k, m, next_backward);
            return 0;
        } else {
            next_backward++;
        }
    }
    return 1;
}

// "F0 F1 B0 F2 B1 B2": one stage's order, for --show-schedule and the report.
void schedule_text(const step_op *ops, int n, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (int k = 0; k < n && at < size; k++)
        at += (size_t)snprintf(out + at, size - at, "%s%c%d", k ? " " : "", ops[k].backward ? 'B' : 'F',
                               ops[k].micro_batch);
}

// ----------------------------------------------------------------------------
// the activation slots

static void slot_create(act_slot *slot, size_t floats)
{
    slot->d_act = (float *)device_alloc(sizeof(float) * floats);
    cudaEvent_t *events[6] = {&slot->copied, &slot->received, &slot->forwarded,
                              &slot->sent,   &slot->freed,    &slot->wanted};
    for (int k = 0; k < 6; k++) CUDA_CHECK(cudaEventCreateWithFlags(events[k], cudaEventDisableTiming));
    slot->micro_batch = -1;
}

void slot_destroy(act_slot *slot)
{
    cudaEvent_t events[6] = {slot->copied, slot->received, slot->forwarded, slot->sent, slot->freed, slot->wanted};
    for (int k = 0; k < 6; k++) CUDA_CHECK(cudaEventDestroy(events[k]));
    device_free(slot->d_act);
}

// A slot for micro-batch m: the first free one, or a new one when none is free. A new slot is
// allocated only in a schedule's first run; by then this stage has issued forwards alone since
// its last backward, whose hand-overs need nothing more from this host (notes/13).
act_slot *pool_take(schedule_run *sched, int m)
{
    slot_pool *p = &sched->pool;
    const stage_shape *st = &sched->pp->st;
    int k = 0;
    while (k < p->allocated && p->slots[k].micro_batch >= 0) k++;
    if (k == p->allocated) {
        if (p->allocated == p->capacity)
            dist_fail(sched->pp->dist,
                      "stage %d (%s): micro-batch %d finds no free activation slot although all %d "
                      "micro-batches of a batch already have one: a slot is never given back (exercise 13-slot-return)",
                      st->rank, SCHEDULE_NAMES[sched->kind], m, p->capacity);
        links_group_close(sched->pp);           // an allocation may wait for the GPU: no send held back
        size_t before = device_bytes_in_use();  // measured by the allocator, not counted here
        slot_create(&p->slots[k], st->slot_floats);
        p->device_bytes += device_bytes_in_use() - before;
        p->allocated++;
    }
    p->slots[k].micro_batch = m;
    sched->slot_of[m] = k;
    if (++p->in_use > p->peak) p->peak = p->in_use;
    return &p->slots[k];
}

// Micro-batch m's slot is free again (its backward has been issued, and its freed event recorded).
void pool_return(schedule_run *sched, int m)
{
    sched->pool.slots[sched->slot_of[m]].micro_batch = -1;
    sched->pool.in_use--;
}
