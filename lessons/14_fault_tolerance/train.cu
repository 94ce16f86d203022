// STUDENT VERSION of solutions/14_fault_tolerance/train.cu, made by `make lessons` (checksum 991119579)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// train.cu (lesson 14): lesson 12's data-parallel training (12's ddp.h step, its hooks lesson
// 12's own exercises), with three additions: every NCCL call goes into the flight recorder; the
// faults of --fault are injected; every --fingerprint-every batches the ranks compare their calls
// before they issue them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

// ----------------------------------------------------------------------------
// lesson 12's step, recorded, with the faults

// hooks.issue: lesson 12's ddp_issue_bucket (bucket b's all-reduce after its gradients), recorded as
// soon as it is queued; --fault kill strikes around it: every earlier call completed, this one held
// back on its stream (dist_fault_hold), the others enter it and wait for this rank's part.
static void issue_recorded(trainer *t, ddp_state *dp, long i, int b)
{
    fault_tolerance *ft = (fault_tolerance *)dp->hooks.ctx;
    int kill = fault_now(ft, FAULT_KILL, i);
    if (kill) dist_fault_hold(dp->comm_stream);
    ddp_issue_bucket(t, dp, i, b);  // lesson 12's
    recorder_record(&ft->rec, FLIGHT_ALL_REDUCE, i, b, dp->plan.floats[b], sizeof(float), -1, dp->comm_stream, "comm");
    if (kill)
        dist_fault_kill(ft->dist, "killed inside all-reduce #%lld at batch %ld as asked (--fault kill)",
                        ft->rec.collectives - 1, i);
}

// hooks.order: the buckets this rank issues at batch i, in order: 0, 1, ... (the order of the
// backward pass), but for the faults: one skipped, or all reversed. Returns how many.
static int bucket_order(const ddp_state *dp, long i, int *order)
{
    const fault_tolerance *ft = (const fault_tolerance *)dp->hooks.ctx;
    int n = 0;
    for (int b = 0; b < dp->plan.count; b++) {
        if (b == 0 && fault_now(ft, FAULT_SKIP, i)) continue;  // one all-reduce skipped
        order[n++] = b;
    }
    if (fault_now(ft, FAULT_ORDER, i))
        for (int k = 0; k < n / 2; k++) {
            int swap = order[k];
            order[k] = order[n - 1 - k];
            order[n - 1 - k] = swap;
        }
    return n;
}

// hooks.issued: the losses' all-reduce at the end of the run, recorded.
static void note_losses(ddp_state *dp, long batch, size_t count, cudaStream_t stream)
{
    fault_tolerance *ft = (fault_tolerance *)dp->hooks.ctx;
    recorder_record(&ft->rec, FLIGHT_ALL_REDUCE, batch, -1, count, sizeof(float), -1, stream, "comm");
}

void step_hooks(fault_tolerance *ft)
{
    ddp_hooks *h = &ft->dp.hooks;
    h->issue = issue_recorded;
    h->wait = ddp_wait_reduced;  // lesson 12's own
    h->order = bucket_order;
    h->issued = note_losses;
    h->ctx = ft;
}

// ----------------------------------------------------------------------------
// the fingerprint check

// What each rank shows the others before batch i: the fingerprint of every call it made so
// far, and the calls it is about to make.
typedef struct {
    uint64_t hash;
    long long calls, collectives;
    int n, pad;
    flight_entry next[DDP_MAX_BUCKETS];
} fingerprint;

// 1 when two calls about to be made are not the same call: what NCCL pairs them by (their
// number) and what it then mixes (the operation, the size, the bucket, the batch).
static int not_same(const flight_entry *a, const flight_entry *b)
{
    return a->index != b->index || a->op != b->op || a->count != b->count || a->bytes != b->bytes ||
           a->part != b->part || a->batch != b->batch;
}

// Rank r's calls about to be made against rank 0's, one by one: 1 and the first difference in
// `line` (a call that differs, or one that one rank would make and the other not), else 0.
static int next_calls_differ(const fingerprint *all, int r, long i, char *line, size_t size)
{
    const fingerprint *a = &all[r], *b = &all[0];
    char x[160], y[160];
    for (int k = 0; k < a->n && k < b->n; k++) {
        if (!not_same(&a->next[k], &b->next[k])) continue;
        flight_describe(&a->next[k], x, sizeof x);
        flight_describe(&b->next[k], y, sizeof y);
        snprintf(line, size, "rank %d would issue %s where rank 0 would issue %s", r, x, y);
        return 1;
    }
    if (a->n == b->n) return 0;
    int more = a->n > b->n ? r : 0, fewer = a->n > b->n ? 0 : r;
    const fingerprint *m = &all[more];
    flight_describe(&m->next[a->n < b->n ? a->n : b->n], x, sizeof x);
    snprintf(line, size,
             "rank %d would issue %d call%s in batch %ld, rank %d %d: rank %d's %s would pair with whatever rank %d "
             "issues next",
             more, m->n, m->n == 1 ? "" : "s", i, fewer, all[fewer].n, more, x, fewer);
    return 1;
}

void fingerprint_setup(fault_tolerance *ft)
{
    fingerprint_exchange *x = &ft->fp;
    x->bytes = sizeof(fingerprint);
    if (ft->fingerprint_every <= 0) return;
    x->d_all = (unsigned char *)device_alloc(x->bytes * (size_t)ft->dist->world);
    x->h_all = (unsigned char *)pinned_alloc(x->bytes * (size_t)ft->dist->world);
    CUDA_CHECK(cudaEventCreateWithFlags(&x->landed, cudaEventDisableTiming));
}

