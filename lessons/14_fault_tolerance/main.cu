// STUDENT VERSION of solutions/14_fault_tolerance/main.cu, made by `make lessons` (checksum 2379180311)
// No exercise in this file, read it as it stands; the TODOs are in recorder.cu.
// 14_fault_tolerance: lesson 12's data-parallel training that finds out why a run hangs, and
// survives a rank that dies, losing at most --checkpoint-every batches and never a bit.
//
// build: make build/lessons/14_fault_tolerance      (where make finds NCCL: its first line says)
// run:   tools/launch -n 2 --simulate-nodes build/lessons/14_fault_tolerance --checkpoint-dir DIR
//        tools/launch -n 2 --simulate-nodes --restarts 1 build/lessons/14_fault_tolerance --checkpoint-dir DIR
//            --fault kill --fault-rank 1 --fault-at-batch 13      (one line) killed, restarted, the same bits
//        build/tools/flight-report RENDEZVOUS_DIR                  where the ranks went apart, in one line
//
// Three ideas on lesson 12's loop (one process per GPU, each bucket's all-reduce issued under
// the backward pass):
//  - A flight recorder (recorder.cu): every rank keeps a ring of its last --ring-slots NCCL
//    calls, each with an event recorded behind it. When the rank stops (a timeout, an error,
//    another rank's note: dist_env's stop hook) or ends, it writes the ring beside the
//    rendezvous, every call marked by whether its event fired. tools/flight-report reads every
//    rank's ring and names the first divergence in one line.
//  - A fingerprint check (--fingerprint-every N, train.cu): every N batches the ranks compare,
//    with one small all-gather, a hash of every call they made and the calls they are about to
//    make; a difference stops the run with the divergence named, before any rank can hang.
//  - Checkpoints and restarts (checkpoint.cu, snapshot.cu, writer.cu, resume.cu): every --checkpoint-every
//    batches each rank writes its whole state, atomically, and rank 0 a manifest last. By default
//    (--checkpoint-mode snapshot) the weights are copied on a stream of their own beside the next
//    step, which waits for the copy on the device only, and a thread writes them behind the
//    training; --checkpoint-mode blocking stops training for the copy and the write. tools/launch
//    --restarts R starts every rank again after a failure; each resumes from the newest
//    complete checkpoint (a torn or corrupt one is passed over) and ends with the bits of a run
//    that never failed.
// --fault injects what the lesson is about, in a launch's first attempt only: a rank killed
// with an all-reduce issued (the others wait in it), a rank that skips one, buckets in another order on one rank, a
// checkpoint torn half way through its write, a full disk, a rank killed while its writer is half way
// through a checkpoint.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: the checkpoint folder

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "14_fault_tolerance";

