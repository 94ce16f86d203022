// snapshot-host.c: lesson 16's checkpoints (solutions/16_checkpoint_restart/snapshot.cu, writer.cu,
// checkpoint.cu and interval.cu, the real files, built host-only beside this one) driven by a
// training loop of its own, without a GPU: what the writer thread does, and what the main thread
// does with it. The CUDA and NCCL calls are stubbed: a copy lands when it is issued, an event has
// always fired (the order on the device is the GPU checks' to prove). Built by
// tests/16_checkpoint_restart.bats (snapshot_host), under ThreadSanitizer or AddressSanitizer.
//
//   snapshot-host DIR CASE
//     same       one rank: a snapshot run's checkpoint files are the blocking run's, byte for byte
//     busy-wait  a writer slower than a batch: every checkpoint after the first waits for it
//     busy-skip  the same, skipped: due = written + skipped
//     ranks      three ranks (threads of their own, as processes would be): rank 0's manifest waits
//                for every rank's word in the rendezvous folder, each checkpoint whole
//     skip-one   three ranks, rank 2 skips one checkpoint: rank 0 writes no manifest of it
//     disk-full  rank 1's write fails (ENOSPC, --fault disk-full): its main thread stops the run
//                with the writer's message (exit code 1), the writer never exits
//     close-fails, close-fails-blocking
//                one rank; the fclose of its file of checkpoint 11 fails (EIO, what a disk may
//                answer only then): the rank stops saying so, and that checkpoint gets no manifest
//     root-synced one rank, blocking then snapshot: the checkpoint root is flushed (fsync) after each
//                new folder is complete and before an older one is removed
//     interval   auto_interval (interval.cu), CheckFreq's rule, on figures whose answer is known
//     auto       one rank, --checkpoint-every auto: the first checkpoint after AUTO_FIRST batches, then
//                the interval the rule gives for what it cost, each checkpoint that many apart
//     hand-back  rank 0 of two: the image is handed back once its file is written, the manifest
//                waiting for rank 1's word holds none: the next snapshot does not wait
//     no-read-back one rank, blocking then snapshot: rank 0's prune reads none of the rank files
//                this run wrote (it verifies them by their manifest), and still prunes
// Built with -Wl,--wrap=fclose,--wrap=fsync,--wrap=mkdir,--wrap=rmdir,--wrap=open: the calls of the
// lesson's files go through the __wrap_ functions below.
// Exit 0 when the case holds; 1 with the reason.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// the lesson's own header, whole: the four files driven here take its state (checkpoint_restart,
// lesson 12's ddp_state inside) and its options; a header of their pieces alone would be nearly all of it
#include "solutions/16_checkpoint_restart/checkpoint_restart.h"  // defines: checkpoint_restart, checkpoint_save,
                                                                  //          checkpoint_due, auto_interval,
                                                                  //          checkpoints_setup, checkpoints_drain,
                                                                  //          checkpoints_teardown, snapshot_due,
                                                                  //          snapshot_copy, snapshot_hand_over,
                                                                  //          writer_check

#define PARAMS 1000    // weights a rank holds
#define BATCHES 31     // batches a run trains
#define RANKS_MAX 3    // ranks of the cases that have several
#define INTERVAL 10    // lesson 08's: the losses read every 10 batches, one behind
#define LOSS_SLOTS 11  // its ring

// ----------------------------------------------------------------------------
// the calls the checkpoints make, stubbed: a copy lands when it is issued

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind, (void)stream;
    memcpy(dst, src, count);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return (void)event, (void)stream, cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    return (void)stream, (void)event, (void)flags, cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) { return (void)event, cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *event) { return *event = NULL, cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    return (void)flags, *event = NULL, cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) { return (void)event, cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    return (void)flags, *stream = NULL, cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) { return (void)stream, cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return (void)device, cudaSuccess; }
cudaError_t cudaGetDevice(int *device) { return *device = 0, cudaSuccess; }
const char *cudaGetErrorName(cudaError_t error) { return (void)error, "stub"; }
const char *cudaGetErrorString(cudaError_t error) { return (void)error, "stub"; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    return (void)comm, *state = ncclSuccess, ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t result) { return (void)result, "stub"; }

