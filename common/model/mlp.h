// mlp.h: the training lessons' network, described on the host: its shape, the
// layout of its parameters, their initial values, and a CPU reference of a
// training step that the GPU's loss curve is checked against.
//
// Layers l = 1..L map dims[l-1] features to dims[l]; ReLU after every layer but
// the last. Activations are column-major dims[l] x batch (one sample per column),
// so a batch prepared sample by sample is already what cuBLAS reads.
// Loss: L = 1/(2B) * sum over the batch of |y - t|^2. Update: plain SGD.
#ifndef COMMON_MLP_H
#define COMMON_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "common/model/data.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLP_MAX_LAYERS 9  // weight layers: up to 8 hidden layers and the output layer

typedef struct {
    int layers;                    // L, weight layers
    int dims[MLP_MAX_LAYERS + 1];  // dims[0] = input features, dims[L] = outputs
    int batch;
    size_t w_off[MLP_MAX_LAYERS + 1];  // where W_l (dims[l] x dims[l-1], column-major) starts
    size_t b_off[MLP_MAX_LAYERS + 1];  // where b_l (dims[l]) starts
    size_t nparams;
    int max_dim;  // largest of dims[1..L]
} mlp_shape;

void mlp_shape_init(mlp_shape *s, int in_dim, int hidden, int hidden_layers, int out_dim, int batch);

// Glorot-uniform weights and zero biases, all following from the seed.
void mlp_init_params(const mlp_shape *s, uint64_t seed, float *params);

// Trains on the CPU in double precision for `batches` batches of `data` and
// writes each batch's loss (the loss before that batch's update). Slow: for the
// tests' small configurations.
void mlp_cpu_reference(const mlp_shape *s, float lr, uint64_t seed, const dataset *data, int batches, double *losses);

#ifdef __cplusplus
}
#endif
#endif
