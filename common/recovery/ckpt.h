// ckpt.h: lesson 16's checkpoints as files: what one holds, how it is checked, and which one a
// restart resumes from; and the writers' words to rank 0 (ckpt_words.c). Host-only C
// (tools/checkpoint-report reads them without a GPU). How a checkpoint is written so that a crash
// at any instant leaves the last complete one readable is the lesson's own
// (solutions/16_checkpoint_restart/checkpoint.cu).
//
//   ROOT/ckpt-00000019/rank0.bin ... rankW-1.bin   every rank's whole state after batch 19
//   ROOT/ckpt-00000019/manifest                     written last, by rank 0, once every rank's
//                                                   file is there: no manifest, no checkpoint
//
// A rank file: a 512-byte text header ("course-checkpoint 3 rank R batch B losses L" and the
// run's fields, "world W shape 64,256,8 params N seed S global-batch G rank-batch b lr X
// prep-work P bucket-bytes K", padded with spaces, a newline last), the N weights (float), the
// L = B + 1 losses taken so far (double), then "checksum HHHHHHHHHHHHHHHH\n": ckpt_sum (below) of
// all that comes before it. The manifest, text:
//   course-checkpoint-manifest 3
//   batch 19
//   world 2                    the run's fields, one a line, in the header's order
//   ...
//   bucket-bytes 26214400
//   rank 0 rank0.bin SIZE CHECKSUM
//   rank 1 rank1.bin SIZE CHECKSUM
//   end
// A file is read as untrusted input: every number is bounded, the sizes its header gives are
// checked against the file's own before anything is allocated, and the checksum is computed
// while the file streams through a small buffer (a check needs no memory of the file's size).
#ifndef COMMON_CKPT_H
#define COMMON_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>  // FILE

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_VERSION 3  // 3: the checksum in lanes (ckpt_sum); 2 was FNV-1a a byte at a time
#define CKPT_HEADER_BYTES 512
#define CKPT_TRAILER_BYTES 26  // "checksum " + 16 hex digits + "\n"
#define CKPT_MAX_RANKS 256
#define CKPT_KEEP 2  // checkpoints that verify kept by ckpt_prune: the newest two

// What makes a run this run: two runs that differ in any of these do not compute the same
// bits, so a checkpoint of one is never resumed by the other. Every rank's file and the
// manifest carry all of them; ckpt_run_differs names the first that differs.
typedef struct {
    int world;               // ranks
    char shape[128];         // every layer's width: "64,256,256,8"
    long long params;        // weights
    int seed;                // --seed: the data and the first weights
    int global_batch;        // --batch: samples per step, every rank together
    int rank_batch;          // samples per rank and step
    double lr;               // --lr
    int prep_work;           // --prep-work: how the host prepares the data
    long long bucket_bytes;  // --bucket-mib: how the gradients are cut for their all-reduces
} ckpt_run;

// The fields of ckpt_run, in the files' order: a mask of them says which to compare.
typedef enum {
    CKPT_WORLD,
    CKPT_SHAPE,
    CKPT_PARAMS,
    CKPT_SEED,
    CKPT_GLOBAL_BATCH,
    CKPT_RANK_BATCH,
    CKPT_LR,
    CKPT_PREP_WORK,
    CKPT_BUCKET_BYTES,
    CKPT_FIELDS
} ckpt_field;
#define CKPT_EVERY_FIELD ((1u << CKPT_FIELDS) - 1)
#define CKPT_FIELD(f) (1u << (f))

typedef struct {
    int rank;
    long long batch;   // the last batch done: a resume starts at batch + 1
    long long losses;  // losses taken so far: always batch + 1
    ckpt_run run;
} ckpt_header;

typedef struct {
    long long batch;
    ckpt_run run;
    long long size[CKPT_MAX_RANKS];
    uint64_t sum[CKPT_MAX_RANKS];
} ckpt_manifest;

// A file's checksum, computed as fast as memory reads (ckpt_sum.c): its bytes as little-endian
// 64-bit words (the last one padded with zeros), word k folded into lane k % CKPT_SUM_LANES by
// FNV-1a's step (h = (h ^ w) * 1099511628211, every lane from 1469598103934665603), then the lanes,
// and the byte count, each as 8 little-endian bytes, folded by FNV-1a a byte at a time. Fed in parts
// of any sizes, the sum is that of the whole.
#define CKPT_SUM_LANES 4
typedef struct {
    uint64_t lane[CKPT_SUM_LANES];
    unsigned long long bytes;                // fed so far
    unsigned char held[8 * CKPT_SUM_LANES];  // the first bytes % 32 of a block not yet whole
} ckpt_sum;
void ckpt_sum_start(ckpt_sum *s);
void ckpt_sum_add(ckpt_sum *s, const void *data, size_t n);
uint64_t ckpt_sum_end(const ckpt_sum *s);
uint64_t ckpt_sum_of(const void *data, size_t n);  // the three at once

