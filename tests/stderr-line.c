// stderr-line.c: common/base/stderr_line.c from WRITERS processes at once, whose stderr is one
// pipe, as tools/launch's ranks share one: every line read back is one writer's line, whole.
// Lines of 100 to 6000 bytes: past glibc's 128-byte stage of a printf to unbuffered stderr
// (2.37 and later), and past PIPE_BUF (cut to STDERR_LINE_MAX bytes, "..." at their end). Every
// other line goes through stderr_by_lines, printed in pieces of 100 bytes, as a report is.
// Built and run by tests/00_course.bats:
//   gcc -std=c11 -I. tests/stderr-line.c common/base/stderr_line.c -o stderr-line && ./stderr-line
// Exit 0 when every line came back whole; 1 otherwise, the first bad line said.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/stderr_line.h"

#define WRITERS 8
#define LINES 200                   // each writer's
#define LONGEST 6000                // the longest payload asked for
#define PIECE 100                   // stderr_by_lines' lines are printed in pieces this long
#define HEAD_MAX 32                 // "w7 i199 n6000 " and more
#define READ_MAX (8 * 1024 * 1024)  // all the writers' lines together

static const int sizes[] = {100, 129, 1000, 3000, 4050, LONGEST};

// writer w's line i: "wW iI nN " then N times the writer's letter
static void write_lines(int w)
{
    static char payload[LONGEST + 1];
    for (int i = 0; i < LINES; i++) {
        int n = sizes[i % (int)(sizeof sizes / sizeof sizes[0])];
        memset(payload, 'a' + w, (size_t)n);
        payload[n] = '\0';
        if (i % 2 == 0 || n + HEAD_MAX >= STDERR_LINE_MAX) {
            stderr_line("w%d i%d n%d %s", w, i, n, payload);
        } else {  // a report's line, in pieces: one write at its newline
            FILE *f = stderr_by_lines();
            fprintf(f, "w%d i%d n%d ", w, i, n);
            for (int k = 0; k < n; k += PIECE) fprintf(f, "%.*s", n - k < PIECE ? n - k : PIECE, payload + k);
            fputc('\n', f);
        }
    }
}

// Is `line` (len bytes, no newline) a writer's line, whole, or cut at STDERR_LINE_MAX as said?
static int whole(const char *line, size_t len, int *w, int *i)
{
    int n, head;
    if (sscanf(line, "w%d i%d n%d %n", w, i, &n, &head) != 3 || *w < 0 || *w >= WRITERS || *i < 0 || *i >= LINES)
        return 0;
    size_t body = len - (size_t)head;
    if ((size_t)head + (size_t)n + 1 <= STDERR_LINE_MAX) {  // it fits: all of it
        if (body != (size_t)n) return 0;
    } else {  // cut: STDERR_LINE_MAX bytes with the newline, "..." last
        if (len + 1 != STDERR_LINE_MAX || strncmp(line + len - 3, "...", 3) != 0) return 0;
        body -= 3;
    }
    for (size_t k = 0; k < body; k++)
        if (line[head + k] != 'a' + *w) return 0;
    return 1;
}

int main(void)
{
    int fds[2];
    if (pipe(fds) != 0) return perror("pipe"), 1;
    for (int w = 0; w < WRITERS; w++) {
        pid_t pid = fork();
        if (pid < 0) return perror("fork"), 1;
        if (pid == 0) {
            close(fds[0]);
            dup2(fds[1], 2);
            close(fds[1]);
            write_lines(w);
            exit(0);  // flushes stderr_by_lines' stream, as a rank's exit does
        }
    }
    close(fds[1]);
    char *all = (char *)malloc(READ_MAX);
    if (!all) return 1;
    size_t got = 0;
    ssize_t r;
    while (got < READ_MAX && (r = read(fds[0], all + got, READ_MAX - got)) > 0) got += (size_t)r;
    while (wait(NULL) > 0) {
    }
    int count[WRITERS] = {0}, bad = 0;
    for (size_t start = 0; start < got;) {
        char *nl = (char *)memchr(all + start, '\n', got - start);
        size_t len = nl ? (size_t)(nl - (all + start)) : got - start;
        int w = -1, i = -1;
        if (!nl || !whole(all + start, len, &w, &i)) {
            if (!bad)
                printf("stderr-line: a line not whole (%zu bytes%s): %.160s\n", len, nl ? "" : ", no newline",
                       all + start);
            bad++;
        } else {
            count[w]++;
        }
        start += len + 1;
    }
    for (int w = 0; w < WRITERS; w++)
        if (count[w] != LINES) printf("stderr-line: writer %d: %d whole lines of %d\n", w, count[w], LINES), bad++;
    free(all);
    if (bad) return 1;
    printf("stderr-line: %d writers, %d lines each, every line whole\n", WRITERS, LINES);
    return 0;
}