void check_fail(const char *expr, const char *file, int line, const char *name, const char *text)
{
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, expr, name, text);
    exit(EXIT_FAILURE);
}
void check_message(char *buf, size_t size, const char *expr, const char *file, int line, cudaError_t err)
{
    snprintf(buf, size, "%s:%d: %s failed: %d", file, line, expr, (int)err);
}
void *host_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count, size);
    if (!p) fprintf(stderr, "out of memory for %s\n", what), exit(EXIT_FAILURE);
    return p;
}
void *pinned_alloc(size_t bytes) { return host_calloc(1, bytes, "pinned"); }
void pinned_free(void *p) { free(p); }
double host_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
void host_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
double event_ms(cudaEvent_t a, cudaEvent_t b) { return (void)a, (void)b, 0.5; }
void test_delay(trainer *t, delay_target where, cudaStream_t stream) { (void)t, (void)where, (void)stream; }
trace_range trace_begin(tl_range kind, const char *name, int batch)
{
    trace_range r = {kind, name, batch, 0};
    return r;
}
void trace_end(trace_range *r) { (void)r; }
void trace_name_thread(const char *name, tl_track_kind kind) { (void)name, (void)kind; }
void trace_name_stream(cudaStream_t stream, const char *name) { (void)stream, (void)name; }
host_wait host_wait_begin(tl_range kind, const char *name)
{
    host_wait w = {trace_begin(kind, name, -1), host_now_ms()};
    return w;
}
void host_wait_end(trainer *t, host_wait *w) { (void)t, (void)w; }
void trainer_take_loss(trainer *t, long i)
{
    t->run.losses[i] = t->d_loss[i % t->loss_slots];  // the blocking checkpoint has waited: the copy landed
    t->run.taken[i]++;
}

// A rank that stops: its message, and the process ends (exit code 1), as dist_fail ends a rank.
_Noreturn static void stop_rank(dist_env *d, const char *fmt, va_list ap)
{
    char message[1200];
    vsnprintf(message, sizeof message, fmt, ap);
    printf("%s stopped: %s\n", d->name, message);
    fflush(stdout);
    exit(EXIT_FAILURE);
}
void dist_fail(dist_env *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_rank(d, fmt, ap);
}
void dist_abort(dist_env *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stop_rank(d, fmt, ap);
}
dist_waiting dist_waiting_start(const char *what)
{
    dist_waiting w = {host_now_ms(), 0, what, 1};
    return w;
}
int dist_waiting_over(dist_env *d, dist_waiting *w, char *why, size_t size)
{
    if (host_now_ms() - w->since_ms <= d->timeout_s * 1e3) return 0;
    snprintf(why, size, "nothing happened for %.0f s while %s", d->timeout_s, w->what);
    return 1;
}
cudaError_t dist_event_wait(dist_env *d, cudaEvent_t event) { return (void)d, (void)event, cudaSuccess; }
void dist_waiting_watch(dist_env *d, dist_waiting *w)
{
    char why[300];
    if (dist_waiting_over(d, w, why, sizeof why)) dist_abort(d, "%s", why);
}
int dist_fault_now(const dist_env *d, const dist_fault *f, int kind, long batch)
{
    return f->kind == kind && kind != 0 && d->rank == f->rank && batch == f->at_batch && f->attempt == 0;
}
double pinned_copy_gbs(void *h_dst, const void *d_src, size_t bytes, cudaStream_t stream)
{
    (void)stream;
    memcpy(h_dst, d_src, bytes);
    return 1.0;
}
// the blocking checkpoint's all-gather: one rank here, its own part
void gather(checkpoint_restart *cr, const void *mine, void *all, size_t bytes)
{
    (void)cr;
    memcpy(all, mine, bytes);
}

// fclose, wrapped: the close of a file whose path holds `failing_close` fails with EIO (the file
// closed all the same), as a disk's late error or a full quota shows only at the last flush.
static char failing_close[256];
int __real_fclose(FILE *f);
int __wrap_fclose(FILE *f)
{
    char link[64], path[4096] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno(f));
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    int fail = failing_close[0] && strstr(path, failing_close) != NULL;
    int r = __real_fclose(f);
    if (!fail) return r;
    errno = EIO;
    return EOF;
}

