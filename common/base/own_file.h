// own_file.h: files written under a temporary name in a folder that other processes see (the
// rendezvous folder, a checkpoint folder). The temporary name is predictable (PATH.PID.tmp): in
// a folder another user can write to, a link planted there would make the write land on any
// file this user may write. So the file is made new, never through a link, readable by this
// user alone, and the folder must belong to this user. Host-only C.
#ifndef COMMON_OWN_FILE_H
#define COMMON_OWN_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

// Opens `path` for writing as a new file of mode 0600, with O_CREAT | O_EXCL | O_NOFOLLOW:
// never an existing file, never a link's target. Whatever stands under that name (a crashed
// process's file of the same pid, or a planted link) is removed first, once: a link is removed
// itself, never followed. NULL with errno set on failure.
FILE *own_file_create(const char *path);

// Closes f, written under the temporary name `tmp` (own_file_create), and renames it to `path`:
// within a file system a rename is atomic, so a reader finds no file or all of it. On any failure
// the temporary file is removed, errno kept, and -1 returned. No fsync: the files written so (the
// ranks' notes, NCCL's id, the flight rings) are read while their run lives, or just after by
// the same machine; what must outlive a crash of the machine (lesson 14's checkpoints) is written
// by the lesson itself, flushed to the disk (exercise 14-atomic).
int own_file_publish(FILE *f, const char *tmp, const char *path);

// 0 when `folder` is a folder that belongs to this user (its owner is the effective user id)
// and that other users cannot write to; else -1 and one line in `why`.
int own_folder_check(const char *folder, char *why, size_t size);

#ifdef __cplusplus
}
#endif
#endif
