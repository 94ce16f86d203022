// STUDENT VERSION of solutions/16_checkpoint_restart/snapshot.cu, made by `make lessons` (checksum 1006712821)
// Fill in its 1 TODO.
// snapshot.cu (lesson 16): the checkpoint that costs one copy (--checkpoint-mode snapshot, the
// default). At a checkpoint after batch i the main thread only records an event behind batch i's
// update; before batch i+1's first update, a copy stream of the checkpoint's own ("snapshot" on the
// timeline) copies the weights, and the losses the host has not taken yet, into a pinned image of
// the rank's file, while batch i+1's forward and backward passes run; batch i+1's update waits for
// the copy on the device, never the host (exercise 16-snapshot). A writer thread then waits for the
// copy, writes the file (write_atomically, as the blocking checkpoint does), says so to rank 0
// through the rendezvous folder, and rank 0's writer writes the manifest once every rank's file is
// written, then prunes: the same rules, behind the training.
//
// One snapshot in flight at most (the pinned image is its one slot): one that comes due while the
// file before is still being written waits for the writer, or is skipped (--checkpoint-busy). The
// image is free once this rank's file is written: rank 0's manifest and prune hold none.
// A writer that fails never exits (the main thread may be inside CUDA): it formats its message
// (check_message for a CUDA error) and the main thread stops the run with it at its next batch.
// The writer thread itself is in writer.cu.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: a manifest there yet

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

// ----------------------------------------------------------------------------
// the snapshot: two copies on the checkpoint's stream, ordered by two events

// The test delays (--delay-us with --delay-on compute): the copies are held back until this step's
// forward and backward passes are done, and a spin more, so that an update that does not wait for
// them overwrites the weights first, every time. (--delay-on copy holds the training back behind
// its copies instead: a copy that does not wait for the update reads the weights before it.)
static void test_hold(trainer *t, snapshot *s)
{
    if (!t->delays_on || t->opt.delay_us <= 0 || t->opt.delay_on != DELAY_COMPUTE) return;
    CUDA_CHECK(cudaEventRecord(s->held, t->compute_stream));
    CUDA_CHECK(cudaStreamWaitEvent(s->stream, s->held, 0));
    test_delay(t, DELAY_COMPUTE, s->stream);
}

// On the snapshot's stream: the losses the host has not taken yet, from the device's loss ring
// into its pinned copy (one or two ranges, the ring wrapped), and the weights into their place in
// the image.
static void issue_copies(trainer *t, checkpoint_restart *cr)
{
    snapshot *s = &cr->ckpt.snap;
    test_hold(t, s);
    CUDA_CHECK(cudaEventRecord(s->began, s->stream));
    int slots = t->loss_slots;
    long first = s->next_loss % slots, n = s->batch - s->next_loss + 1, head = n < slots - first ? n : slots - first;
    CUDA_CHECK(cudaMemcpyAsync(s->h_ring + first, t->d_loss + first, sizeof(float) * (size_t)head,
                               cudaMemcpyDeviceToHost, s->stream));
    if (n > head)
        CUDA_CHECK(cudaMemcpyAsync(s->h_ring, t->d_loss, sizeof(float) * (size_t)(n - head), cudaMemcpyDeviceToHost,
                                   s->stream));
    CUDA_CHECK(cudaMemcpyAsync(cr->ckpt.image + CKPT_HEADER_BYTES, t->model.d_params,
                               sizeof(float) * t->model.shape.nparams, cudaMemcpyDeviceToHost, s->stream));
}

void snapshot_copy(trainer *t, checkpoint_restart *cr)
{
    snapshot *s = &cr->ckpt.snap;
    // TODO(16-snapshot): s->stream waits for s->updated, then the compute stream for
    // s->copied (cudaStreamWaitEvent, the device's waits, never the host's): the copies read the
    // weights that batch s->batch's update wrote, so s->stream waits for s->updated before
    // issue_copies; this step's update, next on t->compute_stream, overwrites them, so it waits for
    // s->copied, recorded after the copies
    issue_copies(t, cr);
    CUDA_CHECK(cudaEventRecord(s->copied, s->stream));
}

// ----------------------------------------------------------------------------
// the main thread's side: a checkpoint comes due, is handed over, and the writer is watched