// Lesson 12's step, then what this lesson adds: the flight recorder (written on any stop) and the
// fingerprint check's buffers (the checkpoints' after the resume point: checkpoints_setup).
static void setup(trainer *t, fault_tolerance *ft, const options *o)
{
    data_parallel *dp = &ft->dp;
    plan_buckets(&t->model.shape, dp_bucket_bytes(&o->dp), &dp->plan);  // lesson 12's
    step_hooks(ft);                      // train.cu: lesson 12's hooks, recorded, with the faults around them
    ddp_setup(t, dp, dist_polled_wait);  // the plan checked; streams, buffers, events; the waits polled
    recorder_init(&ft->rec, ft->dist, o->ring_slots);
    ft->dist->on_stop = recorder_stop_hook;  // any stop writes the ring first
    ft->dist->on_stop_ctx = &ft->rec;
    fingerprint_setup(ft);
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void teardown(trainer *t, fault_tolerance *ft)
{
    ft->dist->on_stop = NULL;
    recorder_destroy(&ft->rec);
    checkpoints_teardown(t, ft);
    fingerprint_teardown(ft);
    ddp_teardown(&ft->dp);
}

// Options that depend on each other or on the number of ranks: usage errors, before any GPU work.
static void check_options(const dist_env *d, const options *o)
{
    const char *n = d->name;
    const train_options *t = &o->train;
    const dist_fault *p = &o->fault;
    dist_fault_check(d, p, t->batches);
    int on_checkpoint = p->kind == FAULT_TORN || p->kind == FAULT_DISK_FULL || p->kind == FAULT_KILL_WRITING;
    if (on_checkpoint && !o->ckpt_root)
        usage_error(n, "--fault torn, disk-full and kill-writing break a checkpoint's write: give --checkpoint-dir");
    if (on_checkpoint && !o->ckpt_every)
        usage_error(n, "--fault torn, disk-full and kill-writing strike the checkpoint after --fault-at-batch: give "
                       "--checkpoint-every N (auto chooses its interval as the run goes)");
    if (on_checkpoint && ((p->at_batch + 1) % o->ckpt_every != 0 || p->at_batch + 1 >= t->batches))
        usage_error(n,
                    "--fault-at-batch %d: no checkpoint is written after batch %d (--checkpoint-every %d, %d batches)",
                    p->at_batch, p->at_batch, o->ckpt_every, t->batches);
    if (p->kind == FAULT_KILL_WRITING && o->ckpt_mode != CKPT_SNAPSHOT)
        usage_error(n,
                    "--fault kill-writing stops the writer thread of a snapshot: it needs --checkpoint-mode snapshot");
    if (p->kind == FAULT_KILL_WRITING && o->ckpt_every < 3)
        usage_error(n, "--fault kill-writing kills the rank two batches after the checkpoint its writer is in: it "
                       "needs --checkpoint-every 3 or more, the next checkpoint after that");
    if (p->kind == FAULT_KILL_WRITING && p->at_batch + 2 >= t->batches)
        usage_error(n, "--fault-at-batch %d: --fault kill-writing kills the rank two batches later, past the run's %d",
                    p->at_batch, t->batches);
    struct stat st;
    if (o->ckpt_root && (stat(o->ckpt_root, &st) != 0 || !S_ISDIR(st.st_mode)))
        usage_error(n, "--checkpoint-dir %s: no such folder", o->ckpt_root);
    if (o->ckpt_root && d->world > CKPT_MAX_RANKS)
        usage_error(n, "--checkpoint-dir: checkpoints hold at most %d ranks, this run has %d", CKPT_MAX_RANKS,
                    d->world);
}

// --checkpoint-every: "auto" (0), or a whole number of batches.
static int checkpoint_every(const char *name, const char *text)
{
    long long v = 0;
    if (strcmp(text, "auto") == 0) return 0;
    if (!parse_int(text, &v) || v < 1 || v > 1000000)
        usage_error(name, "--checkpoint-every expects auto or a whole number from 1 to 1000000, got '%s'", text);
    return (int)v;
}

// LAUNCH_ATTEMPT, set by tools/launch --restarts: 0 the first attempt.
static int launch_attempt(const char *name)
{
    const char *text = getenv("LAUNCH_ATTEMPT");
    if (!text || !*text) return 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (*end || v < 0 || v > 1000000)
        usage_error(name, "LAUNCH_ATTEMPT=%s: expected a whole number (set by tools/launch)", text);
    return (int)v;
}

// The options: the trainer's, the bucket size, the rendezvous, and lesson 14's own (checkpoints,
// fingerprints, the recorder's size, the faults); the values checked across the options.
static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    train_options_default(&o->train);
    o->train.batch = SHARD * d->world;
    dp_options_default(&o->dp);
    o->ckpt_mode = CKPT_SNAPSHOT;
    o->ckpt_busy = BUSY_WAIT;
    o->fingerprint_every = FINGERPRINT_EVERY;
    o->ring_slots = RING_SLOTS;
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    dp_step_option_specs(&o->dp, specs, &n);  // --bucket-mib, --rendezvous (every rank's flight ring too), --timeout-s
    specs[n++] = arg_string("checkpoint-dir", &o->ckpt_root, "DIR",
                            "write checkpoints into this folder, and resume from its newest complete one");
    const char *every = "auto";
    specs[n++] = arg_string("checkpoint-every", &every, "N|auto",
                            "batches between two checkpoints; auto: the first after 10 batches measures one, then "
                            "the smallest interval its write fits in (by 1.5 times) at a cost of at most 3.5% of "
                            "the step");
    specs[n++] = arg_choice("checkpoint-mode", &o->ckpt_mode, "blocking|snapshot",
                            "blocking: training waits while the weights are copied and written; snapshot: they are "
                            "copied on a stream of their own beside the next step and written by a thread");
    specs[n++] = arg_choice("checkpoint-busy", &o->ckpt_busy, "wait|skip",
                            "a checkpoint due while the one before is still being written: wait for the writer, "
                            "or skip it (snapshot)");
    specs[n++] = arg_int("write-delay-ms", &o->write_delay_ms, 0, 600000, "MS",
                         "a test delay: the writer sleeps this long before each file (snapshot)");
    specs[n++] = arg_int("fingerprint-every", &o->fingerprint_every, 0, 1000000, "N",
                         "every N batches (batch 0 too) the ranks compare their calls before they issue them; 0: "
                         "never");
    specs[n++] = arg_int("ring-slots", &o->ring_slots, 16, FLIGHT_MAX_SLOTS, "K",
                         "the flight recorder keeps the last K calls");
    dist_fault_options(&o->fault, "none|kill|skip|order|torn|disk-full|kill-writing",  // fault_kind's words
                       "inject a fault, in a launch's first attempt only: SIGKILL with an all-reduce issued, skip "
                       "one, buckets in the opposite order, die half way through a checkpoint (torn, disk-full, "
                       "kill-writing: the checkpoint after --fault-at-batch), a full disk, SIGKILL two batches after "
                       "a checkpoint whose writer stopped half way",
                       specs, &n);
    const char *summary = "Train an MLP on every GPU as lesson 12 does, with a flight recorder, fingerprint checks, "
                          "checkpoints and restarts.\n" DIST_HOW_TO_RUN(
                              "ranks") " [--restarts R]; where the "
                                       "ranks went apart: build/tools/flight-report DIR";
    args_parse(argc, argv, d->name, summary, specs, n);
    if (o->ckpt_root && !o->ckpt_root[0]) o->ckpt_root = NULL;  // --checkpoint-dir "": none, said once here
    dp_options_check(d, &o->dp, &o->train);  // lesson 12's: the bootstrap configured, the batch divisible
    o->ckpt_every = checkpoint_every(d->name, every);
    o->attempt = launch_attempt(d->name);
    check_options(d, o);
}

