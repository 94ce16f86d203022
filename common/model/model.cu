// model.cu: the MLP's forward and backward passes on the GPU.
#include "common/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/check.h"
#include "common/gpu/memory.h"

#define WORKSPACE_BYTES (32u << 20)  // cuBLAS's recommended workspace on Hopper
#define LOSS_THREADS 1024

// ----------------------------------------------------------------------------
// kernels

// z (rows x cols) += b per row; ReLU when relu is set.
__global__ void bias_act_kernel(float *z, const float *b, int rows, size_t n, int relu)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        float v = z[k] + b[k % rows];
        z[k] = relu && v < 0.0f ? 0.0f : v;
    }
}

// One block. dy = (y - t) / batch, and loss = sum (y - t)^2 / (2 batch), summed in
// a fixed order (each thread a fixed stride, then a fixed tree): deterministic.
// `batch` is the batch the mean is over, which a micro-batch is only part of.
__global__ void loss_kernel(const float *y, const float *t, float *dy, float *loss, int n, int batch)
{
    __shared__ float partial[LOSS_THREADS];
    float sum = 0.0f;
    for (int k = threadIdx.x; k < n; k += blockDim.x) {
        float e = y[k] - t[k];
        dy[k] = e / batch;
        sum += e * e;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *loss = partial[0] / (2.0f * batch);
}

// db[r] (+)= sum over the batch of delta[r, j], one thread per row, j in order.
__global__ void bias_grad_kernel(const float *delta, float *db, int rows, int cols, int accumulate)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = 0; j < cols; j++) acc += delta[r + (size_t)j * rows];
    db[r] = accumulate ? db[r] + acc : acc;
}

// delta *= relu'(z), read from the post-ReLU activation: a > 0 exactly when z > 0
__global__ void relu_back_kernel(float *delta, const float *act, size_t n)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        if (act[k] <= 0.0f) delta[k] = 0.0f;
}

__global__ void sgd_kernel(float *params, const float *grads, size_t n, float lr)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        params[k] -= lr * grads[k];
}

static int grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return blocks > 4096 ? 4096 : (int)blocks;
}

// ----------------------------------------------------------------------------
// the model

size_t mlp_model_device_bytes(const mlp_shape *s)
{
    size_t floats = 3 * s->nparams + 2 * (size_t)s->max_dim * s->batch;
    for (int l = 1; l <= s->layers; l++) floats += (size_t)s->dims[l] * s->batch;
    return floats * sizeof(float) + 2 * (size_t)WORKSPACE_BYTES;
}

void mlp_model_create(mlp_model *m, const mlp_shape *s, float lr, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->shape = *s;
    m->lr = lr;
    size_t pbytes = sizeof(float) * s->nparams;
    m->d_params = (float *)device_alloc(pbytes);
    m->d_grads = (float *)device_alloc(pbytes);
    m->d_params_init = (float *)device_alloc(pbytes);
    float *h = (float *)host_alloc(pbytes, "the initial weights");
    mlp_init_params(s, seed, h);
    CUDA_CHECK(cudaMemcpy(m->d_params_init, h, pbytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(m->d_params, h, pbytes, cudaMemcpyHostToDevice));
    free(h);
    for (int l = 1; l <= s->layers; l++)
        m->d_act[l] = (float *)device_alloc(sizeof(float) * (size_t)s->dims[l] * s->batch);
    for (int k = 0; k < 2; k++) {
        m->d_delta[k] = (float *)device_alloc(sizeof(float) * (size_t)s->max_dim * s->batch);
        m->d_workspace[k] = device_alloc(WORKSPACE_BYTES);
        CUBLAS_CHECK(cublasCreate(&m->handle[k]));
        m->bound[k] = (cudaStream_t)0;
        CUBLAS_CHECK(cublasSetWorkspace(m->handle[k], m->d_workspace[k], WORKSPACE_BYTES));
    }
}

void mlp_model_destroy(mlp_model *m)
{
    for (int k = 0; k < 2; k++) {
        CUBLAS_CHECK(cublasDestroy(m->handle[k]));
        device_free(m->d_workspace[k]);
        device_free(m->d_delta[k]);
    }
    for (int l = 1; l <= m->shape.layers; l++) device_free(m->d_act[l]);
    device_free(m->d_params);
    device_free(m->d_grads);
    device_free(m->d_params_init);
}

void mlp_model_reset(mlp_model *m, cudaStream_t stream)
{
    CUDA_CHECK(cudaMemcpyAsync(m->d_params, m->d_params_init, sizeof(float) * m->shape.nparams,
                               cudaMemcpyDeviceToDevice, stream));
}

void mlp_model_use_workspace(mlp_model *m, int own, cudaStream_t stream)
{
    for (int k = 0; k < 2; k++) {
        CUBLAS_CHECK(cublasSetStream(m->handle[k], stream));  // resets the workspace to cuBLAS's pool
        if (own) CUBLAS_CHECK(cublasSetWorkspace(m->handle[k], m->d_workspace[k], WORKSPACE_BYTES));
        m->bound[k] = stream;  // handle_on leaves a handle bound to its stream as it is
    }
}

// cublasSetStream resets the handle's workspace to cuBLAS's own pool: set ours again
static cublasHandle_t handle_on(mlp_model *m, int which, cudaStream_t stream)
{
    if (m->bound[which] != stream) {
        CUBLAS_CHECK(cublasSetStream(m->handle[which], stream));
        CUBLAS_CHECK(cublasSetWorkspace(m->handle[which], m->d_workspace[which], WORKSPACE_BYTES));
        m->bound[which] = stream;
    }
    return m->handle[which];
}

// One layer: out (dims[l] x cols) = W_l in + b_l, then ReLU unless it is the last layer.
void mlp_forward_layer(mlp_model *m, int l, const float *in, float *out, int cols, cudaStream_t stream)
{
    const mlp_shape *s = &m->shape;
    cublasHandle_t h = handle_on(m, 0, stream);
    const float one = 1.0f, zero = 0.0f;
    int rows = s->dims[l], inner = s->dims[l - 1];
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, rows, cols, inner, &one, m->d_params + s->w_off[l], rows, in,
                             inner, &zero, out, rows));
    size_t n = (size_t)rows * cols;
    bias_act_kernel<<<grid_for(n), 256, 0, stream>>>(out, m->d_params + s->b_off[l], rows, n, l < s->layers);
    CUDA_CHECK(cudaGetLastError());
}