// The main thread's wait for the writer (or its failure): for the image (whole 0: its file written),
// or for all of it (whole 1: rank 0's manifest and prune too). Polled, so that another rank's
// failure, NCCL's, or --timeout-s stops this rank meanwhile. What HOST_WAIT waits in.
static cudaError_t writer_idle(checkpoint_restart *cr, int whole)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    dist_waiting wt = dist_waiting_start("waiting for its checkpoint writer");
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int busy = (w->busy || (whole && w->committing)) && !w->error[0];
        pthread_mutex_unlock(&w->lock);
        if (!busy) return cudaSuccess;
        dist_waiting_watch(cr->dist, &wt);  // another rank's note, NCCL's error, --timeout-s: this rank stops
        nap(WORD_POLL_NS);
    }
}

void writer_check(checkpoint_restart *cr)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    if (!w->started) return;
    char error[sizeof w->error];
    pthread_mutex_lock(&w->lock);
    memcpy(error, w->error, sizeof error);
    pthread_mutex_unlock(&w->lock);
    if (error[0]) dist_fail(cr->dist, "%s", error);
}

void snapshot_due(trainer *t, checkpoint_restart *cr, long batch, long next_loss)
{
    checkpointing *c = &cr->ckpt;
    checkpoint_writer *w = &c->writer;
    snapshot *s = &c->snap;
    double t0 = host_now_ms();
    c->fig.due++;
    writer_check(cr);
    pthread_mutex_lock(&w->lock);
    int busy = w->busy;
    pthread_mutex_unlock(&w->lock);
    if (busy && c->busy_rule == BUSY_SKIP) {
        c->fig.busy_skips++;
        if (cr->dist->world > 1 && cr->dist->rank != 0) say_word(cr, batch, "skipped", 0, 0, 0);
        c->fig.stall_ms += host_now_ms() - t0;
        return;
    }
    if (busy) {  // the image, the one slot of a checkpoint in flight, is still being written
        c->fig.busy_waits++;
        double w0 = host_now_ms();
        HOST_WAIT(t, TL_RANGE_SLOT_WAIT, "checkpoint busy", writer_idle(cr, 0));
        c->fig.busy_wait_ms += host_now_ms() - w0;
        writer_check(cr);
    }
    // lesson 08's ring holds the last loss_slots losses, and batch + 1's overwrites the oldest
    // before its update waits for the snapshot: the losses not yet taken must fit in the others
    if (batch - next_loss + 1 > t->loss_slots - 1)
        dist_fail(cr->dist, "the snapshot of batch %ld would need losses %ld to %ld from a ring of %d", batch,
                  next_loss, batch, t->loss_slots);
    for (long k = 0; k < next_loss; k++) image_loss(t, cr, k, t->run.losses[k]);  // taken; the rest come with the copy
    pthread_mutex_lock(&w->lock);
    w->busy = 1;
    w->batch = batch;
    w->next_loss = next_loss;
    pthread_mutex_unlock(&w->lock);
    s->batch = batch;
    s->next_loss = next_loss;
    s->due = 1;
    CUDA_CHECK(cudaEventRecord(s->updated, t->compute_stream));  // behind batch `batch`'s update
    c->fig.stall_ms += host_now_ms() - t0;
}

void snapshot_hand_over(checkpoint_restart *cr)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    pthread_mutex_lock(&w->lock);
    w->job = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    cr->ckpt.snap.due = 0;
}

// ----------------------------------------------------------------------------
// setup, the end, and what the faults wait for

