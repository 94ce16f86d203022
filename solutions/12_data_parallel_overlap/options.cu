// options.cu (lesson 12): the data-parallel step's options and setup, in lesson 12's library: lesson
// 15 takes them as 12 does, lesson 14 the part every step of 12's takes (data_parallel.h, dp_options).
#include "data_parallel.h"  // the lesson's types, and through it the course's headers

void dp_options_default(dp_options *o)
{
    memset(o, 0, sizeof *o);
    o->bucket_mib = 25;
    o->ready_after = READY_WEIGHTS;
    o->fault.rank = o->fault.at_batch = -1;  // none (a lesson that takes --fault adds dist_fault_options)
}

size_t dp_bucket_bytes(const dp_options *o) { return (size_t)(o->bucket_mib * 1048576.0); }

void dp_step_option_specs(dp_options *o, arg_spec *specs, int *n)
{
    specs[(*n)++] = arg_double("bucket-mib", &o->bucket_mib, 0.001, 4096, "MIB", "gradients per all-reduce, about");
    dist_option_specs(&o->dist, specs, n);
}

void dp_option_specs(dp_options *o, arg_spec *specs, int *n)
{
    dp_step_option_specs(o, specs, n);
    specs[(*n)++] = arg_choice("ready-after", &o->ready_after, "weights|layer",
                               "a bucket's all-reduce starts once its lowest layer's weight gradients are written, "
                               "or once that layer's whole backward is");
    specs[(*n)++] = arg_int("comm-ctas", &o->sharing.comm_ctas, 0, 64, "N",
                            "at most N CTAs (an SM each) per NCCL kernel; 0: NCCL chooses");
    specs[(*n)++] = arg_choice("comm-policy", &o->sharing.efficiency, "auto|efficiency",
                               "NCCL's CTA policy: its own choice, or as few CTAs as keep the bandwidth decent");
    specs[(*n)++] = arg_int("gemm-sms", &o->sharing.gemm_sms, 0, 1024, "N",
                            "cuBLAS sizes its products for N SMs (cublasSetSmCountTarget); 0: every SM");
    dist_fault_options(&o->fault, DIST_FAULT_WORDS, DIST_FAULT_HELP, specs, n);
}

void dp_options_check(dist_env *d, const dp_options *o, const train_options *train)
{
    dist_configure(d, o->dist.rendezvous, o->dist.timeout_s);
    if (train->batch % d->world != 0)
        usage_error(d->name, "--batch %d is not divisible by the %d ranks: every rank trains on an equal shard",
                    train->batch, d->world);
    dist_fault_check(d, &o->fault, train->batches);
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)
    if (o->sharing.efficiency) usage_error(d->name, "--comm-policy efficiency: this NCCL is older than 2.27");
#endif
}

void dp_setup(trainer *t, data_parallel *dp, const dp_options *o)
{
    if (o->sharing.gemm_sms > t->dev.sms)
        usage_error(dp->dist->name, "--gemm-sms %d: this GPU has %d SMs", o->sharing.gemm_sms, t->dev.sms);
    dp->ready_after = (ready_point)o->ready_after;
    dp->fault = o->fault;
    plan_buckets(&t->model.shape, dp_bucket_bytes(o), &dp->plan);
    dp->hooks.issue = issue_bucket;
    dp->hooks.wait = wait_reduced;
    ddp_setup(t, dp, wait_polled);  // the plan checked first: a wrong one is said, exit code 1
    // cuBLAS sizes each product's grid for the SMs it is told it has: told fewer, a product
    // beside NCCL's kernels is not cut into a second, almost empty wave (notes/12)
    for (int k = 0; k < 2; k++) CUBLAS_CHECK(cublasSetSmCountTarget(t->model.handle[k], o->sharing.gemm_sms));
}