void fingerprint_teardown(fault_tolerance *ft)
{
    fingerprint_exchange *x = &ft->fp;
    if (ft->fingerprint_every <= 0) return;
    device_free(x->d_all);
    pinned_free(x->h_all);
    CUDA_CHECK(cudaEventDestroy(x->landed));
}

// Every rank's fingerprint through one small all-gather, in buffers made once (an allocation would
// wait for the whole device: cudaFree, cudaFreeHost); where they differ, this rank stops with the
// first divergence in one line (every rank finds the same), before any rank issues a call that
// could hang: the calls made so far (their number and their hash), then the calls about to be
// made, one by one.
static void fingerprint_check(fault_tolerance *ft, long i)
{
    dist_env *d = ft->dist;
    fingerprint_exchange *x = &ft->fp;
    double t0 = host_now_ms();
    fingerprint mine;
    memset(&mine, 0, sizeof mine);
    mine.hash = ft->rec.hash;
    mine.calls = ft->rec.calls;
    mine.collectives = ft->rec.collectives;
    int order[DDP_MAX_BUCKETS];
    mine.n = bucket_order(&ft->dp, i, order);
    for (int k = 0; k < mine.n; k++) {
        flight_entry *e = &mine.next[k];
        int b = order[k];
        e->seq = mine.calls + 1 + k;  // after this check's own all-gather
        e->index = mine.collectives + 1 + k;
        e->op = FLIGHT_ALL_REDUCE;
        e->batch = i;
        e->part = b;
        e->count = (long long)ft->dp.plan.floats[b];
        e->bytes = e->count * (long long)sizeof(float);
        e->peer = -1;
        snprintf(e->stream, sizeof e->stream, "comm");
        e->fired = 1;  // not issued yet: nothing to wait for
    }
    cudaStream_t comm = ft->dp.comm_stream;
    unsigned char *h_mine = x->h_all + x->bytes * (size_t)d->rank, *d_mine = x->d_all + x->bytes * (size_t)d->rank;
    memcpy(h_mine, &mine, sizeof mine);
    CUDA_CHECK(cudaMemcpyAsync(d_mine, h_mine, x->bytes, cudaMemcpyHostToDevice, comm));
    NCCL_CHECK(d, ncclAllGather(d_mine, x->d_all, x->bytes, ncclUint8, d->comm, comm));
    // in the ring as soon as it is queued, before the host waits: a rank stuck in it has it there
    recorder_record(&ft->rec, FLIGHT_ALL_GATHER, i, -1, x->bytes * (size_t)d->world, 1, -1, comm, "comm");
    CUDA_CHECK(cudaMemcpyAsync(x->h_all, x->d_all, x->bytes * (size_t)d->world, cudaMemcpyDeviceToHost, comm));
    CUDA_CHECK(cudaEventRecord(x->landed, comm));
    CUDA_CHECK(dist_event_wait(d, x->landed));  // this all-gather, behind the last batch's all-reduces
    const fingerprint *all = (const fingerprint *)x->h_all;
    ft->fingerprint_checks++;
    char line[1024] = "";
    int differ = 0;
    for (int r = 1; r < d->world && !differ; r++)
        if (all[r].hash != all[0].hash || all[r].calls != all[0].calls) {
            snprintf(line, sizeof line,
                     "rank %d made %lld calls before batch %ld (fingerprint %016llx), rank 0 %lld "
                     "(%016llx): build/tools/flight-report names the first that differs",
                     r, all[r].calls, i, (unsigned long long)all[r].hash, all[0].calls,
                     (unsigned long long)all[0].hash);
            differ = 1;
        }
    for (int r = 1; r < d->world && !differ; r++) differ = next_calls_differ(all, r, i, line, sizeof line);
    ft->fingerprint_ms += host_now_ms() - t0;
    if (differ) dist_fail(d, "fingerprint check before batch %ld: %s", i, line);
}

// ----------------------------------------------------------------------------
// the training loop (lesson 12's), a fingerprint check before every --fingerprint-every batches

int train_loop(trainer *t, fault_tolerance *ft)
{
    ddp_state *dp = &ft->dp;
    long next_loss = 0;  // the first batch whose loss has not been taken yet
    for (long i = 0; i < t->opt.batches; i++) {
        if (fault_now(ft, FAULT_HANG, i))  // before its check: the others wait in the check's all-gather
            dist_hang(ft->dist, t->compute_stream, "hanging at batch %ld, its fingerprint check next (--fault hang)",
                      i);
        if (ft->fingerprint_every > 0 && i % ft->fingerprint_every == 0) fingerprint_check(ft, i);
        float *d_batch = ddp_copy_batch(t, dp, i, 0);  // lesson 12's: the host slot, the copy, their waits
        ddp_step(t, dp, i, d_batch);                   // lesson 12's step, its hooks above
        CUDA_CHECK(cudaEventRecord(dp->stepped[i % DDP_SLOTS], t->compute_stream));
        loss_ring_queue(&dp->losses, t, i, t->compute_stream);
        loss_ring_interval(&dp->losses, t, i, DDP_SYNC_INTERVAL, &next_loss);  // lesson 08's, its waits polled
    }
    ddp_average_losses(t, dp);  // its all-reduce recorded (note_losses)
    return 0;
}