// fsync, mkdir and rmdir, wrapped: while `logging`, each call is appended to `calls`, one line
// "fsync|mkdir|rmdir PATH" (fsync: what its descriptor names), in order.
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static char calls[1 << 16];
static size_t calls_at;
static int logging;
static void log_call(const char *what, const char *path)
{
    pthread_mutex_lock(&calls_lock);
    if (logging && calls_at < sizeof calls)
        calls_at += (size_t)snprintf(calls + calls_at, sizeof calls - calls_at, "%s %s\n", what, path);
    pthread_mutex_unlock(&calls_lock);
}
int __real_fsync(int fd);
int __wrap_fsync(int fd)
{
    char link[64], path[4096] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
    log_call("fsync", path);
    return __real_fsync(fd);
}
int __real_mkdir(const char *path, mode_t mode);
int __wrap_mkdir(const char *path, mode_t mode)
{
    log_call("mkdir", path);
    return __real_mkdir(path, mode);
}
int __real_rmdir(const char *path);
int __wrap_rmdir(const char *path)
{
    log_call("rmdir", path);
    return __real_rmdir(path);
}
int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if ((flags & O_ACCMODE) == O_RDONLY) log_call("read", path);
    return __real_open(path, flags, mode);
}

// How many rank files the log says were opened to read; *removed: the folders removed.
static int rank_files_read(int *removed)
{
    int read = 0;
    *removed = 0;
    for (char *line = strtok(calls, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "rmdir ", 6) == 0) (*removed)++;
        if (strncmp(line, "read ", 5) == 0 && strstr(line, "/rank") && strstr(line, ".bin")) {
            if (!read++) printf("read back: %s\n", line + 5);
        }
    }
    return read;
}

// The log's checkpoint folders under `root` (as the lesson names them) removed before `real` (the
// root as the kernel names it) was flushed after the newest folder was made: their count, each
// said; *removed: the folders removed.
static int removed_before_root_synced(const char *root, const char *real, int *removed)
{
    int bad = 0, made = 0;
    size_t n = strlen(root);
    *removed = 0;
    for (char *line = strtok(calls, "\n"); line; line = strtok(NULL, "\n")) {
        const char *path = strchr(line, ' ') + 1;
        int ours = strncmp(path, root, n) == 0 && strncmp(path + n, "/ckpt-", 6) == 0;
        if (strncmp(line, "mkdir ", 6) == 0 && ours) made = 1;
        if (strncmp(line, "fsync ", 6) == 0 && strcmp(path, real) == 0) made = 0;
        if (strncmp(line, "rmdir ", 6) == 0 && ours) {
            (*removed)++;
            if (made) printf("%s removed before %s was flushed after its newest folder was made\n", path, real);
            bad += made;
        }
    }
    return bad;
}

// ----------------------------------------------------------------------------
// a rank: its state, and a training loop shaped as lesson 16's

typedef struct {
    dist_env d;
    trainer t;
    checkpoint_restart cr;
    float params[PARAMS];
    float ring[LOSS_SLOTS];
    double losses[BATCHES];
    int taken[BATCHES];
    int skip_at;        // skip-one: this rank finds its writer busy at this batch's checkpoint
    char ckpt[1100];    // its --checkpoint-dir
    int step_ms;        // auto: a batch takes this long
    long due[BATCHES];  // the batches after which a checkpoint came due
    int ndue;
} rank_state;

static void rank_init(rank_state *r, const char *dir, const char *ckpt, int rank, int world, int mode, int busy,
                      int delay_ms)
{
    memset(r, 0, sizeof *r);
    snprintf(r->ckpt, sizeof r->ckpt, "%s", ckpt);
    r->skip_at = -1;
    dist_env *d = &r->d;
    d->rank = rank, d->world = world, d->timeout_s = 20;
    snprintf(d->name, sizeof d->name, "rank %d", rank);
    snprintf(d->folder, sizeof d->folder, "%s", world > 1 ? dir : "");
    snprintf(d->run, sizeof d->run, "host");
    snprintf(d->fingerprint, sizeof d->fingerprint, "0123456789abcdef");
    trainer *t = &r->t;
    t->opt.batches = BATCHES;
    t->loss_slots = LOSS_SLOTS;
    t->d_loss = r->ring;
    t->run.losses = r->losses;
    t->run.taken = r->taken;
    t->model.shape.nparams = PARAMS;
    t->model.d_params = r->params;
    checkpoint_restart *cr = &r->cr;
    cr->dist = d;
    cr->fault.kind = FAULT_NONE, cr->fault.rank = cr->fault.at_batch = -1;
    checkpointing *c = &cr->ckpt;
    c->root = r->ckpt, c->every = 3, c->mode = mode, c->busy_rule = busy, c->write_delay_ms = delay_ms;
    c->resume_from = -1;
    int dims[3] = {10, 90, 10};
    ckpt_run_init(&c->run, world, dims, 2, PARAMS, 1, 64 * world, 64, 0.02, 5, 1 << 20);
    for (int k = 0; k < PARAMS; k++) r->params[k] = (float)(k % 7) * 0.5f;
}

