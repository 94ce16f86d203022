// exit_codes.h: the exit codes every program and tool of the course shares
// (docs/developers.md, "Exit codes"). Plain C, no CUDA: host-only tools include it alone.
#ifndef COMMON_EXIT_CODES_H
#define COMMON_EXIT_CODES_H

#include <stdlib.h>  // EXIT_SUCCESS (0) and EXIT_FAILURE (1: a check failed, or a runtime error)

#define EXIT_USAGE 2   // bad command line: one line on stderr says why
#define EXIT_NO_GPU 3  // no usable GPU: one line on stderr says why

#endif
