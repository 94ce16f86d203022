// data.h: the synthetic dataset the training lessons learn from.
//
// Batch i is a pure function of (seed, i): any thread, in any order, prepares
// the same bits. Each sample is generated, augmented (random gain and shift,
// then `prep_work` rounds of smoothing), normalised to zero mean and unit
// variance, and labelled by a fixed random "teacher": t = tanh(W_t x) + noise.
// The student network can learn the teacher, so the loss falls.
#ifndef COMMON_DATA_H
#define COMMON_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int batch;      // samples per batch
    int in_dim;     // features per sample
    int out_dim;    // targets per sample
    int prep_work;  // smoothing rounds per sample: scales the host's work per batch
    uint64_t seed;
    float *teacher;  // out_dim x in_dim, row-major, fixed by the seed
} dataset;

void dataset_init(dataset *d, int batch, int in_dim, int out_dim, int prep_work, uint64_t seed);
void dataset_free(dataset *d);

// Floats in one prepared batch: batch*in_dim features, then batch*out_dim targets,
// each sample contiguous (column-major in_dim x batch, as cuBLAS reads it).
long dataset_batch_floats(const dataset *d);

// Writes batch i into `out` (dataset_batch_floats floats). Thread-safe.
void dataset_prepare(const dataset *d, long i, float *out);

// Writes samples [first, first + count) of batch i (features, then targets) into
// `out`, the same bits as those samples in dataset_prepare: a shard of the batch.
void dataset_prepare_shard(const dataset *d, long i, int first, int count, float *out);

// A uniform number in [-1, 1) from a 64-bit key: the course's one source of
// randomness (weights and data), so that everything follows from the seed.
float hash_uniform(uint64_t key);
uint64_t hash_mix(uint64_t x);

// FNV-1a over `bytes` bytes, continuing from `h` (start with FNV1A_START): the
// course's checksum of losses and weights.
#define FNV1A_START 0xcbf29ce484222325ull
uint64_t fnv1a(const void *data, size_t bytes, uint64_t h);

#ifdef __cplusplus
}
#endif
#endif
