// check.h: the error-check macros. Every CUDA and cuBLAS call in the course goes
// through one of them (CUPTI's through CUPTI_CHECK in trace.c, NCCL's through
// NCCL_CHECK in dist.h). On failure they print the failing call as written, its
// file and line, and the error's name and text on stderr, then exit with
// EXIT_FAILURE. Code on a thread other than the main one uses CUDA_TRY instead:
// it returns the error to its caller, who stops the others and reports it once.
#ifndef COMMON_CHECK_H
#define COMMON_CHECK_H

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "exit_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

// Prints "file:line: expr failed: NAME (text)" on stderr and exits with EXIT_FAILURE.
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void check_fail(const char *expr, const char *file, int line, const char *name, const char *text);

#define CUDA_CHECK(expr)                                                                   \
    do {                                                                                   \
        cudaError_t check_err_ = (expr);                                                   \
        if (check_err_ != cudaSuccess)                                                     \
            check_fail(#expr, __FILE__, __LINE__, cudaGetErrorName(check_err_),            \
                       cudaGetErrorString(check_err_));                                    \
    } while (0)

#define CUBLAS_CHECK(expr)                                                                 \
    do {                                                                                   \
        cublasStatus_t check_st_ = (expr);                                                 \
        if (check_st_ != CUBLAS_STATUS_SUCCESS)                                            \
            check_fail(#expr, __FILE__, __LINE__, cublasGetStatusName(check_st_),          \
                       cublasGetStatusString(check_st_));                                  \
    } while (0)

// Formats "file:line: expr failed: NAME (text)" into buf (for CUDA_TRY's callers).
void check_message(char *buf, size_t size, const char *expr, const char *file, int line, cudaError_t err);

// Evaluates a CUDA call; on failure writes its message into `msg` (a char array)
// and evaluates to 1, else to 0: `if (CUDA_TRY(cudaEventSynchronize(e), msg)) return -1;`
#define CUDA_TRY(expr, msg) cuda_try_((expr), #expr, __FILE__, __LINE__, (msg), sizeof(msg))
static inline int cuda_try_(cudaError_t err, const char *expr, const char *file, int line, char *msg,
                            size_t size)
{
    if (err == cudaSuccess) return 0;
    check_message(msg, size, expr, file, line, err);
    return 1;
}

// For a helper that only a student's exercise calls: the student version, with
// the exercise still empty, must build without an "unused function" warning.
#define EXERCISE_HELPER __attribute__((unused))

#ifdef __cplusplus
}
#endif
#endif
