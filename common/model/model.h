// model.h: the MLP of mlp.h on the GPU. Matrix products through cuBLAS SGEMM;
// bias, ReLU, loss, gradients of the biases and the SGD update are our own
// kernels. No floating-point atomics anywhere: every reduction runs in a fixed
// order, so the same run gives the same bits every time.
//
// Two cuBLAS handles (forward, backward), each with its own workspace, so that
// lessons that run forward and backward on different streams get the same bits
// as lessons that run both on one stream.
#ifndef COMMON_MODEL_H
#define COMMON_MODEL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common/model/mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    mlp_shape shape;
    float lr;
    float *d_params, *d_grads, *d_params_init;
    float *d_act[MLP_MAX_LAYERS + 1];  // outputs of layer l (d_act[0] unused: the input is the batch)
    float *d_delta[2];                 // back-propagated errors, ping-pong
    void *d_workspace[2];
    cublasHandle_t handle[2];  // [0] forward, [1] backward
    cudaStream_t bound[2];     // the stream each handle is set to
} mlp_model;

// Device bytes mlp_model_create will allocate, for checking that a size fits first.
size_t mlp_model_device_bytes(const mlp_shape *s);

void mlp_model_create(mlp_model *m, const mlp_shape *s, float lr, uint64_t seed);
void mlp_model_destroy(mlp_model *m);

// Binds both cuBLAS handles to `stream` with the model's own workspaces (own = 1: what
// mlp_model_create sets) or with cuBLAS's default pool (own = 0: a program that never calls
// cublasSetWorkspace; inside a capture cuBLAS then allocates through the graph, pytorch 113994).
// The passes keep what this sets for as long as they run on `stream` (lesson 15 measures it).
void mlp_model_use_workspace(mlp_model *m, int own, cudaStream_t stream);

// Puts the initial weights back (on `stream`): every timed run starts from the same model.
void mlp_model_reset(mlp_model *m, cudaStream_t stream);

// Forward pass of the batch at d_x (dims[0] x batch) on `stream`, into d_act[].
void mlp_forward(mlp_model *m, const float *d_x, cudaStream_t stream);

// Loss into *d_loss, gradients, and the SGD update, on `stream`. Reads the
// activations of the last forward pass, the batch's input d_x and targets d_t.
void mlp_backward(mlp_model *m, const float *d_x, const float *d_t, float *d_loss, cudaStream_t stream);

// The same, one piece at a time, on buffers the caller owns (lessons 12 and 13 cut
// the step between layers, between GPUs and into micro-batches; `cols` is how many
// samples a buffer holds):
// layer l: out (dims[l] x cols) = ReLU(W_l in + b_l) (no ReLU on the last layer);
void mlp_forward_layer(mlp_model *m, int l, const float *in, float *out, int cols, cudaStream_t stream);
// the loss of outputs y against targets t, its error dy = (y - t) / scale, and
// *loss = sum (y - t)^2 / (2 scale), where `scale` is the batch the mean is over;
void mlp_loss(mlp_model *m, const float *y, const float *t, float *dy, float *loss, int cols, int scale,
              cudaStream_t stream);
// layer l's gradients from its error `delta` (dims[l] x cols) and its input `in`,
// added to the gradients already there when `accumulate`; and, when prev is not
// NULL, the error of the layer below (its output is `in`), masked by its ReLU;
void mlp_backward_layer(mlp_model *m, int l, const float *in, const float *delta, float *prev, int cols, int accumulate,
                        cudaStream_t stream);
// the same in its two halves, for lessons that act between them (12 issues a bucket's all-reduce
// as soon as its layers' weight gradients are written, before the error of the layer below):
// the gradients of W_l and b_l ...
void mlp_backward_weights(mlp_model *m, int l, const float *in, const float *delta, int cols, int accumulate,
                          cudaStream_t stream);
// ... and the error of the layer below, into prev (not NULL), masked by its ReLU;
void mlp_backward_error(mlp_model *m, int l, const float *in, const float *delta, float *prev, int cols,
                        cudaStream_t stream);
// the SGD update of params [first, first + count).
void mlp_update(mlp_model *m, size_t first, size_t count, cudaStream_t stream);

// Copies the weights to the host (on `stream`, then waits for it) and returns their FNV-1a checksum.
uint64_t mlp_weights_checksum(mlp_model *m, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