// Waits until the writer is idle, then marks it busy as a checkpoint in flight would (it has no
// job: it stays asleep), or marks it idle again.
static void claim_writer(checkpoint_writer *w, int claim)
{
    for (;;) {
        pthread_mutex_lock(&w->lock);
        int idle = !w->busy || !claim;
        if (idle) w->busy = claim;
        pthread_mutex_unlock(&w->lock);
        if (idle) return;
        host_sleep_ms(1);
    }
}

// The loop of train.cu, a step being a change of every weight and a loss: the snapshot before the
// update of the batch after its checkpoint, the losses taken every INTERVAL batches, one behind.
static void *train(void *arg)
{
    rank_state *r = (rank_state *)arg;
    trainer *t = &r->t;
    checkpoint_restart *cr = &r->cr;
    checkpointing *c = &cr->ckpt;
    checkpoints_setup(t, cr);
    long next_loss = 0;
    for (long i = 0; i < BATCHES; i++) {
        writer_check(cr);
        if (c->snap.due) {
            snapshot_copy(t, cr);
            snapshot_hand_over(cr);
        }
        for (int k = 0; k < PARAMS; k++) r->params[k] += 0.001f * (float)((i * 31 + k) % 17);  // the update
        r->ring[i % LOSS_SLOTS] = 1.0f / (float)(i + 1);
        if ((i + 1) % INTERVAL == 0 || i == BATCHES - 1) {
            long upto = i == BATCHES - 1 ? i : i - 1;
            for (; next_loss <= upto; next_loss++) trainer_take_loss(t, next_loss);
        }
        if (r->step_ms) host_sleep_ms(r->step_ms);
        if (checkpoint_due(t, cr, i)) {  // interval.cu's, as train.cu calls it
            r->due[r->ndue++] = i;
            if (c->mode == CKPT_BLOCKING)
                checkpoint_save(t, cr, i, &next_loss);
            else if (i == r->skip_at) {  // as if its writer were busy, under --checkpoint-busy skip
                claim_writer(&c->writer, 1);
                c->busy_rule = BUSY_SKIP;
                snapshot_due(t, cr, i, next_loss);
                c->busy_rule = BUSY_WAIT;
                claim_writer(&c->writer, 0);
            } else
                snapshot_due(t, cr, i, next_loss);
        }
    }
    checkpoints_drain(t, cr);
    return NULL;
}

// ----------------------------------------------------------------------------
// the cases

static int failures;
static void expect(int ok, const char *fmt, ...)
{
    if (ok) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    failures++;
}

// 1 when files A and B hold the same bytes
static int same_file(const char *a, const char *b)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

// One rank's run into DIR/NAME, MODE and BUSY, the writer sleeping DELAY ms before each file.
static void one_rank(const char *dir, const char *name, int mode, int busy, int delay, rank_state *r)
{
    char ckpt[1100];
    snprintf(ckpt, sizeof ckpt, "%s/%s", dir, name);
    mkdir(ckpt, 0755);
    rank_init(r, dir, ckpt, 0, 1, mode, busy, delay);
    train(r);
    checkpoints_teardown(&r->t, &r->cr);
}

// The ranks of one run, each a thread as a process would be, into DIR/ck.
static void ranks(const char *dir, rank_state *r, int world, int skip_rank, long skip_at)
{
    char ckpt[1100];
    snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
    mkdir(ckpt, 0755);
    pthread_t th[RANKS_MAX];
    for (int k = 0; k < world; k++) {
        rank_init(&r[k], dir, ckpt, k, world, CKPT_SNAPSHOT, BUSY_WAIT, k == 1 ? 20 : 0);
        if (k == skip_rank) r[k].skip_at = skip_at;
    }
    for (int k = 0; k < world; k++) pthread_create(&th[k], NULL, train, &r[k]);
    for (int k = 0; k < world; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < world; k++) checkpoints_teardown(&r[k].t, &r[k].cr);  // every rank drained first
}

