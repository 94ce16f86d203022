// check.h: exit codes shared by every program, and the error-check macros.
//
// Every CUDA, cuBLAS and CUPTI call in the course goes through one of these
// macros. On failure they print the failing call as written, its file and
// line, and the error's name and text on stderr, then exit with EXIT_FAILURE.
#ifndef COMMON_CHECK_H
#define COMMON_CHECK_H

#include <stdlib.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#ifdef __cplusplus
extern "C" {
#endif

// The course's exit codes (README, "Exit codes"). EXIT_SUCCESS is 0 and
// EXIT_FAILURE is 1 (a check failed, or a runtime error).
#define EXIT_USAGE 2   // bad command line: one line on stderr says why
#define EXIT_NO_GPU 3  // no usable GPU: one line on stderr says why

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

// For a helper that only a student's exercise calls: the student version, with
// the exercise still empty, must build without an "unused function" warning.
#define EXERCISE_HELPER __attribute__((unused))

// CUPTI_CHECK lives in trace_cupti.c, the only file that includes cupti.h.

#ifdef __cplusplus
}
#endif
#endif
