// STUDENT VERSION of solutions/12_data_parallel_overlap/main.cu, made by `make lessons` (checksum 1081178074)
// No exercise in this file, read it as it stands; the TODOs are in buckets.cu, train.cu.
// 12_data_parallel_overlap: data-parallel training on any number of GPUs, the
// gradients averaged with NCCL while the backward pass is still running.
//
// build: make build/solutions/12_data_parallel_overlap      (where make finds NCCL: its first line says)
// run:   build/solutions/12_data_parallel_overlap [--batches 200] [--json]      one GPU, one rank
//        tools/launch -n 2 build/solutions/12_data_parallel_overlap [--bucket-mib 25]   two GPUs
//        tools/launch -n 4 --simulate-nodes build/solutions/12_data_parallel_overlap   four ranks on one GPU
//            (each a node of its own, over loopback sockets: every check holds, no timing is performance)
//
// One process per GPU, each a rank (common/dist.h: the launcher's environment, the
// rendezvous, the communicator). Every rank holds the whole model. Batch i of --batch
// samples is cut into one shard per rank: rank r trains on samples [r*B/N, (r+1)*B/N).
// Before the update the ranks sum their gradients with ncclAllReduce (ncclSum) and
// each applies the mean (the rate divided by the ranks), so every rank applies the same
// update and the weights stay identical everywhere.
//
// The backward pass produces the gradients last layer first. The gradients are grouped
// into buckets of about --bucket-mib in that order; as soon as an event says a
// bucket's gradients are written, its all-reduce is issued on a communication stream
// and runs while the compute stream goes on with the layers below. Each bucket's
// update waits for its all-reduce's event. Every rank issues the buckets in the same
// order: NCCL pairs the ranks' collectives by the order they were issued in.
//
// Two variants run round-robin, every run checked bit for bit against a synchronous
// data-parallel reference: "buckets" (the overlap) and "none" (the same buckets, all
// reduced after the backward pass). --overlap chooses which one is the lesson's own.
// The host loop is lesson 08's: two batch slots, a loss ring read every 10 batches.
//
// The files: data_parallel.h (types), meet.cu (how the ranks meet), stop.cu (how they stop),
// buckets.cu (the exercises: the plan, each bucket's all-reduce and the wait for it), train.cu
// (the loop, the reference), report.cu, and this one (setup, options, main). The step itself,
// the machinery around the exercises, is common/ddp.h's, which lesson 14 stands on too: it calls
// back into buckets.cu where a bucket's gradients are ready and before a bucket's update.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "12_data_parallel_overlap";

// The plan (exercise 12-bucket-plan), the hooks through which common/ddp.h's step calls this
// lesson's other exercises (buckets.cu), then the step's streams, buffers and events, its host
// waits polled (stop.cu).
static void setup(trainer *t, data_parallel *dp, double bucket_mib, const sm_sharing *sharing)
{
    plan_buckets(&t->model.shape, (size_t)(bucket_mib * 1048576.0), &dp->plan);
    dp->hooks.issue = issue_bucket;
    dp->hooks.wait = wait_reduced;
    ddp_setup(t, dp, wait_polled);  // the plan checked first: a wrong one is said, exit code 1
    // cuBLAS sizes each product's grid for the SMs it is told it has: told fewer, a product
    // beside NCCL's kernels is not cut into a second, almost empty wave (notes/12)
    for (int k = 0; k < 2; k++) CUBLAS_CHECK(cublasSetSmCountTarget(t->model.handle[k], sharing->gemm_sms));
}

// What the command line says: the training options (of the whole batch), the lesson's own.
typedef struct {
    train_options train;
    int first;           // --overlap: the lesson's own variant, run first
    int ready_after;     // --ready-after
    double bucket_mib;   // --bucket-mib
    sm_sharing sharing;  // --comm-ctas, --comm-policy, --gemm-sms
    dist_options dist;   // --rendezvous, --timeout-s
} options;

// Options that depend on each other or on the number of ranks.
static void check_options(const dist_env *d, const train_options *o, const data_parallel *dp)
{
    if (o->batch % d->world != 0)
        usage_error(d->name, "--batch %d is not divisible by the %d ranks: every rank trains on an equal shard",
                    o->batch, d->world);
    dist_fault_check(d, &dp->fault, o->batches);
}