// 1 when `path` is there within `ms`
static int appears(const char *path, int ms)
{
    struct stat st;
    for (int k = 0; k < ms && stat(path, &st) != 0; k++) host_sleep_ms(1);
    return stat(path, &st) == 0;
}

// 1 when the writer gives the image back within `ms`
static int image_free(checkpoint_writer *w, int ms)
{
    for (int k = 0;; k++) {
        pthread_mutex_lock(&w->lock);
        int busy = w->busy;
        pthread_mutex_unlock(&w->lock);
        if (!busy) return 1;
        if (k >= ms) return 0;
        host_sleep_ms(1);
    }
}

// hand-back: rank 0 of two, rank 1 silent until the test speaks for it. Rank 0's writer writes its
// file of checkpoint 2 and then waits for rank 1's word: the image is free meanwhile, so the snapshot
// of checkpoint 5 is taken without waiting (one that waited would give up after the 2 s limit);
// once the words come, both are completed, manifests last.
static void hand_back(const char *dir, rank_state *r)
{
    char ckpt[1100], path[1300];
    snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
    mkdir(ckpt, 0755);
    rank_init(r, dir, ckpt, 0, 2, CKPT_SNAPSHOT, BUSY_WAIT, 0);
    r->d.timeout_s = 2;
    trainer *t = &r->t;
    checkpoint_restart *cr = &r->cr;
    checkpoints_setup(t, cr);
    long batches[2] = {2, 5};
    for (int k = 0; k < 2; k++) {
        snapshot_due(t, cr, batches[k], 0);  // checkpoint 5: while rank 0's writer waits for rank 1's word of 2
        snapshot_copy(t, cr);
        snapshot_hand_over(cr);
        snprintf(path, sizeof path, "%s/ckpt-%08ld/rank0.bin", ckpt, batches[k]);
        if (k == 0)
            expect(appears(path, 10000) && image_free(&cr->ckpt.writer, 5000), "%s: written, the image held", path);
    }
    expect(cr->ckpt.fig.busy_waits == 0, "the snapshot of checkpoint 5 waited for the writer");
    for (int k = 0; k < 2; k++) {  // rank 1's words, as its writer would leave them
        snprintf(path, sizeof path, "%s/checkpoint.host.b%ld.rank1", dir, batches[k]);
        FILE *f = fopen(path, "w");
        fprintf(f, "0123456789abcdef %ld ok 930 0123456789abcdef 0\n", batches[k]);
        fclose(f);
    }
    checkpoints_drain(t, cr);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/ckpt-%08ld/manifest", ckpt, batches[k]);
        expect(appears(path, 0), "%s: no manifest", path);
    }
    expect(cr->ckpt.fig.written == 2, "rank 0: %ld checkpoints complete, 2 expected", cr->ckpt.fig.written);
    checkpoints_teardown(t, cr);
}

// interval: auto_interval, CheckFreq's rule, on figures whose interval is known
static void interval_rule(void)
{
    struct {
        ckpt_cost cost;
        int most, want;
    } rows[] = {
        {{4.6, 0.05, 3.8, 190}, 1000, 62},    // 12's GPU-bound step on one H200: 1.5 x 190 / 4.6 = 61.96
        {{10, 1, 0, 10}, 100, 3},             // the cost rules: 1 / (0.035 x 10) = 2.86, the write 1.5
        {{2, 0, 0, 4}, 100, 3},               // exactly 1.5 x 4 / 2 = 3: no more
        {{100, 0, 0, 1}, 100, 1},             // at least 1
        {{1, 0, 0, 1000}, 100, 100},          // at most the run's batches
        {{0, 1, 1, 1}, 50, 50},               // no step measured: as rarely as the run allows
        {{4.6, 1270, 0, 1200}, 10000, 7889},  // blocking: its stall is the whole write, 1270 / 0.161
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        int got = auto_interval(&rows[k].cost, rows[k].most);
        expect(got == rows[k].want, "row %zu: every %d batches, expected %d", k, got, rows[k].want);
    }
}