// The state of one rank, before its GPU is touched: what the options make of it.
static void state_from(fault_tolerance *ft, dist_env *d, const options *o)
{
    memset(ft, 0, sizeof *ft);
    ft->dist = d;
    ft->dp.dist = d;
    ft->dp.overlap = 1;  // lesson 12's own variant: each bucket's all-reduce under the backward pass
    ft->fault = (fault_plan){o->fault.kind, o->fault.rank, o->fault.at_batch, o->attempt};  // 12's dp.fault: none
    ft->fingerprint_every = o->fingerprint_every;
    ft->ckpt.root = o->ckpt_root;
    ft->ckpt.every = o->ckpt_every;
    ft->ckpt.auto_every = o->ckpt_every == 0;
    ft->ckpt.mode = o->ckpt_mode;
    ft->ckpt.busy_rule = o->ckpt_busy;
    ft->ckpt.write_delay_ms = o->write_delay_ms;
    ft->ckpt.resume_from = -1;
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    options o;
    parse_options(&d, argc, argv, &o);
    fault_tolerance ft;
    state_from(&ft, &d, &o);

    train_options shard = o.train;  // this rank's trainer: one shard of every batch
    shard.batch = o.train.batch / d.world;
    shard.check_cpu = 0;
    rank_outputs outs = harness_rank_outputs(d.name, d.rank, d.world, &shard);  // rank 0 reports for every rank
    shard.json = outs.json;
    shard.trace_path = outs.trace_path[0] ? outs.trace_path : NULL;
    mlp_shape shape;
    mlp_shape_init(&shape, o.train.in_dim, o.train.hidden, o.train.hidden_layers, o.train.out_dim, shard.batch);
    const train_options *w = &o.train;  // the whole batch's
    ckpt_run_init(&ft.ckpt.run, d.world, shape.dims, shape.layers, (long long)shape.nparams, w->seed, w->batch,
                  shard.batch, w->lr, w->prep_work, (long long)dp_bucket_bytes(&o.dp));
    find_checkpoints(&ft, w->batches);  // another run's: one line, exit code 2, no GPU touched

    dist_select_device(&d);
    trainer t;
    trainer_init(&t, d.name, &shard, SLOTS, SLOTS, LOSS_RING);
    t.human = outs.human;
    dist_connect(&d);
    ft.dp.grads = d.comm;  // the gradients' all-reduces on the parent communicator: every call recorded
    setup(&t, &ft, &o);
    long long agreed = agree_on_checkpoint(&ft);  // the newest checkpoint every rank holds
    ft.ckpt.start = agreed >= 0 ? restore(&t, &ft, agreed) : 0;
    checkpoints_setup(&t, &ft);  // snapshot.cu: the image, the snapshot's stream, the writer thread

    double t0 = host_now_ms();
    trace_range run = trace_begin(TL_RANGE_PHASE, "run", -1);
    t.delays_on = 1;  // the test delays (--delay-us) act in the run, not in the setup's measurement
    train_loop(&t, &ft);
    CUDA_CHECK(dist_event_wait(&d, ft.dp.losses_averaged));
    t.delays_on = 0;
    trace_end(&run);
    int ok = report(&t, &ft, host_now_ms() - t0, outs.report);  // report.cu
    recorder_write(&ft.rec, ok ? "- (the run ended)" : "the run ended, its checks FAILED");
    teardown(&t, &ft);
    dist_finish(&d);
    return harness_finish(&t, ok);
}
