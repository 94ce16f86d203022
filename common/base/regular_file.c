// regular_file.c: files to read, refused unless regular, without blocking on one that is not
// (regular_file.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/regular_file.h"

#include <errno.h>
#include <fcntl.h>  // open, O_NONBLOCK, fcntl
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>  // close

// What a file that is not a regular one is, in words.
static const char *kind_of(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a named pipe";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

// Closes fd, says why (errno `err`, EIO when 0), and leaves errno set: NULL, for the caller.
static FILE *give_up(int fd, int err, char *why, size_t size)
{
    err = err ? err : EIO;
    snprintf(why, size, "%s", strerror(err));
    if (fd >= 0) close(fd);
    errno = err;
    return NULL;
}

FILE *regular_file_open(const char *path, char *why, size_t size)
{
    // O_NONBLOCK: a named pipe opens at once instead of waiting for a writer; cleared below
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return give_up(-1, errno, why, size);
    struct stat st;
    if (fstat(fd, &st) != 0) return give_up(fd, errno, why, size);
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, size, "%s, not a regular file", kind_of(st.st_mode));
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return give_up(fd, errno, why, size);
    FILE *f = fdopen(fd, "r");
    return f ? f : give_up(fd, errno, why, size);
}
