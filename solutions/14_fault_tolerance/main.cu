// 14_fault_tolerance: lesson 12's data-parallel training that finds out, by name, why a run hangs.
//
// build: make build/solutions/14_fault_tolerance      (where make finds NCCL: its first line says)
// run:   tools/launch -n 2 --simulate-nodes --rendezvous DIR build/solutions/14_fault_tolerance
//            --fault skip --fault-rank 1 --fault-at-batch 5 --fingerprint-every 0 --timeout-s 10
//        build/tools/flight-report DIR                             where the ranks went apart, in one line
//
// Two ideas on lesson 12's loop (one process per GPU, each bucket's all-reduce issued under the
// backward pass):
//  - A flight recorder (recorder.cu): every rank keeps a ring of its last --ring-slots NCCL
//    calls, each with an event recorded behind it. When the rank stops (a timeout, an error,
//    another rank's note: dist_env's stop hook) or ends, it writes the ring beside the
//    rendezvous, every call marked by whether its event fired. tools/flight-report reads every
//    rank's ring and names the first divergence in one line.
//  - A fingerprint check (--fingerprint-every N, train.cu): every N batches the ranks compare,
//    with one small all-gather, a hash of every call they made and the calls they are about to
//    make; a difference stops the run with the divergence named, before any rank can hang.
// --fault injects what the lesson is about, in a launch's first attempt only (a restart,
// tools/launch --restarts, runs clean): a rank killed with an all-reduce issued (the others wait in
// it), a rank that skips one, buckets in another order on one rank, a rank that hangs before its
// fingerprint check. Surviving a failure, with checkpoints, is lesson 16's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "14_fault_tolerance";

// Lesson 12's step, then what this lesson adds: the flight recorder (written on any stop) and the
// fingerprint check's buffers.
static void setup(trainer *t, fault_tolerance *ft, const options *o)
{
    ddp_state *dp = &ft->dp;
    ddp_plan_buckets(&t->model.shape, ddp_bucket_bytes(&o->dp), &dp->plan);  // lesson 12's
    step_hooks(ft);                      // train.cu: lesson 12's hooks, recorded, with the faults around them
    ddp_setup(t, dp, dist_polled_wait);  // the plan checked; streams, buffers, events; the waits polled
    recorder_init(&ft->rec, ft->dist, o->ring_slots);
    ft->dist->on_stop = recorder_stop_hook;  // any stop writes the ring first
    ft->dist->on_stop_ctx = &ft->rec;
    fingerprint_setup(ft);
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void teardown(fault_tolerance *ft)
{
    ft->dist->on_stop = NULL;
    recorder_destroy(&ft->rec);
    fingerprint_teardown(ft);
    ddp_rank_close(&ft->dp);  // lesson 12's: the step's state freed, every communicator finalized (dist_finish)
}

// The options: the trainer's, the bucket size, the rendezvous, and lesson 14's own (fingerprints,
// the recorder's size, the faults); the values checked across the options.
static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    train_options_default(&o->train);
    o->train.batch = DDP_SHARD * d->world;
    ddp_options_default(&o->dp);
    o->fingerprint_every = FINGERPRINT_EVERY;
    o->ring_slots = RING_SLOTS;
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    ddp_step_option_specs(&o->dp, specs, &n);  // --bucket-mib, --rendezvous (every rank's flight ring too), --timeout-s
    specs[n++] = arg_int("fingerprint-every", &o->fingerprint_every, 0, 1000000, "N",
                         "every N batches (batch 0 too) the ranks compare their calls before they issue them; 0: "
                         "never");
    specs[n++] = arg_int("ring-slots", &o->ring_slots, 16, FLIGHT_MAX_SLOTS, "K",
                         "the flight recorder keeps the last K calls");
    dist_fault_options(&o->fault, "none|kill|skip|order|hang",  // fault_kind's words
                       "inject a fault, in a launch's first attempt only: SIGKILL with an all-reduce issued, skip "
                       "one, buckets in the opposite order, stop answering before the batch's fingerprint check",
                       specs, &n);
    const char *summary = "Train an MLP on every GPU as lesson 12 does, with a flight recorder and fingerprint "
                          "checks.\n" DIST_HOW_TO_RUN("ranks") " [--restarts R]; where the ranks went apart: "
                                                               "build/tools/flight-report DIR";
    args_parse(argc, argv, d->name, summary, specs, n);
    ddp_options_check(d, &o->dp, &o->train);  // lesson 12's: the bootstrap configured, the batch divisible
    o->fault.attempt = dist_launch_attempt(d);
    dist_fault_check(d, &o->fault, o->train.batches);
}

// The state of one rank, before its GPU is touched: what the options make of it.
static void state_from(fault_tolerance *ft, dist_env *d, const options *o)
{
    memset(ft, 0, sizeof *ft);
    ft->dist = d;
    ddp_init(&ft->dp, d);  // lesson 12's own variant: each bucket's all-reduce under the backward pass
    ft->fault = o->fault;  // 12's dp.fault: none
    ft->fingerprint_every = o->fingerprint_every;
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    options o;
    parse_options(&d, argc, argv, &o);
    fault_tolerance ft;
    state_from(&ft, &d, &o);

    train_options shard;  // this rank's trainer: one shard of every batch
    rank_outputs outs;
    ddp_shard_of(&d, &o.train, &shard, &outs);
    shard.check_cpu = 0;  // no CPU check: the harness makes it, and 14's loop runs without the harness
    trainer t;
    ddp_rank_open(&d, &t, &shard, &outs, DDP_LOSS_RING);  // lesson 12's: this rank's GPU, its trainer
    dist_connect(&d);
    ft.dp.grads = d.comm;  // the gradients' all-reduces on the parent communicator: every call recorded
    setup(&t, &ft, &o);

    double t0 = host_now_ms();
    trace_range run = trace_begin(TL_RANGE_PHASE, "run", -1);
    t.delays_on = 1;  // the test delays (--delay-us) act in the run, not in the setup's measurement
    train_loop(&t, &ft);
    CUDA_CHECK(dist_event_wait(&d, ft.dp.losses_averaged));
    t.delays_on = 0;
    trace_end(&run);
    int ok = report(&t, &ft, host_now_ms() - t0, outs.report);  // report.cu
    recorder_write(&ft.rec, ok ? "- (the run ended)" : "the run ended, its checks FAILED");
    teardown(&ft);
    return harness_finish(&t, ok);
}
