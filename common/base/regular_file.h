// regular_file.h: a file opened to read that may be anything a disk can hold. A named pipe (or a
// device, a socket) put where a checkpoint, a manifest or a flight ring belongs blocks whoever
// opens it until a writer comes: a report tool, a restart, rank 0's prune, forever. So it is opened
// without blocking, looked at (fstat), refused unless it is a regular file, and only then read as
// usual (blocking again). Host-only C.
#ifndef COMMON_REGULAR_FILE_H
#define COMMON_REGULAR_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// Opens `path` to read (fopen's "r"). NULL when it cannot be opened (errno set, its text in `why`)
// or is not a regular file (errno EINVAL; `why` names what it is: "a named pipe, not a regular
// file"). `why` never holds the path: the caller says which file.
FILE *regular_file_open(const char *path, char *why, size_t size);

#ifdef __cplusplus
}
#endif
#endif