// "64,256,256,8" from the widths of layers 0..layers
void ckpt_shape_text(const int *dims, int layers, char *out, size_t size);
// 1 when `text` reads as layer widths ("64,256,8": at least two whole numbers from 1, commas between)
int ckpt_shape_valid(const char *text);

// A run's fields from the lesson's own values (shape from the widths of layers 0..layers).
void ckpt_run_init(ckpt_run *r, int world, const int *dims, int layers, long long params, int seed, int global_batch,
                   int rank_batch, double lr, int prep_work, long long bucket_bytes);

// 0 when `have` (a checkpoint's) and `want` (this run's) agree in every field of `fields`
// (CKPT_EVERY_FIELD, or CKPT_FIELD(CKPT_WORLD) | ...); else 1 and, in `why`, the first that
// differs, named as its option: "was trained with --batch 64, this run has --batch 128".
int ckpt_run_differs(const ckpt_run *have, const ckpt_run *want, unsigned fields, char *why, size_t size);

// The run's fields as "key value" pairs, each followed by `sep` (' ' in a header, '\n' in a
// manifest): the length written, or -1 when it does not fit. And their reading from *p, in that
// order, every value within its bounds: 0 when one is missing or out of them (*p moves past them).
int ckpt_run_write(const ckpt_run *r, char sep, char *out, size_t size);
int ckpt_run_read(char **p, ckpt_run *r);

// 0 when header `h` is rank `rank`'s of checkpoint `batch` of run `run`; else 1 and why.
int ckpt_header_differs(const ckpt_header *h, long long batch, int rank, const ckpt_run *run, char *why, size_t size);

// ROOT/ckpt-%08lld, and ROOT/ckpt-%08lld/rankR.bin, ROOT/ckpt-%08lld/manifest
void ckpt_folder(const char *root, long long batch, char *out, size_t size);
void ckpt_rank_file(const char *root, long long batch, int rank, char *out, size_t size);
void ckpt_manifest_file(const char *root, long long batch, char *out, size_t size);

// A rank's state as the bytes of its file (malloc'd; free it): header, weights, losses, trailer.
// NULL when the header does not fit or memory is short.
unsigned char *ckpt_encode(const ckpt_header *h, const float *params, const double *losses, size_t *size,
                           uint64_t *sum);
// The same file in parts, for a writer that lays it out itself (lesson 16's snapshot: the weights
// land from the GPU straight into its place): the header's CKPT_HEADER_BYTES bytes (0, or -1 when
// they do not fit), the trailer's CKPT_TRAILER_BYTES bytes for a checksum `sum` of every byte
// before it (neither NUL-terminated), and the whole file's size.
int ckpt_header_text(const ckpt_header *h, char *out);
void ckpt_trailer_text(uint64_t sum, char *out);
size_t ckpt_file_bytes(const ckpt_header *h);
// Rank `rank`'s header of the checkpoint of `batch` in its place at the start of `image` (a rank
// file laid out in memory): the file's size, or 0 when the header does not fit (it always does:
// every field of the run is bounded).
size_t ckpt_image_header(unsigned char *image, int rank, long long batch, const ckpt_run *run);
// Writes the first `stop` of the `size` bytes of `data` (size: all) to `out` in parts of 8 MiB,
// each handed to the disk at once (sync_file_range, a hint), so that the disk writes one part while
// the CPU sums the next. With `sum`, the last CKPT_TRAILER_BYTES of them are the file's trailer:
// every byte before it is summed as it is written, the trailer made from the sum and written last,
// and *sum receives it. Returns the bytes written, as fwrite does.
size_t ckpt_write_parts(FILE *out, unsigned char *data, size_t size, size_t stop, uint64_t *sum);

// Reads and checks a rank file; on success 0, the header, and (when not NULL) malloc'd copies
// of the weights and losses. -1 and one line in `why`: missing, torn (shorter than its header
// says), longer than its header says, corrupt (its checksum does not match), not a checkpoint
// (a header that does not read, a number out of its bounds, losses other than batch + 1).
int ckpt_read_rank(const char *path, ckpt_header *h, float **params, double **losses, char *why, size_t size);

// The manifest's text (a newline last), and its reading: 0, or -1 with `why`.
void ckpt_manifest_text(const ckpt_manifest *m, char *out, size_t size);
int ckpt_read_manifest(const char *path, ckpt_manifest *m, char *why, size_t size);

// Checks checkpoint `batch` under root whole: its manifest, every rank's file (size, checksum,
// header against the manifest). 0, or -1 with why.
int ckpt_check(const char *root, long long batch, ckpt_manifest *m, char *why, size_t size);

// The batches of the checkpoint folders under root, newest first, however many: *batches is
// malloc'd (free it). Their count, or -1 with errno when root cannot be read.
int ckpt_list(const char *root, long long **batches);

