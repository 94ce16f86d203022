// check.h: the error-check macros. Every CUDA and cuBLAS call in the course goes
// through one of them (CUPTI's through CUPTI_CHECK in trace.c, NCCL's through
// NCCL_CHECK in dist.h). On failure they print the failing call as written, its
// file and line, and the error's name and text on stderr, then exit with
// EXIT_FAILURE. The solutions are built without the call's text (COURSE_NO_CALL_TEXT,
// the Makefile's SOLUTION_FLAGS), and print the file and line alone: a handout ships
// them prebuilt, and the text of an exercise's call in a binary would hand out its
// answer to `strings`. Code on a thread other than the
// main one must not exit (the main thread may be inside CUDA at that moment): it
// formats the same message with check_message and hands it to the main thread, who
// stops the others and reports it.
#ifndef COMMON_CHECK_H
#define COMMON_CHECK_H

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "common/base/exit_codes.h"

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

// The call as written, for the message of a failed check: CALL_TEXT(#expr), in the macro the
// lesson types, before any macro in it expands; with COURSE_NO_CALL_TEXT (the solutions') a
// fixed text, the call's own gone from the binary.
#ifdef COURSE_NO_CALL_TEXT
#define CALL_TEXT(text) "the call at this line"
#else
#define CALL_TEXT(text) text
#endif

// Checks a call that returns a status: its type, its success value, the call's text
// (CALL_TEXT), and the functions that name the status and describe it.
#define CHECK_STATUS(status_type, success, expr, text, name_of, string_of)                          \
    do {                                                                                            \
        status_type check_status_ = (expr);                                                         \
        if (check_status_ != (success))                                                             \
            check_fail(text, __FILE__, __LINE__, name_of(check_status_), string_of(check_status_)); \
    } while (0)

#define CUDA_CHECK(expr) \
    CHECK_STATUS(cudaError_t, cudaSuccess, expr, CALL_TEXT(#expr), cudaGetErrorName, cudaGetErrorString)
#define CUBLAS_CHECK(expr)                                                                           \
    CHECK_STATUS(cublasStatus_t, CUBLAS_STATUS_SUCCESS, expr, CALL_TEXT(#expr), cublasGetStatusName, \
                 cublasGetStatusString)

// Formats "file:line: expr failed: NAME (text)" into buf, as CUDA_CHECK prints it.
void check_message(char *buf, size_t size, const char *expr, const char *file, int line, cudaError_t err);

// For a helper that only a student's exercise calls: the student version, with
// the exercise still empty, must build without an "unused function" warning.
#define EXERCISE_HELPER __attribute__((unused))

#ifdef __cplusplus
}
#endif
#endif
