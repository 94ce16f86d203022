// ckpt.h: lesson 14's checkpoints as files: what one holds, how it is checked, and which one a
// restart resumes from. Host-only C (tools/checkpoint-report reads them without a GPU). How a
// checkpoint is written so that a crash at any instant leaves the last complete one readable
// is the lesson's own (solutions/14_fault_tolerance/checkpoint.cu).
//
//   ROOT/ckpt-00000019/rank0.bin ... rankW-1.bin   every rank's whole state after batch 19
//   ROOT/ckpt-00000019/manifest                     written last, by rank 0, once every rank's
//                                                   file is there: no manifest, no checkpoint
//
// A rank file: a 256-byte text header ("course-checkpoint 1 rank R world W batch B params N
// losses L shape 64,256,8 seed S", padded with spaces, a newline last), the N weights (float),
// the L losses taken so far (double), then "checksum HHHHHHHHHHHHHHHH\n": FNV-1a 64 of all
// that comes before it. The manifest, text:
//   course-checkpoint-manifest 1
//   batch 19
//   world 2
//   shape 64,256,8
//   params 18696
//   seed 1
//   rank 0 rank0.bin SIZE CHECKSUM
//   rank 1 rank1.bin SIZE CHECKSUM
//   end
#ifndef COMMON_CKPT_H
#define COMMON_CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_HEADER_BYTES 256
#define CKPT_TRAILER_BYTES 26  // "checksum " + 16 hex digits + "\n"
#define CKPT_MAX_RANKS 256
#define CKPT_KEEP 2  // complete checkpoints kept: the newest and the one before it

typedef struct {
    int rank, world;
    long long batch;   // the last batch done: a resume starts at batch + 1
    long long params;  // weights
    long long losses;  // losses taken so far (batch + 1)
    char shape[128];   // "64,256,256,8": every layer's width
    int seed;
} ckpt_header;

typedef struct {
    long long batch;
    int world;
    char shape[128];
    long long params;
    int seed;
    long long size[CKPT_MAX_RANKS];
    uint64_t sum[CKPT_MAX_RANKS];
} ckpt_manifest;

uint64_t ckpt_fnv1a(uint64_t h, const void *data, size_t bytes);  // start with CKPT_FNV_START
#define CKPT_FNV_START 1469598103934665603ULL

// "64,256,256,8" from the widths of layers 0..layers
void ckpt_shape_text(const int *dims, int layers, char *out, size_t size);

// ROOT/ckpt-%08lld, and ROOT/ckpt-%08lld/rankR.bin, ROOT/ckpt-%08lld/manifest
void ckpt_folder(const char *root, long long batch, char *out, size_t size);
void ckpt_rank_file(const char *root, long long batch, int rank, char *out, size_t size);
void ckpt_manifest_file(const char *root, long long batch, char *out, size_t size);

// A rank's state as the bytes of its file (malloc'd; free it): header, weights, losses, trailer.
unsigned char *ckpt_encode(const ckpt_header *h, const float *params, const double *losses, size_t *size,
                           uint64_t *sum);

// Reads and checks a rank file whole; on success 0, the header, and (when not NULL) malloc'd
// copies of the weights and losses. -1 and one line in `why`: missing, torn (shorter than its
// header says), corrupt (its checksum does not match), not a checkpoint.
int ckpt_read_rank(const char *path, ckpt_header *h, float **params, double **losses, char *why, size_t size);

// The manifest's text (a newline last), and its reading: 0, or -1 with `why`.
void ckpt_manifest_text(const ckpt_manifest *m, char *out, size_t size);
int ckpt_read_manifest(const char *path, ckpt_manifest *m, char *why, size_t size);

// Checks checkpoint `batch` under root whole: its manifest, every rank's file (size, checksum,
// header against the manifest). 0, or -1 with why.
int ckpt_check(const char *root, long long batch, ckpt_manifest *m, char *why, size_t size);

// The batches of the checkpoint folders under root, newest first (at most max); how many.
int ckpt_list(const char *root, long long *batches, int max);

// The newest complete checkpoint under root: its batch (and manifest), or -1 when none. Each
// newer folder skipped is reported through skipped(ctx, batch, why) when it is not NULL: a torn
// or corrupt checkpoint is passed over for the one before it.
long long ckpt_latest(const char *root, ckpt_manifest *m, void (*skipped)(void *ctx, long long batch, const char *why),
                      void *ctx);

#ifdef __cplusplus
}
#endif
#endif
