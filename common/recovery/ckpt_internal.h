// ckpt_internal.h: what ckpt_folders.c calls of ckpt.c beyond the API (ckpt.h).
#ifndef COMMON_CKPT_INTERNAL_H
#define COMMON_CKPT_INTERNAL_H

#include "common/recovery/ckpt.h"

// ckpt_read_rank, and the checksum the file stores (what the manifest holds of it).
int ckpt_read_rank_sum(const char *path, ckpt_header *h, float **params, double **losses, uint64_t *stored, char *why,
                       size_t size);

#endif
