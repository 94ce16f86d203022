// stderr_line.c: a message on stderr in one write (stderr_line.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/stderr_line.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>  // write, dup

// The whole of [text, text + n) on fd 2: one write, unless a signal cuts it short
static void write_all(const char *text, size_t n)
{
    while (n > 0) {
        ssize_t w = write(2, text, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;  // stderr is gone: nothing else can say so
        text += w;
        n -= (size_t)w;
    }
}

void stderr_vline(const char *fmt, va_list ap)
{
    char line[STDERR_LINE_MAX];
    int n = vsnprintf(line, sizeof line, fmt, ap);  // at most sizeof line - 1 bytes and the NUL
    if (n < 0) return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    if ((size_t)n > len) memcpy(line + len - 3, "...", 3);  // cut: say so
    line[len++] = '\n';                                     // where the NUL was: the line is whole
    fflush(stderr);
    write_all(line, len);
}

void stderr_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stderr_vline(fmt, ap);
    va_end(ap);
}

FILE *stderr_by_lines(void)
{
    static FILE *lines;
    static char buffer[STDERR_LINE_MAX];
    if (lines) return lines;
    int fd = dup(2);
    if (fd >= 0) lines = fdopen(fd, "w");
    if (!lines) {
        if (fd >= 0) close(fd);
        return stderr;  // no descriptor left: stderr as it is, lines perhaps in pieces
    }
    setvbuf(lines, buffer, _IOLBF, sizeof buffer);
    return lines;
}
