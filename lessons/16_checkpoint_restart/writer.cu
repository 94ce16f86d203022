// STUDENT VERSION of solutions/16_checkpoint_restart/writer.cu, made by `make lessons` (checksum 2384995052)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, resume.cu, snapshot.cu.
// writer.cu (lesson 16): the checkpoint writer thread of the snapshot (snapshot.cu). It waits for
// the snapshot's copy (polled on its own thread), writes the losses the copy brought into the image,
// writes the rank's file (write_atomically, as the blocking checkpoint does), leaves a word in the
// rendezvous folder for rank 0 (common/recovery/ckpt.h's words), and gives the image back. Then,
// holding no image, rank 0's writer waits for every rank's word, writes the manifest, last, and
// prunes: the next snapshot waits for the file's write alone. The threads call no NCCL.
// A writer that fails never exits: it keeps its message for the main thread (writer_check).
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>    // nanosleep
#include <unistd.h>  // pause

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

// A short sleep between two polls: the writer's, of its copy and of the words; the main thread's,
// of the writer.
void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

// What this rank's writer did with checkpoint `batch`, for rank 0's (common/recovery/ckpt.h's words).
void say_word(checkpoint_restart *cr, long batch, const char *what, long long size, uint64_t sum, int err)
{
    ckpt_word word = {"", size, sum, err};
    snprintf(word.what, sizeof word.what, "%s", what);
    ckpt_word_say(&cr->ckpt.words, batch, cr->dist->rank, &word);
}

// ----------------------------------------------------------------------------
// the writer thread

// The writer waits for the snapshot's copy, polled: a stop of the run (quit) ends the wait.
// 0, or -1 with CUDA's message in `why`.
static int wait_for_copy(checkpoint_restart *cr, char *why, size_t size)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    for (;;) {
        cudaError_t state = cudaEventQuery(cr->ckpt.snap.copied);
        if (state == cudaSuccess) return 0;
        if (state != cudaErrorNotReady) {  // CUDA_CHECK's message, without its exit(): the main thread says it
            check_message(why, size, "waiting for the snapshot's copy (the checkpoint writer)", __FILE__, __LINE__,
                          state);
            return -1;
        }
        pthread_mutex_lock(&w->lock);
        int quit = w->quit;
        pthread_mutex_unlock(&w->lock);
        if (quit) {
            snprintf(why, size, "the run stopped before the snapshot's copy landed");
            return -1;
        }
        nap(50000);
    }
}

// Rank 0's writer: every other rank's word of checkpoint `batch`, into sizes[] and sums[]. 1 when
// every rank wrote its file, 0 when one skipped it (no manifest: the checkpoint is abandoned), -1
// with why when one failed, or said nothing for --timeout-s.
static int gather_words(checkpoint_restart *cr, long batch, long long *sizes, uint64_t *sums, char *why, size_t size)
{
    dist_env *d = cr->dist;
    double since = host_now_ms();
    for (int r = 1; r < d->world; r++) {
        ckpt_word word;
        while (!ckpt_word_read(&cr->ckpt.words, batch, r, &word)) {
            pthread_mutex_lock(&cr->ckpt.writer.lock);
            int quit = cr->ckpt.writer.quit;
            pthread_mutex_unlock(&cr->ckpt.writer.lock);
            if (quit || host_now_ms() - since > d->timeout_s * 1e3) {
                snprintf(why, size,
                         "the checkpoint of batch %ld was not written: no word from rank %d of its file after %.0f s",
                         batch, r, (host_now_ms() - since) / 1e3);
                return -1;
            }
            nap(WORD_POLL_NS);
        }
        sizes[r] = word.size, sums[r] = word.sum;
        if (strcmp(word.what, "skipped") == 0) return 0;
        if (strcmp(word.what, "ok") != 0) {
            snprintf(why, size,
                     "the checkpoint of batch %ld was not written: rank %d could not write its file (%s); the last "
                     "complete checkpoint stays where it was",
                     batch, r, strerror(word.err));
            return -1;
        }
    }
    return 1;
}

// A checkpoint's first stage, on the writer thread: the copy waited for, the file laid out around the
// weights and written, the word said; its size and sum into sizes[] and sums[] (this rank's). The
// image is free once it returns. 1 when the file is written, -1 with why.
static int write_file(trainer *t, checkpoint_restart *cr, long batch, long next_loss, long long *sizes, uint64_t *sums,
                      char *why, size_t size)
{
    checkpointing *c = &cr->ckpt;
    snapshot *s = &c->snap;
    dist_env *d = cr->dist;
    if (wait_for_copy(cr, why, size) != 0) return -1;
    c->fig.copy_ms += event_ms(s->began, s->copied);
    c->fig.copies++;
    trace_range range = trace_begin(TL_RANGE_OTHER, "write", (int)batch);
    double t0 = host_now_ms();
    for (long k = next_loss; k <= batch; k++) image_loss(t, cr, k, s->h_ring[k % t->loss_slots]);  // not yet taken
    if (c->write_delay_ms > 0) host_sleep_ms(c->write_delay_ms);  // a test delay: a checkpoint that stays busy
    // a failure is what the call answers, never what errno happens to hold (0 after some failures)
    int failed = write_rank_file(cr, batch, &sizes[d->rank], &sums[d->rank]) != 0, err = failed ? errno : 0;
    if (failed && !err) err = EIO;
    c->fig.last_write_ms = host_now_ms() - t0;
    c->fig.write_ms += c->fig.last_write_ms;
    c->fig.bytes = (size_t)sizes[d->rank];
    c->fig.bytes_written += (double)sizes[d->rank];
    trace_end(&range);
    if (d->world > 1 && d->rank != 0) say_word(cr, batch, failed ? "failed" : "ok", sizes[d->rank], sums[d->rank], err);
    if (failed) {
        snprintf(why, size,
                 "the checkpoint of batch %ld was not written: rank %d could not write its file (%s); the last "
                 "complete checkpoint stays where it was",
                 batch, d->rank, strerror(err));
        return -1;
    }
    if (d->rank != 0) c->fig.written++;  // its file: the manifest is rank 0's (checkpoints_settle looks for it)
    return 1;
}