void mlp_forward(mlp_model *m, const float *d_x, cudaStream_t stream)
{
    for (int l = 1; l <= m->shape.layers; l++)
        mlp_forward_layer(m, l, l == 1 ? d_x : m->d_act[l - 1], m->d_act[l], m->shape.batch, stream);
}

void mlp_loss(mlp_model *m, const float *y, const float *t, float *dy, float *loss, int cols, int scale,
              cudaStream_t stream)
{
    loss_kernel<<<1, LOSS_THREADS, 0, stream>>>(y, t, dy, loss, m->shape.dims[m->shape.layers] * cols, scale);
    CUDA_CHECK(cudaGetLastError());
}

void mlp_backward_weights(mlp_model *m, int l, const float *in, const float *delta, int cols, int accumulate,
                          cudaStream_t stream)
{
    const mlp_shape *s = &m->shape;
    cublasHandle_t h = handle_on(m, 1, stream);
    const float one = 1.0f, zero = 0.0f;
    int rows = s->dims[l], inner = s->dims[l - 1];
    // dW_l (+)= delta * in^T
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, rows, inner, cols, &one, delta, rows, in, inner,
                             accumulate ? &one : &zero, m->d_grads + s->w_off[l], rows));
    bias_grad_kernel<<<(rows + 255) / 256, 256, 0, stream>>>(delta, m->d_grads + s->b_off[l], rows, cols, accumulate);
    CUDA_CHECK(cudaGetLastError());
}

void mlp_backward_error(mlp_model *m, int l, const float *in, const float *delta, float *prev, int cols,
                        cudaStream_t stream)
{
    const mlp_shape *s = &m->shape;
    cublasHandle_t h = handle_on(m, 1, stream);
    const float one = 1.0f, zero = 0.0f;
    int rows = s->dims[l], inner = s->dims[l - 1];
    // error of the layer below = W_l^T * delta, masked by its ReLU (its output is `in`)
    CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, inner, cols, rows, &one, m->d_params + s->w_off[l], rows,
                             delta, rows, &zero, prev, inner));
    size_t n = (size_t)inner * cols;
    relu_back_kernel<<<grid_for(n), 256, 0, stream>>>(prev, in, n);
    CUDA_CHECK(cudaGetLastError());
}

void mlp_backward_layer(mlp_model *m, int l, const float *in, const float *delta, float *prev, int cols, int accumulate,
                        cudaStream_t stream)
{
    mlp_backward_weights(m, l, in, delta, cols, accumulate, stream);
    if (prev) mlp_backward_error(m, l, in, delta, prev, cols, stream);
}

void mlp_update(mlp_model *m, size_t first, size_t count, cudaStream_t stream)
{
    sgd_kernel<<<grid_for(count), 256, 0, stream>>>(m->d_params + first, m->d_grads + first, count, m->lr);
    CUDA_CHECK(cudaGetLastError());
}

void mlp_backward(mlp_model *m, const float *d_x, const float *d_t, float *d_loss, cudaStream_t stream)
{
    const mlp_shape *s = &m->shape;
    int L = s->layers;
    float *delta = m->d_delta[0], *prev = m->d_delta[1];
    mlp_loss(m, m->d_act[L], d_t, delta, d_loss, s->batch, s->batch, stream);
    for (int l = L; l >= 1; l--) {
        mlp_backward_layer(m, l, l == 1 ? d_x : m->d_act[l - 1], delta, l > 1 ? prev : NULL, s->batch, 0, stream);
        float *swap = delta;
        delta = prev;
        prev = swap;
    }
    mlp_update(m, 0, s->nparams, stream);
}

uint64_t mlp_weights_checksum(mlp_model *m, cudaStream_t stream)
{
    size_t bytes = sizeof(float) * m->shape.nparams;
    float *h = (float *)host_alloc(bytes, "a copy of the weights");
    CUDA_CHECK(cudaMemcpyAsync(h, m->d_params, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    uint64_t sum = fnv1a(h, bytes, FNV1A_START);
    free(h);
    return sum;
}
