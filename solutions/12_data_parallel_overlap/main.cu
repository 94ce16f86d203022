// 12_data_parallel_overlap: data-parallel training on any number of GPUs, the
// gradients averaged with NCCL while the backward pass is still running.
//
// build: make build/solutions/12_data_parallel_overlap      (where make finds NCCL: its first line says)
// run:   build/solutions/12_data_parallel_overlap [--batches 200] [--json]      one GPU, one rank
//        tools/launch -n 2 build/solutions/12_data_parallel_overlap [--bucket-mib 25]   two GPUs
//        tools/launch -n 4 --simulate-nodes build/solutions/12_data_parallel_overlap   four ranks on one GPU
//            (each a node of its own, over loopback sockets: every check holds, no timing is performance)
//
// One process per GPU, each a rank (common/dist/dist.h: the launcher's environment, the
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
// The files: ddp.h, the library's one face (what lessons 14, 15 and 16 link): buckets.cu (the
// exercises: the plan, each bucket's all-reduce and the wait for it), train.cu (the step, which
// calls them where a bucket's gradients are ready and before its update; the loop; the reference),
// options.cu (the step's options and setup, a rank's bring-up), checks.cu (the checks across
// ranks), ddp.cu and ddp_plan.cu (the machinery: state, shard, losses, the plan's check). Lesson
// 12's own: data_parallel.h, meet.cu (how the ranks meet), stop.cu (how they stop), report.cu,
// and this one (main).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "12_data_parallel_overlap";

// What the command line says: the training options (of the whole batch), the step's, the lesson's own.
typedef struct {
    train_options train;
    ddp_options dp;  // options.cu: --bucket-mib, --ready-after, --comm-ctas, ... (and --grad-comm, here)
    int first;       // --overlap: the lesson's own variant, run first
} options;

static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    train_options_default(&o->train);
    o->train.batch = DDP_SHARD * d->world;
    ddp_options_default(&o->dp);
    o->first = OVERLAP_BUCKETS;
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    specs[n++] = arg_choice("overlap", &o->first, "buckets|none",
                            "the lesson's own variant (both run, round-robin): all-reduce each bucket under the "
                            "backward pass, or every bucket after it");
    specs[n++] = arg_choice("grad-comm", &o->dp.sharing.nonblocking, "blocking|nonblocking",
                            "the gradients' communicator: blocking (each call only queues), or non-blocking as the "
                            "parent (each call issued by a thread of NCCL's)");
    ddp_option_specs(&o->dp, specs, &n);
    const char *summary =
        "Train an MLP on every GPU, averaging gradients with NCCL under the backward pass.\n" DIST_HOW_TO_RUN("ranks");
    args_parse(argc, argv, d->name, summary, specs, n);
    ddp_options_check(d, &o->dp, &o->train);
}

// The parts alone, both variants round-robin against the reference, the checks across ranks,
// the report. Returns 1 when every check passed.
static int run_and_report(trainer *t, ddp_state *dp, const options *o, FILE *out)
{
    part_times parts;
    profile_parts(t, dp, &parts);
    ddp_state none = *dp;  // the same streams, buffers and events; every bucket after the backward pass
    none.overlap = 0;
    train_variant buckets_v = {"buckets", ddp_train_loop, dp}, none_v = {"none", ddp_train_loop, &none};
    train_variant variants[2] = {o->first == OVERLAP_BUCKETS ? buckets_v : none_v,
                                 o->first == OVERLAP_BUCKETS ? none_v : buckets_v};
    train_variant reference = {"reference", ddp_reference_loop, dp};
    harness_extras x;
    memset(&x, 0, sizeof x);
    x.reference = &reference;
    int ok = harness_run_with(t, variants, 2, &x);
    ok = ddp_ranks_agree(t, dp, ok, out);
    if (x.step_ms[0] > 0) report(t, dp, &parts, &x, (overlap_mode)o->first, o->train.batch, &o->dp, out);
    return ok;
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    options o;
    parse_options(&d, argc, argv, &o);
    ddp_state dp;  // ddp.h: the step's state; its hooks are this lesson's exercises
    ddp_init(&dp, &d);
    train_options shard;  // what this rank's trainer is built for: one shard of every batch
    rank_outputs outs;
    ddp_shard_of(&d, &o.train, &shard, &outs);
    trainer t;
    ddp_rank_open(&d, &t, &shard, &outs, DDP_LOSS_RING);  // this rank's GPU, its trainer
    ddp_step_setup(&t, &dp, &o.dp);  // options.cu: the plan, the hooks, the step's state, before any rank waits
    meet_ranks(&d);                  // meet.cu
    dp.grads = ddp_open_gradient_comm(&d, &o.dp.sharing);
    int ok = run_and_report(&t, &dp, &o, outs.report);
    ddp_teardown(&dp);
    leave_ranks(&d);  // stop.cu
    if (o.train.check_cpu && d.world > 1 && d.rank == 0)
        ok = ddp_cpu_check_whole_batch(&t, &o.train, outs.report) && ok;
    return harness_finish(&t, ok);
}