void checkpoints_setup(trainer *t, checkpoint_restart *cr)
{
    checkpointing *c = &cr->ckpt;
    snapshot *s = &c->snap;
    checkpoint_writer *w = &c->writer;
    s->last_complete = c->resume_from;
    c->words = (ckpt_words){cr->dist->folder, cr->dist->run, cr->dist->fingerprint};
    c->probe = -1;
    c->next_due = c->start + AUTO_FIRST - 1;  // --checkpoint-every auto's first checkpoint
    if (!c->root) return;
    ckpt_header last;  // the run's last checkpoint holds the most losses: the image's size
    memset(&last, 0, sizeof last);
    last.batch = t->opt.batches - 1;
    last.losses = t->opt.batches;
    last.run = c->run;
    c->image_bytes = ckpt_file_bytes(&last);
    c->image = (unsigned char *)pinned_alloc(c->image_bytes);
    CUDA_CHECK(cudaEventCreateWithFlags(&c->params_copied, cudaEventDisableTiming));
    cudaStream_t copies = t->compute_stream;  // where the blocking checkpoint copies
    if (c->mode == CKPT_SNAPSHOT) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
        trace_name_stream(s->stream, "snapshot");
        copies = s->stream;
    }
    c->fig.d2h_pinned_gbs = pinned_copy_gbs(c->image + CKPT_HEADER_BYTES, t->model.d_params,
                                            sizeof(float) * t->model.shape.nparams, copies);  // alone, lesson 05's
    if (c->mode != CKPT_SNAPSHOT) return;
    CUDA_CHECK(cudaEventCreateWithFlags(&s->updated, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s->held, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&s->began));  // timed: the copy's own time, beside the training
    CUDA_CHECK(cudaEventCreate(&s->copied));
    s->h_ring = (float *)pinned_alloc(sizeof(float) * (size_t)t->loss_slots);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    CUDA_CHECK(cudaGetDevice(&w->device));
    w->t = t;
    w->cr = cr;
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
        dist_fail(cr->dist, "cannot start the checkpoint writer thread");
    w->started = 1;
}

void checkpoints_drain(trainer *t, checkpoint_restart *cr)
{
    checkpointing *c = &cr->ckpt;
    checkpoint_writer *w = &c->writer;
    if (!w->started) return;
    double t0 = host_now_ms();
    HOST_WAIT(t, TL_RANGE_SLOT_WAIT, "checkpoint busy", writer_idle(cr, 1));  // the last checkpoint complete
    c->fig.end_wait_ms += host_now_ms() - t0;
    writer_check(cr);
    pthread_mutex_lock(&w->lock);
    w->quit = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->started = 0;
}

void checkpoints_teardown(trainer *t, checkpoint_restart *cr)
{
    checkpointing *c = &cr->ckpt;
    snapshot *s = &c->snap;
    if (!c->root) return;
    // rank 0: the words of checkpoints it skipped (every rank has drained: the report's all-gather came after)
    int words = c->mode == CKPT_SNAPSHOT && cr->dist->world > 1 && cr->dist->rank == 0;
    for (long b = c->start; words && b < t->opt.batches; b++)  // auto: any batch
        ckpt_words_clear(&c->words, b, cr->dist->world);
    CUDA_CHECK(cudaEventDestroy(c->params_copied));
    pinned_free(c->image);
    if (c->mode != CKPT_SNAPSHOT) return;
    CUDA_CHECK(cudaStreamDestroy(s->stream));
    CUDA_CHECK(cudaEventDestroy(s->updated));
    CUDA_CHECK(cudaEventDestroy(s->held));
    CUDA_CHECK(cudaEventDestroy(s->began));
    CUDA_CHECK(cudaEventDestroy(s->copied));
    pinned_free(s->h_ring);
    pthread_cond_destroy(&c->writer.wake);
    pthread_mutex_destroy(&c->writer.lock);
}

void checkpoints_settle(checkpoint_restart *cr, int own_too)
{
    checkpointing *c = &cr->ckpt;
    checkpoint_writer *w = &c->writer;
    if (!c->root || c->mode != CKPT_SNAPSHOT) return;  // blocking: every checkpoint before is complete
    if (own_too) CUDA_CHECK(writer_idle(cr, 1));
    pthread_mutex_lock(&w->lock);
    long last = c->snap.last_complete;
    pthread_mutex_unlock(&w->lock);
    if (last < 0) return;
    char path[1300];
    struct stat st;
    ckpt_manifest_file(c->root, last, path, sizeof path);
    // rank 0's writer writes it; a folder this rank alone sees never has it: half the time limit, then
    // on (a wait of the main thread for this writer has the whole)
    double since = host_now_ms();
    while (stat(path, &st) != 0 && host_now_ms() - since < cr->dist->timeout_s * 500) nap(WORD_POLL_NS);
}
