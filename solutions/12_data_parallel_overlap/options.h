// options.h: the options of lesson 12's step (options.cu), which lessons 14 and 15 take too: 15 all
// of them as 12 does, 14 the part every lesson on this step takes (dp_step_option_specs).
#ifndef DP_OPTIONS_H
#define DP_OPTIONS_H

#include <stddef.h>

#include "common/base/args.h"      // defines: arg_spec
#include "common/dist/dist.h"      // defines: dist_env, dist_options, dist_fault
#include "common/train/trainer.h"  // defines: train_options

// What the gradients' communicator is told about the GPU it shares with the matrix products
// (--comm-ctas, --comm-policy): at most this many CTAs (thread blocks, each holding an SM) per
// NCCL kernel (0: NCCL chooses), and NCCL's CTA policy; and how many SMs cuBLAS sizes its
// products for (--gemm-sms; 0: every SM). meet.cu and setup apply them; notes/12 measures them.
typedef struct {
    int comm_ctas;
    int efficiency;  // NCCL_CTA_POLICY_EFFICIENCY: "minimal number of CTAs", NCCL's words
    int gemm_sms;
    int nonblocking;  // --grad-comm nonblocking: the gradients' communicator issues from a thread, as the parent
} sm_sharing;

// The step's options, lesson 12's and 15's (options.cu): --bucket-mib, --ready-after, --comm-ctas,
// --comm-policy, --gemm-sms, the bootstrap's --rendezvous and --timeout-s, the test faults --fault-*.
typedef struct {
    double bucket_mib;
    int ready_after;     // ready_point
    sm_sharing sharing;  // (12 adds --grad-comm)
    dist_options dist;
    dist_fault fault;
} dp_options;

void dp_options_default(dp_options *o);
// What every lesson on this step takes (14 too): --bucket-mib, --rendezvous, --timeout-s,
// appended to specs[*n]; dp_bucket_bytes is --bucket-mib in bytes, said once.
void dp_step_option_specs(dp_options *o, arg_spec *specs, int *n);
size_t dp_bucket_bytes(const dp_options *o);
// The step's options (12's and 15's), appended to specs[*n]: dp_step_option_specs's, then
// --ready-after, --comm-ctas, --comm-policy, --gemm-sms, --fault error|hang (dist.h).
void dp_option_specs(dp_options *o, arg_spec *specs, int *n);
// After args_parse: the bootstrap configured, then what depends on the ranks (the batch divisible,
// the faults) and on NCCL's version; a usage error (exit code 2) names what is wrong.
void dp_options_check(dist_env *d, const dp_options *o, const train_options *train);

#endif
