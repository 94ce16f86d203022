// options.cu (lesson 12's library, ddp.h): the data-parallel step's options and setup (lesson 15
// takes them all as 12 does, 14 and 16 the part every step of 12's takes), the gradients'
// communicator, and a rank's bring-up and end, the same in every lesson on this step.
#include <string.h>

#include "ddp.h"                   // the library's face
#include "common/base/args.h"      // defines: arg_double, arg_choice, arg_int, usage_error
#include "common/base/check.h"     // defines: CUBLAS_CHECK
#include "common/dist/dist.h"      // defines: dist_configure, dist_fault_check, dist_fault_options, dist_option_specs,
                                   //          DIST_FAULT_WORDS, DIST_FAULT_HELP, NCCL_CHECK, dist_split_ready,
                                   //          dist_polled_wait, dist_select_device, dist_finish
#include "common/train/harness.h"  // defines: harness_rank_outputs
#include "common/train/trainer.h"  // defines: trainer_init

void ddp_options_default(ddp_options *o)
{
    memset(o, 0, sizeof *o);
    o->bucket_mib = 25;
    o->ready_after = DDP_READY_WEIGHTS;
    o->fault.rank = o->fault.at_batch = -1;  // none (a lesson that takes --fault adds dist_fault_options)
}

size_t ddp_bucket_bytes(const ddp_options *o) { return (size_t)(o->bucket_mib * 1048576.0); }

void ddp_step_option_specs(ddp_options *o, arg_spec *specs, int *n)
{
    specs[(*n)++] = arg_double("bucket-mib", &o->bucket_mib, 0.001, 4096, "MIB", "gradients per all-reduce, about");
    dist_option_specs(&o->dist, specs, n);
}

void ddp_option_specs(ddp_options *o, arg_spec *specs, int *n)
{
    ddp_step_option_specs(o, specs, n);
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

void ddp_options_check(dist_env *d, const ddp_options *o, const train_options *train)
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

void ddp_step_setup(trainer *t, ddp_state *dp, const ddp_options *o)
{
    if (o->sharing.gemm_sms > t->dev.sms)
        usage_error(dp->dist->name, "--gemm-sms %d: this GPU has %d SMs", o->sharing.gemm_sms, t->dev.sms);
    dp->ready_after = (ddp_ready_point)o->ready_after;
    dp->fault = o->fault;
    ddp_plan_buckets(&t->model.shape, ddp_bucket_bytes(o), &dp->plan);
    dp->hooks.issue = ddp_issue_bucket;
    dp->hooks.wait = ddp_wait_reduced;
    ddp_setup(t, dp, dist_polled_wait);  // the plan checked first: a wrong one is said, exit code 1
    // cuBLAS sizes each product's grid for the SMs it is told it has: told fewer, a product
    // beside NCCL's kernels is not cut into a second, almost empty wave (notes/12)
    for (int k = 0; k < 2; k++) CUBLAS_CHECK(cublasSetSmCountTarget(t->model.handle[k], o->sharing.gemm_sms));
}

// The gradients' communicator: see ddp.h. A blocking one: once connected, ncclAllReduce only queues
// its kernel and returns, where a non-blocking communicator issues every call from a thread of its
// own (measured: 0.13 ms a call beside 0.02, and far more under a tracer: notes/12). What could block
// is watched all the same: a connect or a finalize that waits for a rank that failed ends with its
// note or --timeout-s (dist_split_ready puts it in dist's watch), and an abort aborts it with the parent.
ncclComm_t ddp_open_gradient_comm(dist_env *d, const ddp_sharing *sharing)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = sharing->nonblocking ? 0 : 1;  // --grad-comm, to measure the difference
    config.splitShare = 0;                           // resources of its own
    // An NCCL kernel holds an SM per CTA for as long as it runs, waiting for a peer included, and
    // the backward pass's products run beside it on what is left (notes/12, measured)
    if (sharing->comm_ctas > 0) {
        config.minCTAs = 1;
        config.maxCTAs = sharing->comm_ctas;
    }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (sharing->efficiency) config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
#endif
    ncclComm_t grads = NULL;
    // a call on the non-blocking parent: it may answer before the new communicator exists
    NCCL_CHECK(d, ncclCommSplit(d->comm, 0, d->rank, &grads, &config));
    dist_split_ready(d, &grads, "the gradients' communicator");
    return grads;
}

// ----------------------------------------------------------------------------
// a rank's bring-up and end

void ddp_init(ddp_state *dp, dist_env *d)
{
    memset(dp, 0, sizeof *dp);
    dp->dist = d;
    dp->overlap = 1;  // each bucket's all-reduce under the backward pass (12's "buckets" variant)
}

void ddp_shard_of(const dist_env *d, const train_options *whole, train_options *shard, rank_outputs *outs)
{
    *shard = *whole;
    shard->batch = whole->batch / d->world;
    shard->check_cpu = whole->check_cpu && d->world == 1;             // several ranks: rank 0 checks the whole batch
    *outs = harness_rank_outputs(d->name, d->rank, d->world, shard);  // rank 0 reports for every rank
    shard->json = outs->json;
    shard->trace_path = outs->trace_path[0] ? outs->trace_path : NULL;  // the caller's outs: it outlives the run
}

void ddp_rank_open(dist_env *d, trainer *t, const train_options *shard, const rank_outputs *outs, int loss_slots)
{
    dist_select_device(d);
    trainer_init(t, d->name, shard, DDP_SLOTS, DDP_SLOTS, loss_slots);
    t->human = outs->human;
}

void ddp_rank_close(ddp_state *dp)
{
    ddp_teardown(dp);
    dist_finish(dp->dist);  // every communicator finalized and destroyed, the parent last
}
