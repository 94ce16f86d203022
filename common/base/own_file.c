// own_file.c: new files of this user alone, in folders of this user (own_file.h).
#define _POSIX_C_SOURCE 200809L
#include "common/base/own_file.h"

#include <errno.h>
#include <fcntl.h>  // open, O_EXCL, O_NOFOLLOW
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>  // geteuid, unlink, close

FILE *own_file_create(const char *path)
{
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, flags, 0600);
    if (fd < 0 && errno == EEXIST && unlink(path) == 0) fd = open(path, flags, 0600);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int saved = errno;
        close(fd);
        unlink(path);
        errno = saved;
    }
    return f;
}

int own_file_publish(FILE *f, const char *tmp, const char *path)
{
    int bad = ferror(f) != 0;
    bad = fclose(f) != 0 || bad;
    if (bad || rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int own_folder_check(const char *folder, char *why, size_t size)
{
    struct stat st;
    if (stat(folder, &st) != 0) {
        snprintf(why, size, "%s: %s", folder, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, size, "%s: not a folder", folder);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(why, size, "%s belongs to user %ld, not to this one (%ld): use a folder of your own", folder,
                 (long)st.st_uid, (long)geteuid());
        return -1;
    }
    if (st.st_mode & S_IWOTH) {
        snprintf(why, size, "%s can be written by every user (mode %03o): chmod o-w it, or use another", folder,
                 (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}
