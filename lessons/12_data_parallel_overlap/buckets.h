// STUDENT VERSION of solutions/12_data_parallel_overlap/buckets.h, made by `make lessons` (checksum 2295382427)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// buckets.h: lesson 12's exercises, what ddp.h's step calls back into (its hooks) and what lessons
// 14 and 15 stand on (they link this lesson's library, built from its solution: the Makefile's
// LIBRARY and STANDS_ON). buckets.cu holds them; data_parallel.h includes this file.
#ifndef BUCKETS_H
#define BUCKETS_H

#include "ddp.h"  // defines: data_parallel, bucket_plan, trainer, mlp_shape, NCCL_CHECK, CUDA_CHECK, test_delay

// The layers grouped into buckets in the order the backward pass finishes them (12-bucket-plan).
void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p);
// Floats [first, first + floats) of the gradients summed over the ranks into dp->d_sum, on
// `stream` (12-allreduce).
void allreduce_gradients(trainer *t, data_parallel *dp, size_t first, size_t floats, cudaStream_t stream);
// hooks.issue: bucket b's all-reduce on the communication stream, after its gradients (12-ready).
void issue_bucket(trainer *t, data_parallel *dp, long batch, int b);
// hooks.wait: the compute stream waits for bucket b's all-reduce before its update (12-update-wait).
void wait_reduced(trainer *t, data_parallel *dp, int b);

#endif