// The newest complete checkpoint under root: its batch (and manifest), or -1 when none. Each
// newer folder skipped is reported through skipped(ctx, batch, why) when it is not NULL: a torn
// or corrupt checkpoint is passed over for the one before it.
long long ckpt_latest(const char *root, ckpt_manifest *m, void (*skipped)(void *ctx, long long batch, const char *why),
                      void *ctx);

// The `max` newest complete checkpoints under root, newest first: their batches into out[] and
// their manifests into manifests[] (each of max elements). Each newer folder skipped, and each
// between two found, is reported as ckpt_latest reports it. Returns how many it found.
int ckpt_complete(const char *root, long long *out, ckpt_manifest *manifests, int max,
                  void (*skipped)(void *ctx, long long batch, const char *why), void *ctx);

// Once checkpoint `newest` is complete (its manifest written): removes the folders of older
// checkpoints that no restart needs: those without a manifest (their ranks died before rank 0
// wrote it), and those older than the CKPT_KEEP newest that verify (ckpt_check: the manifest and
// every rank's file, sizes and checksums). A checkpoint whose manifest is there but does not
// verify now (a bad block, memory short) stays until CKPT_KEEP newer ones verify: a failed re-read
// never costs the last good one. Never `newest`, never a newer one (an earlier attempt's), and
// never through a symbolic link: an entry of root that is a link is left alone, and a folder's
// entries are removed, never what a link among them points to. A folder older than the CKPT_KEEP
// newest that verify is removed without being read. The checkpoints of known[] (nknown of them:
// this run wrote them, every file's size and sum handed to rank 0 by its writer, or its start
// verified them) count as verifying by their manifest alone: it reads and names the batch, and every
// rank's file has the size it lists (stat); no file of theirs is read back. A restart verifies
// everything it resumes from anyway. (NULL, 0: every one is verified, as checkpoint-report --prune
// does.) Returns how many folders it removed.
int ckpt_prune(const char *root, long long newest, const long long *known, int nknown);

// Flushes to the disk the folder that holds `path` (its entries: a renamed file's new name reaches
// the disk only so). 0, or -1 with errno (EIO where fsync set none).
int ckpt_sync_folder(const char *path);

// Where a restart resumes (ckpt_resume.c). The CKPT_HELD newest complete checkpoints under root,
// newest first, into held[]: how many, or -1 with why when one is another run's (any field of `run`
// differs: why names it) or lies at or past the run's last batch (its losses would not fit, and
// nothing would be left to train). Each folder passed over is reported as ckpt_latest reports it.
#define CKPT_HELD 8
int ckpt_resumable(const char *root, const ckpt_run *run, int batches, long long *held,
                   void (*skipped)(void *ctx, long long batch, const char *why), void *ctx, char *why, size_t size);
// What one rank holds, as the others see it (one all-gather of these): its newest complete
// checkpoints, newest first.
typedef struct {
    long long batch[CKPT_HELD];
    int n, pad;
} ckpt_held;
// Over every rank's (all[world]): the newest checkpoint every rank holds, or -1 when none is; *any 1
// when some rank holds one, *alike 1 when every rank's newest is the same; `newest` what each holds
// ("rank 0: batch 24, rank 1: none"), for the messages.
long long ckpt_agree(const ckpt_held *all, int world, int *any, int *alike, char *newest, size_t size);

// The writers' words (ckpt_words.c): each rank's checkpoint writer tells rank 0's what it did with
// checkpoint B in a small file of the rendezvous folder, FOLDER/checkpoint.RUN.bB.rankR, a line
// "FINGERPRINT B WHAT SIZE SUM ERRNO": "ok" with its file's size and checksum, "failed" with the
// error, or "skipped". The writers call no NCCL: a collective from a second thread would pair with
// the training's calls in any order. The fingerprint (the run's NCCL id, hashed) makes a word of
// another run of the same id never read as this one's.
typedef struct {
    const char *folder, *run, *fingerprint;  // the rendezvous folder, the run's id, its fingerprint
} ckpt_words;
typedef struct {
    char what[16];  // ok, failed, skipped
    long long size;
    uint64_t sum;
    int err;
} ckpt_word;
// Says rank `rank`'s word of checkpoint `batch` (written whole under a temporary name, then renamed).
void ckpt_word_say(const ckpt_words *w, long long batch, int rank, const ckpt_word *word);
// Rank `rank`'s word of checkpoint `batch`: 1 when there is one of this run (never blocking on a
// named pipe), else 0.
int ckpt_word_read(const ckpt_words *w, long long batch, int rank, ckpt_word *word);
// Removes the words of ranks 1 to world - 1 of checkpoint `batch` (rank 0, once it has read them).
void ckpt_words_clear(const ckpt_words *w, long long batch, int world);

#ifdef __cplusplus
}
#endif
#endif