// auto: one rank, a batch of 2 ms, a write of 20 ms and more: the first checkpoint after batch 9,
// the interval chosen by the rule from what it cost, every later one that many batches apart.
static void auto_schedule(const char *dir, rank_state *r)
{
    char ckpt[1100];
    snprintf(ckpt, sizeof ckpt, "%s/auto", dir);
    mkdir(ckpt, 0755);
    rank_init(r, dir, ckpt, 0, 1, CKPT_SNAPSHOT, BUSY_WAIT, 20);
    checkpointing *c = &r->cr.ckpt;
    c->every = 0, c->auto_every = 1, r->step_ms = 2;
    train(r);
    checkpoints_teardown(&r->t, &r->cr);
    const ckpt_cost *k = &c->cost;
    printf("auto: every %d batches (step %.2f ms, stall %.3f ms, copy %.3f ms, write %.2f ms)\n", c->every, k->step_ms,
           k->stall_ms, k->copy_ms, k->write_ms);
    expect(r->ndue >= 1 && r->due[0] == AUTO_FIRST - 1, "the first checkpoint after batch %ld",
           r->ndue ? r->due[0] : -1);
    expect(c->every == auto_interval(k, BATCHES) && k->write_ms >= 20 && k->step_ms >= 2,
           "every %d batches, where the rule says %d for what the first cost", c->every, auto_interval(k, BATCHES));
    for (int n = 1; n < r->ndue; n++) {
        expect(r->due[n] == r->due[n - 1] + c->every, "checkpoint %d after batch %ld, expected %ld", n, r->due[n],
               r->due[n - 1] + c->every);
    }
    long last = r->ndue ? r->due[r->ndue - 1] : 0;
    expect(last + c->every >= BATCHES - 1, "none after batch %ld, though %d batches apart fit", last, c->every);
    expect(c->fig.due == r->ndue && c->fig.auto_wait_ms >= 0, "due %ld", c->fig.due);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: snapshot-host DIR same|busy-wait|busy-skip|ranks|skip-one|disk-full|close-fails"
                        "|close-fails-blocking|root-synced|no-read-back|hand-back|interval|auto\n");
        return 2;
    }
    const char *dir = argv[1], *which = argv[2];
    static rank_state r[RANKS_MAX], b;
    char a_path[1300], b_path[1300];
    if (strcmp(which, "same") == 0) {
        one_rank(dir, "blocking", CKPT_BLOCKING, BUSY_WAIT, 0, &b);
        one_rank(dir, "snapshot", CKPT_SNAPSHOT, BUSY_WAIT, 0, &r[0]);
        for (long batch = 26; batch <= 29; batch += 3) {  // the newest two kept: after batches 26 and 29
            for (int f = 0; f < 2; f++) {
                const char *file = f ? "manifest" : "rank0.bin";
                snprintf(a_path, sizeof a_path, "%s/blocking/ckpt-%08ld/%s", dir, batch, file);
                snprintf(b_path, sizeof b_path, "%s/snapshot/ckpt-%08ld/%s", dir, batch, file);
                expect(same_file(a_path, b_path), "%s and %s differ", a_path, b_path);
            }
        }
        ckpt_figures *f = &r[0].cr.ckpt.fig;
        expect(f->due == 10 && f->written == 10, "snapshot: due %ld written %ld", f->due, f->written);
    } else if (strcmp(which, "busy-wait") == 0 || strcmp(which, "busy-skip") == 0) {
        int skip = strcmp(which, "busy-skip") == 0;
        one_rank(dir, "busy", CKPT_SNAPSHOT, skip ? BUSY_SKIP : BUSY_WAIT, 30, &r[0]);
        ckpt_figures *f = &r[0].cr.ckpt.fig;
        printf("due %ld written %ld waits %ld skips %ld\n", f->due, f->written, f->busy_waits, f->busy_skips);
        if (skip)
            expect(f->busy_waits == 0 && f->busy_skips >= 1 && f->written + f->busy_skips == f->due, "skip");
        else
            expect(f->busy_waits == f->due - 1 && f->written == f->due && f->busy_skips == 0, "wait");
    } else if (strcmp(which, "ranks") == 0 || strcmp(which, "skip-one") == 0) {
        int skip = strcmp(which, "skip-one") == 0;
        ranks(dir, r, 3, skip ? 2 : -1, 26);
        ckpt_figures *f = &r[0].cr.ckpt.fig;
        printf("rank 0: due %ld written %ld abandoned %ld\n", f->due, f->written, f->abandoned);
        expect(f->due == 10 && f->written == (skip ? 9 : 10) && f->abandoned == skip, "rank 0's checkpoints");
        snprintf(a_path, sizeof a_path, "%s/ck/ckpt-00000026/manifest", dir);
        struct stat st;
        expect((stat(a_path, &st) == 0) == !skip, "%s: %s", a_path, skip ? "a manifest, rank 2 skipped it" : "none");
        char cmd[1300];
        snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '^checkpoint\\.' >/dev/null", dir);
        expect(system(cmd) != 0, "words left in %s", dir);
    } else if (strcmp(which, "disk-full") == 0) {
        char ckpt[1100];
        snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
        mkdir(ckpt, 0755);
        rank_init(&r[0], dir, ckpt, 1, 2, CKPT_SNAPSHOT, BUSY_WAIT, 0);
        r[0].cr.fault.kind = FAULT_DISK_FULL, r[0].cr.fault.rank = 1, r[0].cr.fault.at_batch = 11;
        // the fault waits for rank 0's manifest of the checkpoint before (rank 0 is not here)
        snprintf(a_path, sizeof a_path, "%s/ckpt-00000008", ckpt);
        mkdir(a_path, 0755);
        snprintf(a_path, sizeof a_path, "%s/ckpt-00000008/manifest", ckpt);
        fclose(fopen(a_path, "w"));
        train(&r[0]);  // exits with code 1, its line on stdout
        expect(0, "rank 1 did not stop");
    } else if (strcmp(which, "close-fails") == 0 || strcmp(which, "close-fails-blocking") == 0) {
        int blocking = strcmp(which, "close-fails-blocking") == 0;
        snprintf(failing_close, sizeof failing_close, "/ck/ckpt-00000011/rank0.bin.");  // its temporary name
        char ckpt[1100];
        snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
        mkdir(ckpt, 0755);
        rank_init(&r[0], dir, ckpt, 0, 1, blocking ? CKPT_BLOCKING : CKPT_SNAPSHOT, BUSY_WAIT, 0);
        train(&r[0]);  // exits with code 1, its line on stdout
        expect(0, "the rank did not stop");
    } else if (strcmp(which, "root-synced") == 0) {
        for (int mode = CKPT_BLOCKING; mode <= CKPT_SNAPSHOT; mode++) {
            const char *name = mode == CKPT_BLOCKING ? "blocking" : "snapshot";
            char root[1100], real[4096];
            snprintf(root, sizeof root, "%s/%s", dir, name);
            calls_at = 0, calls[0] = '\0', logging = 1;
            one_rank(dir, name, mode, BUSY_WAIT, 0, &r[mode]);
            logging = 0;
            expect(realpath(root, real) != NULL, "%s: no such folder", root);
            int removed = 0, bad = removed_before_root_synced(root, real, &removed);
            expect(removed >= 8 && bad == 0, "%s: %d of %d folders removed before the root was flushed", name, bad,
                   removed);
        }
    } else if (strcmp(which, "interval") == 0) {
        interval_rule();
    } else if (strcmp(which, "auto") == 0) {
        auto_schedule(dir, &r[0]);
    } else if (strcmp(which, "hand-back") == 0) {
        hand_back(dir, &r[0]);
    } else if (strcmp(which, "no-read-back") == 0) {
        for (int mode = CKPT_BLOCKING; mode <= CKPT_SNAPSHOT; mode++) {
            const char *name = mode == CKPT_BLOCKING ? "blocking" : "snapshot";
            calls_at = 0, calls[0] = '\0', logging = 1;
            one_rank(dir, name, mode, BUSY_WAIT, 0, &r[mode]);
            logging = 0;
            int removed = 0, read = rank_files_read(&removed);
            expect(removed >= 8 && read == 0, "%s: %d rank files read back, %d folders pruned", name, read, removed);
        }
    } else {
        fprintf(stderr, "snapshot-host: unknown case %s\n", which);
        return 2;
    }
    if (!failures) printf("%s: holds\n", which);
    return failures ? 1 : 0;
}
