// fsync-log.c: an LD_PRELOAD library for the tests. Every fsync, fdatasync and rename of the
// process (rename, renameat, renameat2), in order, is appended to $FSYNC_LOG as one line:
//   PID fsync PATH           PATH: what the descriptor names (/proc/self/fd/N), a file or a folder
//   PID fdatasync PATH
//   PID rename FROM TO       only a rename that succeeded
// The real functions are called: nothing changes but the log. A check reads from it that a
// file was flushed before its rename and its folder after, with no strace on the machine and
// no change to the program. Built by tests/helpers.bash (fsync_shim).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_line(const char *what, const char *a, const char *b)
{
    const char *path = getenv("FSYNC_LOG");
    if (!path) return;
    char line[4 * PATH_MAX + 64];
    int n = snprintf(line, sizeof line, "%ld %s %s%s%s\n", (long)getpid(), what, a, b ? " " : "", b ? b : "");
    if (n <= 0 || (size_t)n >= sizeof line) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);  // one write per line: lines never mix
    if (fd < 0) return;
    ssize_t wrote = write(fd, line, (size_t)n);
    (void)wrote;
    close(fd);
}

static void log_fd(const char *what, int fd)
{
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    log_line(what, n > 0 ? target : "?", NULL);
}

// The path `name` names from folder `dirfd` (AT_FDCWD: the working folder), for the log.
static void at_path(int dirfd, const char *name, char *out, size_t size)
{
    char link[64], base[PATH_MAX];
    if (name[0] == '/' || dirfd == AT_FDCWD) {
        snprintf(out, size, "%s", name);
        return;
    }
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, base, sizeof base - 1);
    base[n > 0 ? n : 0] = '\0';
    snprintf(out, size, "%s/%s", base, name);
}

int fsync(int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    log_fd("fsync", fd);
    return real(fd);
}

int fdatasync(int fd)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    log_fd("fdatasync", fd);
    return real(fd);
}

int rename(const char *from, const char *to)
{
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    int r = real(from, to);
    if (r == 0) log_line("rename", from, to);
    return r;
}

int renameat(int fromfd, const char *from, int tofd, const char *to)
{
    int (*real)(int, const char *, int, const char *) =
        (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    char a[2 * PATH_MAX + 2], b[2 * PATH_MAX + 2];
    at_path(fromfd, from, a, sizeof a);
    at_path(tofd, to, b, sizeof b);
    int r = real(fromfd, from, tofd, to);
    if (r == 0) log_line("rename", a, b);
    return r;
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned flags)
{
    int (*real)(int, const char *, int, const char *, unsigned) =
        (int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2");
    char a[2 * PATH_MAX + 2], b[2 * PATH_MAX + 2];
    at_path(fromfd, from, a, sizeof a);
    at_path(tofd, to, b, sizeof b);
    int r = real(fromfd, from, tofd, to, flags);
    if (r == 0) log_line("rename", a, b);
    return r;
}
