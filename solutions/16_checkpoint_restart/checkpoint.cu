// checkpoint.cu (lesson 16): every --checkpoint-every batches each rank writes its whole state
// (weights, the losses so far, the batch, the seed and the shape; SGD keeps no other state, and
// batch i's data follows from i and the seed) so that a crash at any instant leaves the last
// complete checkpoint readable: each file written whole under a temporary name, flushed to the
// disk, then renamed (exercise 16-atomic); rank 0's manifest, with every file's size and
// checksum, written last. No manifest, no checkpoint: a restart passes over it (resume.cu).
//
// The file is laid out in a pinned image (header, weights, losses, trailer) where the weights land
// from the GPU. This file holds what both ways of taking a checkpoint share (the image, the write,
// the manifest) and the blocking one (--checkpoint-mode blocking): the main thread copies the
// weights, writes, and every rank waits. snapshot.cu holds the other (the default).
#include <errno.h>
#include <signal.h>  // raise, SIGKILL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // fsync, unlink, getpid

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

// A fault of --fault strikes half way through the file: the rank dies (torn), the write fails with
// ENOSPC (a full disk), or the writer stops there while the rank trains on (kill-writing).
static void strike_half_way(checkpoint_restart *cr, long batch)
{
    checkpoints_settle(cr, 0);  // the checkpoints before this one complete: the same resume point every time
    if (fault_now(cr, FAULT_DISK_FULL, batch)) {
        errno = ENOSPC;  // as the kernel answers when the disk is full
        return;
    }
    if (fault_now(cr, FAULT_KILL_WRITING, batch)) writer_mid_file(cr);  // never returns
    stderr_line("%s: killed half way through its checkpoint of batch %ld as asked (--fault torn)", cr->dist->name,
                batch);
    raise(SIGKILL);
}

// Writes `data` in parts, summed as they go (common/recovery's ckpt_write_parts); the faults of
// --fault strike half way. Returns the bytes written, as fwrite does.
static size_t write_bytes(checkpoint_restart *cr, FILE *out, unsigned char *data, size_t size, uint64_t *sum,
                          long batch)
{
    int faulty = fault_now(cr, FAULT_TORN, batch) || fault_now(cr, FAULT_DISK_FULL, batch) ||
                 fault_now(cr, FAULT_KILL_WRITING, batch);
    size_t done = ckpt_write_parts(out, data, size, faulty ? size / 2 : size, sum);
    if (faulty && done == size / 2) strike_half_way(cr, batch);
    return done;
}

// Writes `data` to `path` so that a crash at any instant leaves either the old file (or none)
// or the whole new one, never a part (with `sum`: the file ends with its checksum, see
// write_bytes). 0, or -1 with errno set and no file left behind.
int write_atomically(checkpoint_restart *cr, const char *path, unsigned char *data, size_t size, uint64_t *sum,
                     long batch)
{
    char tmp[1400];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    // BEGIN SOLUTION(16-atomic): write to the temporary name `tmp`, never to `path`: fopen,
    // write_bytes (it writes in parts, sums them when `sum` is given, and injects the faults),
    // fflush, fsync(fileno(...)), fclose (it can fail too: the last buffered bytes, a disk's late
    // error); a call that answers a failure has failed, whatever errno says: keep the errno of the
    // first that failed, taken right after it (EIO when it set none), unlink the temporary file,
    // return -1 with that errno; then rename it to `path` and ckpt_sync_folder(path)
    FILE *out = fopen(tmp, "wb");
    if (!out) return -1;
    int failed = write_bytes(cr, out, data, size, sum, batch) != size || fflush(out) != 0 || fsync(fileno(out)) != 0;
    int err = failed ? errno : 0;
    if (fclose(out) != 0 && !failed) failed = 1, err = errno;
    if (!failed && rename(tmp, path) != 0) failed = 1, err = errno;
    if (failed) {
        unlink(tmp);
        errno = err ? err : EIO;  // a failure that set no errno is still one
        return -1;
    }
    return ckpt_sync_folder(path);
    //| (void)cr, (void)path, (void)data, (void)size, (void)sum, (void)batch, (void)tmp, (void)write_bytes;
    //| return -1;
    // END SOLUTION
}

// ----------------------------------------------------------------------------
// the image: the rank's file, laid out in pinned memory

void image_loss(const trainer *t, checkpoint_restart *cr, long k, double loss)
{
    unsigned char *at = cr->ckpt.image + CKPT_HEADER_BYTES + sizeof(float) * t->model.shape.nparams;
    memcpy(at + sizeof(double) * (size_t)k, &loss, sizeof loss);  // at whatever alignment the weights leave
}

// The rank's file of checkpoint `batch` from the image (header, weights and losses in place):
// its folder made, the file written atomically, its checksum made as it is written. 0, or -1
// with errno.
int write_rank_file(checkpoint_restart *cr, long batch, long long *size, uint64_t *sum)
{
    char folder[1200], path[1300];
    size_t bytes = ckpt_image_header(cr->ckpt.image, cr->dist->rank, batch, &cr->ckpt.run);
    if (!bytes) return errno = EOVERFLOW, -1;
    ckpt_folder(cr->ckpt.root, batch, folder, sizeof folder);
    if (mkdir(folder, 0755) != 0 && errno != EEXIST) return -1;
    ckpt_rank_file(cr->ckpt.root, batch, cr->dist->rank, path, sizeof path);
    *size = (long long)bytes;
    return write_atomically(cr, path, cr->ckpt.image, bytes, sum, batch);
}

