// ckpt_folders.c: the checkpoint folders under a root: which are complete, which a restart
// resumes from, and which are removed once a newer one is complete (ckpt.h).
#define _GNU_SOURCE  // sync_file_range
#include "common/recovery/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>  // open: a folder, never through a link
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>  // unlinkat, rmdir, close

#include "common/recovery/ckpt_internal.h"

int ckpt_check(const char *root, long long batch, ckpt_manifest *m, char *why, size_t size)
{
    char path[1200], what[600];
    ckpt_manifest_file(root, batch, path, sizeof path);
    if (ckpt_read_manifest(path, m, why, size) != 0) return -1;
    if (m->batch != batch) {
        snprintf(why, size, "%s: says batch %lld, in the folder of batch %lld", path, m->batch, batch);
        return -1;
    }
    for (int r = 0; r < m->run.world; r++) {
        ckpt_header h;
        uint64_t stored = 0;
        ckpt_rank_file(root, batch, r, path, sizeof path);
        if (ckpt_read_rank_sum(path, &h, NULL, NULL, &stored, why, size) != 0) return -1;
        size_t bytes = CKPT_HEADER_BYTES + (size_t)h.run.params * sizeof(float) + (size_t)h.losses * sizeof(double) +
                       CKPT_TRAILER_BYTES;
        if (ckpt_header_differs(&h, batch, r, &m->run, what, sizeof what)) {
            snprintf(why, size, "%s: not the manifest's: %s", path, what);
            return -1;
        }
        if ((long long)bytes != m->size[r] || stored != m->sum[r]) {  // the same file, not an older one
            snprintf(why, size, "%s: its size or checksum is not the manifest's", path);
            return -1;
        }
    }
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x < y) - (x > y);
}

int ckpt_list(const char *root, long long **batches)
{
    *batches = NULL;
    DIR *d = opendir(root);
    if (!d) return -1;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end = NULL, name[32];
        if (strncmp(e->d_name, "ckpt-", 5) != 0 || e->d_name[5] < '0' || e->d_name[5] > '9') continue;
        errno = 0;
        long long b = strtoll(e->d_name + 5, &end, 10);
        snprintf(name, sizeof name, "ckpt-%08lld", b);  // the name ckpt_folder gives it, nothing else
        if (*end || errno == ERANGE || b < 0 || strcmp(name, e->d_name) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            long long *more = (long long *)realloc(*batches, (size_t)cap * sizeof(long long));
            if (!more) {
                closedir(d);
                free(*batches);
                *batches = NULL;
                errno = ENOMEM;
                return -1;
            }
            *batches = more;
        }
        (*batches)[n++] = b;
    }
    closedir(d);
    if (n) qsort(*batches, (size_t)n, sizeof(long long), newest_first);
    return n;
}

int ckpt_complete(const char *root, long long *out, ckpt_manifest *manifests, int max,
                  void (*skipped)(void *ctx, long long batch, const char *why), void *ctx)
{
    long long *batches = NULL;
    int n = ckpt_list(root, &batches), found = 0;
    for (int k = 0; k < n && found < max; k++) {
        char why[1400];
        if (ckpt_check(root, batches[k], &manifests[found], why, sizeof why) == 0)
            out[found++] = batches[k];
        else if (skipped)
            skipped(ctx, batches[k], why);
    }
    free(batches);
    return found;
}

long long ckpt_latest(const char *root, ckpt_manifest *m, void (*skipped)(void *ctx, long long batch, const char *why),
                      void *ctx)
{
    long long found = -1;
    return ckpt_complete(root, &found, m, 1, skipped, ctx) == 1 ? found : -1;
}

// Removes checkpoint `batch`'s folder and the files in it. A link is never followed: the folder
// is opened only when it is a folder itself (O_NOFOLLOW), and every entry is removed from it
// through its descriptor (unlinkat removes a link, never what it points to). Returns 1 when
// the folder is gone.
static int remove_checkpoint(const char *root, long long batch)
{
    char folder[1200];
    ckpt_folder(root, batch, folder, sizeof folder);
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) return 0;  // a link, or no folder: left alone
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlinkat(fd, e->d_name, 0);
    closedir(d);
    return rmdir(folder) == 0;
}

