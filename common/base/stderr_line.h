// stderr_line.h: a message on stderr in one write. Several ranks share one stderr (tools/launch
// gives them its own: a terminal or a pipe), and a message written in pieces is spliced with
// another rank's. glibc 2.37 and later write even one fprintf to unbuffered stderr 128 bytes at
// a time: on two H200 (issue 43) two ranks' lines came out cut at 128 and 256 bytes, each inside
// the other. A write of at most PIPE_BUF bytes to a pipe is never mixed with another.
#ifndef COMMON_STDERR_LINE_H
#define COMMON_STDERR_LINE_H

#include <stdarg.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// The longest line one write keeps whole: PIPE_BUF on Linux (POSIX asks 512 at least).
#define STDERR_LINE_MAX 4096

// Formats one line (the newline is added) and writes it to stderr in one write; a longer line is
// cut to STDERR_LINE_MAX bytes, its end "...". What stdio holds for stderr is flushed first.
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void stderr_line(const char *fmt, ...);
void stderr_vline(const char *fmt, va_list ap);

// A stream on stderr that writes each whole line in one write (line-buffered, STDERR_LINE_MAX
// bytes): for a report of many lines, each printed in pieces. The same stream every time.
FILE *stderr_by_lines(void);

#ifdef __cplusplus
}
#endif
#endif