// Rank 0's second stage, holding no image: every other rank's word, then the manifest and the prune
// (commit_checkpoint). 1 when the checkpoint is complete, 0 when another rank skipped it, -1 with why.
static int commit_stage(checkpoint_restart *cr, long batch, long long *sizes, uint64_t *sums, char *why, size_t size)
{
    checkpointing *c = &cr->ckpt;
    trace_range range = trace_begin(TL_RANGE_OTHER, "commit", (int)batch);
    double t0 = host_now_ms();
    int every = gather_words(cr, batch, sizes, sums, why, size);
    if (every == 0) c->fig.abandoned++;  // another rank skipped it: no manifest, ckpt_prune removes the folder later
    int done = every > 0 && commit_checkpoint(cr, batch, sizes, sums, why, size) != 0 ? -1 : every;
    if (every >= 0) ckpt_words_clear(&cr->ckpt.words, batch, cr->dist->world);
    if (done > 0) c->fig.written++;
    c->fig.last_commit_ms = host_now_ms() - t0;
    c->fig.commit_ms += c->fig.last_commit_ms;
    trace_end(&range);
    return done;
}

// A stage ended, under the writer's lock: its failure kept for the main thread, the checkpoint
// complete (a rank's file; rank 0's manifest), and what it held given back: the image after the
// first stage (rank 0 then holds the commit until its second ends), the commit after the second.
static void stage_over(checkpoint_writer *w, int done, long batch, int first, int commit, const char *why)
{
    pthread_mutex_lock(&w->lock);
    if (done < 0 && !w->error[0]) snprintf(w->error, sizeof w->error, "%s", why);
    if (done > 0 && !commit) w->cr->ckpt.snap.last_complete = batch;
    if (first) w->busy = 0;  // the image is free: the next snapshot may land in it
    w->committing = commit;
    pthread_mutex_unlock(&w->lock);
}

void *writer_main(void *arg)
{
    checkpoint_writer *w = (checkpoint_writer *)arg;
    trainer *t = w->t;
    checkpoint_restart *cr = w->cr;
    trace_name_thread("checkpoint writer", TL_TRACK_THREAD);
    char why[sizeof w->error];
    cudaError_t set = cudaSetDevice(w->device);  // a thread starts on device 0: the rank's own, for its events
    if (set != cudaSuccess)
        check_message(why, sizeof why, "cudaSetDevice (the checkpoint writer)", __FILE__, __LINE__, set);
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (!w->job && !w->quit) pthread_cond_wait(&w->wake, &w->lock);
        if (!w->job) {
            pthread_mutex_unlock(&w->lock);
            break;
        }
        long batch = w->batch, next_loss = w->next_loss;
        w->job = 0;
        pthread_mutex_unlock(&w->lock);
        long long sizes[CKPT_MAX_RANKS] = {0};
        uint64_t sums[CKPT_MAX_RANKS] = {0};
        int done = set == cudaSuccess ? write_file(t, cr, batch, next_loss, sizes, sums, why, sizeof why) : -1;
        int commit = done > 0 && cr->dist->rank == 0;
        stage_over(w, done, batch, 1, commit, why);
        if (commit) stage_over(w, commit_stage(cr, batch, sizes, sums, why, sizeof why), batch, 0, 0, why);
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// --fault kill-writing: the writer stops half way through its file

void writer_mid_file(checkpoint_restart *cr)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    stderr_line("%s: its checkpoint writer stops half way through the checkpoint of batch %ld as asked "
                "(--fault kill-writing)",
                cr->dist->name, (long)cr->fault.at_batch);
    pthread_mutex_lock(&w->lock);
    w->mid_file = 1;
    pthread_mutex_unlock(&w->lock);
    for (;;) pause();  // until the rank is killed
}

void wait_writer_mid_file(checkpoint_restart *cr)
{
    checkpoint_writer *w = &cr->ckpt.writer;
    double since = host_now_ms();
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int there = w->mid_file;
        pthread_mutex_unlock(&w->lock);
        if (there || host_now_ms() - since > cr->dist->timeout_s * 1e3) return;
        nap(WORD_POLL_NS);
    }
}
