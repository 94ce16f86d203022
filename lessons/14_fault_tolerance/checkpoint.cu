// STUDENT VERSION of solutions/14_fault_tolerance/checkpoint.cu, made by `make lessons` (checksum 3932854074)
// Fill in its 1 TODO.
// checkpoint.cu (lesson 14): every --checkpoint-every batches each rank writes its whole state
// (weights, the losses so far, the batch, the seed and the shape; SGD keeps no other state, and
// batch i's data follows from i and the seed) so that a crash at any instant leaves the last
// complete checkpoint readable: each file written whole under a temporary name, flushed to the
// disk, then renamed (exercise 14-atomic); rank 0's manifest, with every file's size and
// checksum, written last. No manifest, no checkpoint: a restart passes over it (resume.cu).
#include <errno.h>
#include <fcntl.h>   // open: a folder, to flush a rename in it
#include <signal.h>  // raise, SIGKILL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // fsync, unlink, rmdir, getpid

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

// The folder's own entry of a renamed file reaches the disk only when the folder is flushed.
static int sync_folder(const char *path)
{
    char folder[1200];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = '\0';
    int fd = open(slash ? folder : ".", O_RDONLY);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

// Writes `size` bytes, with the faults of --fault: the rank dies half way (torn), or the write
// fails half way with ENOSPC (a full disk). Returns what fwrite returns.
static size_t write_bytes(fault_tolerance *ft, FILE *out, const void *data, size_t size, long batch)
{
    int torn = fault_now(ft, FAULT_TORN, batch), full = fault_now(ft, FAULT_DISK_FULL, batch);
    if (!torn && !full) return fwrite(data, 1, size, out);
    size_t half = fwrite(data, 1, size / 2, out);
    fflush(out);
    if (torn) {
        fprintf(stderr, "%s: killed half way through its checkpoint of batch %ld as asked (--fault torn)\n",
                ft->dist->name, batch);
        fflush(stderr);
        raise(SIGKILL);
    }
    errno = ENOSPC;  // --fault disk-full: as the kernel answers when the disk is full
    return half;
}

// Writes `data` to `path` so that a crash at any instant leaves either the old file (or none)
// or the whole new one, never a part. 0, or -1 with errno set and no file left behind.
int write_atomically(fault_tolerance *ft, const char *path, const void *data, size_t size, long batch)
{
    char tmp[1400];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    // TODO(14-atomic): write to the temporary name `tmp`, never to `path`: fopen,
    // write_bytes (it injects the faults), fflush, fsync(fileno(...)), fclose; any failure: unlink
    // the temporary file, keep errno, return -1; then rename it to `path` and sync_folder(path)
    (void)ft, (void)path, (void)data, (void)size, (void)batch, (void)tmp, (void)write_bytes, (void)sync_folder;
    return -1;
}

// What each rank tells rank 0 of its file: the manifest lists it.
typedef struct {
    long long size;
    uint64_t sum;
    int ok, err;
} rank_file;

// The state after batch `batch`: the weights copied back once the step is done, the losses
// taken up to it, this rank's file, then (rank 0) the manifest.
void checkpoint_save(trainer *t, fault_tolerance *ft, long batch, long *next_loss)
{
    dist_env *d = ft->dist;
    double t0 = host_now_ms();
    mlp_model *m = &t->model;
    // behind batch `batch`'s update and its loss's copy on the compute stream
    CUDA_CHECK(cudaMemcpyAsync(ft->ckpt.h_params, m->d_params, sizeof(float) * m->shape.nparams, cudaMemcpyDeviceToHost,
                               t->compute_stream));
    CUDA_CHECK(cudaEventRecord(ft->ckpt.params_copied, t->compute_stream));
    HOST_SYNC(t, dist_event_wait(d, ft->ckpt.params_copied));
    for (; *next_loss <= batch; (*next_loss)++) trainer_take_loss(t, *next_loss);  // every copy has landed

    char folder[1200], path[1300];
    ckpt_folder(ft->ckpt.root, batch, folder, sizeof folder);
    if (mkdir(folder, 0755) != 0 && errno != EEXIST) dist_fail(d, "cannot make %s: %s", folder, strerror(errno));
    ckpt_header h;
    memset(&h, 0, sizeof h);
    h.rank = d->rank;
    h.batch = batch;
    h.losses = batch + 1;
    h.run = ft->ckpt.run;
    size_t size = 0;
    uint64_t sum = 0;
    unsigned char *bytes = ckpt_encode(&h, ft->ckpt.h_params, t->run.losses, &size, &sum);
    if (!bytes) dist_fail(d, "out of memory for the checkpoint of batch %ld", batch);
    ckpt_rank_file(ft->ckpt.root, batch, d->rank, path, sizeof path);
    rank_file mine = {(long long)size, sum, 1, 0};
    if (write_atomically(ft, path, bytes, size, batch) != 0) mine.ok = 0, mine.err = errno;

    // one small collective: every rank's file is there (or why not) before the manifest is
    rank_file *all = (rank_file *)host_calloc((size_t)d->world, sizeof(rank_file), "the checkpoint");
    recorder_allgather(&ft->rec, d, batch, &mine, all, sizeof mine, ft->dp.comm_stream, "comm");
    for (int r = 0; r < d->world; r++)
        if (!all[r].ok)
            dist_fail(d,
                      "the checkpoint of batch %ld was not written: rank %d could not write its file (%s); the last "
                      "complete checkpoint stays where it was",
                      batch, r, strerror(all[r].err));
    if (d->rank == 0) {
        ckpt_manifest man;
        memset(&man, 0, sizeof man);
        man.batch = batch;
        man.run = ft->ckpt.run;
        for (int r = 0; r < d->world; r++) {
            man.size[r] = all[r].size;
            man.sum[r] = all[r].sum;
        }
        char text[CKPT_MAX_RANKS * 64 + 512];
        ckpt_manifest_text(&man, text, sizeof text);
        ckpt_manifest_file(ft->ckpt.root, batch, path, sizeof path);
        if (write_atomically(ft, path, text, strlen(text), -1) != 0)
            dist_fail(d, "cannot write %s: %s; the last complete checkpoint stays where it was", path, strerror(errno));
        ckpt_prune(ft->ckpt.root, batch);  // older ones without a manifest, and beyond the newest two that verify
    }
    free(bytes);
    free(all);
    ft->ckpt.written++;
    ft->ckpt.ms += host_now_ms() - t0;
    ft->ckpt.bytes = size;
}
