// mlp.c: the network's shape, its initial weights, and the CPU reference.
#include "common/model/mlp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu/memory.h"  // host_alloc

void mlp_shape_init(mlp_shape *s, int in_dim, int hidden, int hidden_layers, int out_dim, int batch)
{
    memset(s, 0, sizeof *s);
    s->layers = hidden_layers + 1;
    s->batch = batch;
    s->dims[0] = in_dim;
    for (int l = 1; l < s->layers; l++) s->dims[l] = hidden;
    s->dims[s->layers] = out_dim;
    size_t at = 0;
    for (int l = 1; l <= s->layers; l++) {
        s->w_off[l] = at;
        at += (size_t)s->dims[l] * s->dims[l - 1];
        s->b_off[l] = at;
        at += (size_t)s->dims[l];
        if (s->dims[l] > s->max_dim) s->max_dim = s->dims[l];
    }
    s->nparams = at;
}

void mlp_init_params(const mlp_shape *s, uint64_t seed, float *params)
{
    for (int l = 1; l <= s->layers; l++) {
        float limit = sqrtf(6.0f / (float)(s->dims[l] + s->dims[l - 1]));
        uint64_t base = hash_mix(seed ^ hash_mix(0x3E16A7ull + (uint64_t)l)) << 24;
        size_t n = (size_t)s->dims[l] * s->dims[l - 1];
        float *w = params + s->w_off[l];
        for (size_t k = 0; k < n; k++) w[k] = limit * hash_uniform(base + k);
        memset(params + s->b_off[l], 0, sizeof(float) * (size_t)s->dims[l]);
    }
}

// y (rows x B) = W (rows x cols) * x (cols x B), all column-major
static void matmul(const double *w, const double *x, double *y, int rows, int cols, int batch)
{
    for (int j = 0; j < batch; j++)
        for (int r = 0; r < rows; r++) {
            double acc = 0;
            for (int c = 0; c < cols; c++) acc += w[r + (size_t)c * rows] * x[c + (size_t)j * cols];
            y[r + (size_t)j * rows] = acc;
        }
}

void mlp_cpu_reference(const mlp_shape *s, float lr, uint64_t seed, const dataset *data, int batches, double *losses)
{
    int L = s->layers, B = s->batch;
    float *init = host_alloc(sizeof(float) * s->nparams, "the CPU reference");
    mlp_init_params(s, seed, init);
    double *p = host_alloc(sizeof(double) * s->nparams, "the CPU reference"),
           *g = host_alloc(sizeof(double) * s->nparams, "the CPU reference");
    for (size_t k = 0; k < s->nparams; k++) p[k] = init[k];
    double *act[MLP_MAX_LAYERS + 1];
    for (int l = 0; l <= L; l++) act[l] = host_alloc(sizeof(double) * (size_t)s->dims[l] * B, "the CPU reference");
    size_t big = (size_t)(s->max_dim > s->dims[0] ? s->max_dim : s->dims[0]) * B;
    double *delta = host_alloc(sizeof(double) * big, "the CPU reference"),
           *prev = host_alloc(sizeof(double) * big, "the CPU reference");
    float *batch = host_alloc(sizeof(float) * (size_t)dataset_batch_floats(data), "the CPU reference");

    for (int i = 0; i < batches; i++) {
        dataset_prepare(data, i, batch);
        const float *t = batch + (size_t)B * s->dims[0];
        for (size_t k = 0; k < (size_t)B * s->dims[0]; k++) act[0][k] = batch[k];
        for (int l = 1; l <= L; l++) {
            int rows = s->dims[l];
            matmul(p + s->w_off[l], act[l - 1], act[l], rows, s->dims[l - 1], B);
            for (int j = 0; j < B; j++)
                for (int r = 0; r < rows; r++) {
                    double z = act[l][r + (size_t)j * rows] + p[s->b_off[l] + r];
                    act[l][r + (size_t)j * rows] = (l < L && z < 0) ? 0 : z;
                }
        }
        int outs = s->dims[L];
        double loss = 0;
        for (size_t k = 0; k < (size_t)outs * B; k++) {
            double e = act[L][k] - t[k];
            loss += e * e;
            delta[k] = e / B;
        }
        losses[i] = loss / (2.0 * B);
        for (int l = L; l >= 1; l--) {
            int rows = s->dims[l], cols = s->dims[l - 1];
            double *dw = g + s->w_off[l], *db = g + s->b_off[l];
            for (int c = 0; c < cols; c++)
                for (int r = 0; r < rows; r++) {
                    double acc = 0;
                    for (int j = 0; j < B; j++) acc += delta[r + (size_t)j * rows] * act[l - 1][c + (size_t)j * cols];
                    dw[r + (size_t)c * rows] = acc;
                }
            for (int r = 0; r < rows; r++) {
                double acc = 0;
                for (int j = 0; j < B; j++) acc += delta[r + (size_t)j * rows];
                db[r] = acc;
            }
            if (l > 1) {
                const double *w = p + s->w_off[l];
                for (int j = 0; j < B; j++)
                    for (int c = 0; c < cols; c++) {
                        double acc = 0;
                        for (int r = 0; r < rows; r++) acc += w[r + (size_t)c * rows] * delta[r + (size_t)j * rows];
                        prev[c + (size_t)j * cols] = act[l - 1][c + (size_t)j * cols] > 0 ? acc : 0;
                    }
                double *swap = delta;
                delta = prev;
                prev = swap;
            }
        }
        for (size_t k = 0; k < s->nparams; k++) p[k] -= lr * g[k];
    }
    for (int l = 0; l <= L; l++) free(act[l]);
    free(delta);
    free(prev);
    free(batch);
    free(p);
    free(g);
    free(init);
}
