// data.c: preparing a batch on the host, the work the GPU must not wait for.
#include "common/model/data.h"

#include "common/gpu/memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN_DIM 65536

uint64_t hash_mix(uint64_t z)  // splitmix64's finaliser
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float hash_uniform(uint64_t key) { return (float)(hash_mix(key) >> 40) * (2.0f / 16777216.0f) - 1.0f; }

void dataset_init(dataset *d, int batch, int in_dim, int out_dim, int prep_work, uint64_t seed)
{
    d->batch = batch;
    d->in_dim = in_dim;
    d->out_dim = out_dim;
    d->prep_work = prep_work;
    d->seed = seed;
    d->teacher = host_alloc(sizeof(float) * (size_t)out_dim * in_dim, "the teacher's weights (--out x --in)");
    float scale = sqrtf(3.0f / in_dim);  // unit variance of W_t x for unit-variance x
    uint64_t base = hash_mix(seed ^ 0x7EAC4E5ull);
    for (long k = 0; k < (long)out_dim * in_dim; k++) d->teacher[k] = scale * hash_uniform(base + k);
}

void dataset_free(dataset *d)
{
    free(d->teacher);
    d->teacher = NULL;
}

long dataset_batch_floats(const dataset *d) { return (long)d->batch * (d->in_dim + d->out_dim); }

static void prepare_sample(const dataset *d, uint64_t key, float *x, float *t, float *tmp)
{
    int n = d->in_dim;
    // generate
    for (int k = 0; k < n; k++) tmp[k] = hash_uniform(key + 1 + (uint64_t)k);
    // augment: a random gain and circular shift, then rounds of 3-tap smoothing
    float gain = 1.0f + 0.25f * hash_uniform(key ^ 0xA11CEull);
    int shift = (int)(hash_mix(key ^ 0x5A1F7ull) % (uint64_t)n);
    for (int k = 0; k < n; k++) x[k] = gain * tmp[(k + shift) % n];
    for (int r = 0; r < d->prep_work; r++) {
        for (int k = 0; k < n; k++) tmp[k] = x[k];
        for (int k = 0; k < n; k++)
            x[k] = 0.25f * tmp[k == 0 ? n - 1 : k - 1] + 0.5f * tmp[k] + 0.25f * tmp[k == n - 1 ? 0 : k + 1];
    }
    // normalise
    double mean = 0, var = 0;
    for (int k = 0; k < n; k++) mean += x[k];
    mean /= n;
    for (int k = 0; k < n; k++) var += (x[k] - mean) * (x[k] - mean);
    float inv_std = (float)(1.0 / sqrt(var / n + 1e-12));
    for (int k = 0; k < n; k++) x[k] = (float)(x[k] - mean) * inv_std;
    // label with the teacher (four partial sums: one long chain of dependent adds
    // would make this the slowest part of the preparation)
    for (int o = 0; o < d->out_dim; o++) {
        const float *w = d->teacher + (size_t)o * n;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int k = 0;
        for (; k + 4 <= n; k += 4) {
            s0 += w[k] * x[k];
            s1 += w[k + 1] * x[k + 1];
            s2 += w[k + 2] * x[k + 2];
            s3 += w[k + 3] * x[k + 3];
        }
        for (; k < n; k++) s0 += w[k] * x[k];
        t[o] = tanhf((s0 + s1) + (s2 + s3)) + 0.01f * hash_uniform(key ^ (0x0015Eull + (uint64_t)o));
    }
}

void dataset_prepare_shard(const dataset *d, long i, int first, int count, float *out)
{
    float tmp[MAX_IN_DIM];
    float *x = out, *t = out + (size_t)count * d->in_dim;
    for (int k = 0; k < count; k++) {
        uint64_t j = (uint64_t)(first + k);
        uint64_t key = hash_mix(d->seed ^ hash_mix((uint64_t)i * 0x100000001B3ull + j)) << 20;
        prepare_sample(d, key, x + (size_t)k * d->in_dim, t + (size_t)k * d->out_dim, tmp);
    }
}

void dataset_prepare(const dataset *d, long i, float *out) { dataset_prepare_shard(d, i, 0, d->batch, out); }

uint64_t fnv1a(const void *data, size_t bytes, uint64_t h)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 0x100000001b3ull;
    return h;
}