static void parse_options(dist_env *d, int argc, char **argv, options *o, data_parallel *dp)
{
    train_options_default(&o->train);
    o->train.batch = SHARD * d->world;
    o->first = OVERLAP_BUCKETS;
    o->bucket_mib = 25;
    o->ready_after = READY_WEIGHTS;
    memset(&o->sharing, 0, sizeof o->sharing);
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    specs[n++] = arg_choice("overlap", &o->first, "buckets|none",
                            "the lesson's own variant (both run, round-robin): all-reduce each bucket under the "
                            "backward pass, or every bucket after it");
    specs[n++] = arg_double("bucket-mib", &o->bucket_mib, 0.001, 4096, "MIB", "gradients per all-reduce, about");
    specs[n++] = arg_choice("ready-after", &o->ready_after, "weights|layer",
                            "a bucket's all-reduce starts once its lowest layer's weight gradients are written, "
                            "or once that layer's whole backward is");
    specs[n++] = arg_int("comm-ctas", &o->sharing.comm_ctas, 0, 64, "N",
                         "at most N CTAs (an SM each) per NCCL kernel; 0: NCCL chooses");
    specs[n++] = arg_choice("comm-policy", &o->sharing.efficiency, "auto|efficiency",
                            "NCCL's CTA policy: its own choice, or as few CTAs as keep the bandwidth decent");
    specs[n++] = arg_choice("grad-comm", &o->sharing.nonblocking, "blocking|nonblocking",
                            "the gradients' communicator: blocking (each call only queues), or non-blocking as the "
                            "parent (each call issued by a thread of NCCL's)");
    specs[n++] = arg_int("gemm-sms", &o->sharing.gemm_sms, 0, 1024, "N",
                         "cuBLAS sizes its products for N SMs (cublasSetSmCountTarget); 0: every SM");
    dist_option_specs(&o->dist, specs, &n);
    dist_fault_options(&dp->fault, specs, &n);
    const char *summary =
        "Train an MLP on every GPU, averaging gradients with NCCL under the backward pass.\n" DIST_HOW_TO_RUN("ranks");
    args_parse(argc, argv, d->name, summary, specs, n);
    dist_configure(d, o->dist.rendezvous, o->dist.timeout_s);
    check_options(d, &o->train, dp);
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)
    if (o->sharing.efficiency) usage_error(d->name, "--comm-policy efficiency: this NCCL is older than 2.27");
#endif
}

// The parts alone, both variants round-robin against the reference, the checks across ranks,
// the report. Returns 1 when every check passed.
static int run_and_report(trainer *t, data_parallel *dp, const options *o, FILE *out)
{
    part_times parts;
    profile_parts(t, dp, &parts);
    data_parallel none = *dp;  // the same streams, buffers and events; every bucket after the backward pass
    none.overlap = 0;
    train_variant buckets_v = {"buckets", train_loop, dp}, none_v = {"none", train_loop, &none};
    train_variant variants[2] = {o->first == OVERLAP_BUCKETS ? buckets_v : none_v,
                                 o->first == OVERLAP_BUCKETS ? none_v : buckets_v};
    train_variant reference = {"reference", reference_loop, dp};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = harness_run_with(t, variants, 2, &x);
    ok = ranks_agree(t, dp, ok, out);
    if (x.step_ms[0] > 0)
        report(t, dp, &parts, &x, (overlap_mode)o->first, o->train.batch, o->bucket_mib, &o->sharing, out);
    return ok;
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    data_parallel dp;     // common/ddp.h: the step's state; its hooks are this lesson's exercises
    memset(&dp, 0, sizeof dp);
    dp.dist = &d;
    dp.overlap = 1;  // each bucket's all-reduce under the backward pass (the "buckets" variant)
    options o;
    parse_options(&d, argc, argv, &o, &dp);
    dp.ready_after = (ready_point)o.ready_after;
    train_options shard = o.train;  // what this rank's trainer is built for: one shard of every batch
    shard.batch = o.train.batch / d.world;
    shard.check_cpu = o.train.check_cpu && d.world == 1;  // several ranks: rank 0 checks the whole batch below
    char trace_path[1100];
    FILE *out = harness_rank_outputs(d.name, d.rank, d.world, &shard, trace_path,
                                     sizeof trace_path);  // rank 0 reports for every rank
    dist_select_device(&d);
    trainer t;
    trainer_init(&t, d.name, &shard, SLOTS, SLOTS, LOSS_RING);
    if (o.sharing.gemm_sms > t.dev.sms)
        usage_error(d.name, "--gemm-sms %d: this GPU has %d SMs", o.sharing.gemm_sms, t.dev.sms);
    meet_ranks(&d);  // meet.cu
    dp.grads = open_gradient_comm(&d, &o.sharing);
    setup(&t, &dp, o.bucket_mib, &o.sharing);
    int ok = run_and_report(&t, &dp, &o, out);
    ddp_teardown(&dp);
    leave_ranks(&d);  // stop.cu
    if (o.train.check_cpu && d.world > 1 && d.rank == 0) ok = cpu_check_whole_batch(&t, &o.train, out) && ok;
    return harness_finish(&t, ok);
}