// Rank 0, once every rank's file of checkpoint `batch` is written: the manifest (every file's
// size and checksum), written atomically, last; then the folders no restart needs are removed.
// 0, or -1 with why.
int commit_checkpoint(checkpoint_restart *cr, long batch, const long long *sizes, const uint64_t *sums, char *why,
                      size_t why_size)
{
    ckpt_manifest man;
    memset(&man, 0, sizeof man);
    man.batch = batch;
    man.run = cr->ckpt.run;
    for (int r = 0; r < cr->dist->world; r++) {
        man.size[r] = sizes[r];
        man.sum[r] = sums[r];
    }
    char text[CKPT_MAX_RANKS * 64 + 512], path[1300];
    ckpt_manifest_text(&man, text, sizeof text);
    ckpt_manifest_file(cr->ckpt.root, batch, path, sizeof path);
    if (write_atomically(cr, path, (unsigned char *)text, strlen(text), NULL, -1) != 0) {
        snprintf(why, why_size, "cannot write %s: %s; the last complete checkpoint stays where it was", path,
                 strerror(errno));
        return -1;
    }
    // the new folder's entry in the root reaches the disk before older folders leave it: a crash in
    // between keeps the new checkpoint or the old ones, never neither
    ckpt_folder(cr->ckpt.root, batch, path, sizeof path);
    if (ckpt_sync_folder(path) != 0) {  // the folder that holds ROOT/ckpt-B: the root
        snprintf(why, why_size, "cannot flush %s to the disk: %s; no older checkpoint was removed", cr->ckpt.root,
                 strerror(errno));
        return -1;
    }
    checkpointing *c = &cr->ckpt;
    if (c->known_n == CKPT_HELD) memmove(c->known, c->known + 1, sizeof c->known[0] * --c->known_n);
    c->known[c->known_n++] = batch;  // whole: its files' sizes and sums came from the writers that wrote them
    // older ones without a manifest, and beyond the newest two that verify; this run's own are
    // verified by their manifest, never read back (a restart reads everything it resumes from)
    ckpt_prune(c->root, batch, c->known, c->known_n);
    return 0;
}

// ----------------------------------------------------------------------------
// the blocking checkpoint (--checkpoint-mode blocking)

// What each rank tells rank 0 of its file: the manifest lists it.
typedef struct {
    long long size;
    uint64_t sum;
    int ok, err;
} rank_file;

// The state after batch `batch`: the weights copied back once the step is done, the losses
// taken up to it, this rank's file, then (rank 0) the manifest. Training waits throughout.
void checkpoint_save(trainer *t, checkpoint_restart *cr, long batch, long *next_loss)
{
    dist_env *d = cr->dist;
    checkpointing *c = &cr->ckpt;
    double t0 = host_now_ms();
    mlp_model *m = &t->model;
    c->fig.due++;
    // behind batch `batch`'s update and its loss's copy on the compute stream
    CUDA_CHECK(cudaMemcpyAsync(c->image + CKPT_HEADER_BYTES, m->d_params, sizeof(float) * m->shape.nparams,
                               cudaMemcpyDeviceToHost, t->compute_stream));
    CUDA_CHECK(cudaEventRecord(c->params_copied, t->compute_stream));
    HOST_SYNC(t, dist_event_wait(d, c->params_copied));
    for (; *next_loss <= batch; (*next_loss)++) trainer_take_loss(t, *next_loss);  // every copy has landed
    for (long k = 0; k <= batch; k++) image_loss(t, cr, k, t->run.losses[k]);

    double w0 = host_now_ms();
    rank_file mine = {0, 0, 1, 0};
    if (write_rank_file(cr, batch, &mine.size, &mine.sum) != 0) mine.ok = 0, mine.err = errno ? errno : EIO;
    c->fig.last_write_ms = host_now_ms() - w0;  // with rank 0's manifest (below) in its stall
    c->fig.write_ms += c->fig.last_write_ms;
    c->fig.bytes = (size_t)mine.size;
    c->fig.bytes_written += (double)mine.size;

    // one small collective: every rank's file is there (or why not) before the manifest is
    rank_file *all = (rank_file *)host_calloc((size_t)d->world, sizeof(rank_file), "the checkpoint");
    gather(cr, &mine, all, sizeof mine);
    for (int r = 0; r < d->world; r++)
        if (!all[r].ok)
            dist_fail(d,
                      "the checkpoint of batch %ld was not written: rank %d could not write its file (%s); the last "
                      "complete checkpoint stays where it was",
                      batch, r, strerror(all[r].err));
    if (d->rank == 0) {
        long long sizes[CKPT_MAX_RANKS];
        uint64_t sums[CKPT_MAX_RANKS];
        char why[1500];
        for (int r = 0; r < d->world; r++) sizes[r] = all[r].size, sums[r] = all[r].sum;
        if (commit_checkpoint(cr, batch, sizes, sums, why, sizeof why) != 0) dist_fail(d, "%s", why);
    }
    free(all);
    c->fig.written++;
    c->fig.stall_ms += host_now_ms() - t0;
}