// 1 when checkpoint `batch`'s entry under root is a folder, not a link to one.
static int real_folder(const char *root, long long batch)
{
    char folder[1200];
    struct stat st;
    ckpt_folder(root, batch, folder, sizeof folder);
    return lstat(folder, &st) == 0 && S_ISDIR(st.st_mode);
}

// Checkpoint `batch` by its manifest alone, for one this run wrote (its writers handed rank 0 each
// file's size and sum) or its start verified: the manifest reads and names the batch, and every
// rank's file is a regular file of the manifest's size (stat: nothing is read). 0, or -1 with why.
static int check_by_manifest(const char *root, long long batch, ckpt_manifest *m, char *why, size_t size)
{
    char path[1200];
    ckpt_manifest_file(root, batch, path, sizeof path);
    if (ckpt_read_manifest(path, m, why, size) != 0) return -1;
    for (int r = 0; r < m->run.world; r++) {
        struct stat st;
        ckpt_rank_file(root, batch, r, path, sizeof path);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (long long)st.st_size != m->size[r]) {
            snprintf(why, size, "%s: not the file its manifest lists", path);
            return -1;
        }
    }
    if (m->batch == batch) return 0;
    snprintf(why, size, "%s: says batch %lld, in the folder of batch %lld", path, m->batch, batch);
    return -1;
}

static int is_known(long long batch, const long long *known, int nknown)
{
    for (int k = 0; k < nknown; k++)
        if (known[k] == batch) return 1;
    return 0;
}

int ckpt_prune(const char *root, long long newest, const long long *known, int nknown)
{
    long long *batches = NULL;
    int n = ckpt_list(root, &batches), kept = 0, removed = 0;
    for (int k = 0; k < n; k++) {
        char path[1200], why[1400];
        struct stat st;
        ckpt_manifest m;
        // newer: an earlier attempt's; a link: whatever it points to is not this run's to remove
        if (batches[k] > newest || !real_folder(root, batches[k])) continue;
        ckpt_manifest_file(root, batches[k], path, sizeof path);
        // past the newest CKPT_KEEP that verify, a folder goes whatever its check would say: not read
        if (kept >= CKPT_KEEP && batches[k] != newest) {
            removed += remove_checkpoint(root, batches[k]);
            continue;
        }
        int known_one = is_known(batches[k], known, nknown);  // this run's own: never read back
        if ((known_one ? check_by_manifest : ckpt_check)(root, batches[k], &m, why, sizeof why) == 0) {
            if (kept++ < CKPT_KEEP || batches[k] == newest) continue;  // the newest that verify
        } else if (batches[k] == newest || stat(path, &st) == 0) {
            // a manifest that does not verify now (a bad block, memory short): kept until the
            // newest CKPT_KEEP verify, when it is older than every one a restart would use
            if (kept < CKPT_KEEP || batches[k] == newest) continue;
        }
        removed += remove_checkpoint(root, batches[k]);
    }
    free(batches);
    return removed;
}

int ckpt_sync_folder(const char *path)
{
    char folder[1200];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = '\0';
    int fd = open(slash ? folder : ".", O_RDONLY);
    if (fd < 0) return -1;
    int r = fsync(fd), err = r != 0 ? errno : 0;
    close(fd);
    errno = r != 0 ? (err ? err : EIO) : errno;
    return r;
}

#define WRITE_PART (8u << 20)  // bytes written, summed and handed to the disk at a time

size_t ckpt_write_parts(FILE *out, unsigned char *data, size_t size, size_t stop, uint64_t *sum)
{
    size_t body = sum ? size - CKPT_TRAILER_BYTES : size, done = 0;
    ckpt_sum h;
    ckpt_sum_start(&h);
    while (done < stop) {
        size_t n = done < body ? body - done : size - done;  // the body in parts, then the trailer
        if (n > WRITE_PART) n = WRITE_PART;
        if (n > stop - done) n = stop - done;
        if (sum && done == body) ckpt_trailer_text(ckpt_sum_end(&h), (char *)data + body);  // all before it summed
        if (fwrite(data + done, 1, n, out) != n || fflush(out) != 0) return done;
        sync_file_range(fileno(out), (off_t)done, (off_t)n, SYNC_FILE_RANGE_WRITE);  // a hint: no answer needed
        if (sum && done < body) ckpt_sum_add(&h, data + done, n);
        done += n;
    }
    if (sum) *sum = ckpt_sum_end(&h);
    return done;
}
