// 16_checkpoint_restart: lesson 12's data-parallel training that survives a rank that dies,
// losing at most --checkpoint-every batches and never a bit.
//
// build: make build/solutions/16_checkpoint_restart      (where make finds NCCL: its first line says)
// run:   tools/launch -n 2 --simulate-nodes build/solutions/16_checkpoint_restart --checkpoint-dir DIR
//        tools/launch -n 2 --simulate-nodes --restarts 1 build/solutions/16_checkpoint_restart --checkpoint-dir DIR
//            --fault kill --fault-rank 1 --fault-at-batch 13      (one line) killed, restarted, the same bits
//        build/tools/checkpoint-report DIR                         which checkpoints are whole, where to resume
//
// Lesson 12's loop (one process per GPU, each bucket's all-reduce issued under the backward pass)
// with checkpoints and restarts: every --checkpoint-every batches each rank writes its whole state,
// atomically (checkpoint.cu), and rank 0 a manifest last. By default (--checkpoint-mode snapshot)
// the weights are copied on a stream of their own beside the next step, which waits for the copy
// on the device only (snapshot.cu), and a thread writes them behind the training (writer.cu);
// --checkpoint-mode blocking stops training for the copy and the write. --checkpoint-every auto
// chooses the interval from what the first checkpoint cost (interval.cu). tools/launch --restarts R
// starts every rank again after a failure; each resumes from the newest checkpoint every rank holds
// complete (resume.cu: a torn or corrupt one is passed over) and ends with the bits of a run that
// never failed. --fault injects what the lesson is about, in a launch's first attempt only: a rank
// killed with an all-reduce issued, a checkpoint torn half way through its write, a full disk, a
// rank killed while its writer is half way through a checkpoint.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_restart.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "16_checkpoint_restart";

// Lesson 12's step, its hooks this lesson's (train.cu); the checkpoints' buffers and writer come
// after the resume point (checkpoints_setup).
static void setup(trainer *t, checkpoint_restart *cr, const options *o)
{
    ddp_state *dp = &cr->dp;
    ddp_plan_buckets(&t->model.shape, ddp_bucket_bytes(&o->dp), &dp->plan);  // lesson 12's
    step_hooks(cr);                      // train.cu: lesson 12's hooks, with the snapshot and the faults
    ddp_setup(t, dp, dist_polled_wait);  // the plan checked; streams, buffers, events; the waits polled
    CUDA_CHECK(cudaDeviceSynchronize());
}

// Faults that strike a checkpoint need one right after --fault-at-batch: usage errors, before any
// GPU work.
static void check_faults(const dist_env *d, const options *o)
{
    const char *n = d->name;
    const dist_fault *p = &o->fault;
    int batches = o->train.batches, every = o->ckpt.every;
    dist_fault_check(d, p, batches);
    int on_checkpoint = p->kind == FAULT_TORN || p->kind == FAULT_DISK_FULL || p->kind == FAULT_KILL_WRITING;
    if (on_checkpoint && !o->ckpt.root)
        usage_error(n, "--fault torn, disk-full and kill-writing break a checkpoint's write: give --checkpoint-dir");
    if (on_checkpoint && !every)
        usage_error(n, "--fault torn, disk-full and kill-writing strike the checkpoint after --fault-at-batch: give "
                       "--checkpoint-every N (auto chooses its interval as the run goes)");
    if (on_checkpoint && ((p->at_batch + 1) % every != 0 || p->at_batch + 1 >= batches))
        usage_error(n,
                    "--fault-at-batch %d: no checkpoint is written after batch %d (--checkpoint-every %d, %d batches)",
                    p->at_batch, p->at_batch, every, batches);
    if (p->kind == FAULT_KILL_WRITING && o->ckpt.mode != CKPT_SNAPSHOT)
        usage_error(n,
                    "--fault kill-writing stops the writer thread of a snapshot: it needs --checkpoint-mode snapshot");
    if (p->kind == FAULT_KILL_WRITING && every < 3)
        usage_error(n, "--fault kill-writing kills the rank two batches after the checkpoint its writer is in: it "
                       "needs --checkpoint-every 3 or more, the next checkpoint after that");
    if (p->kind == FAULT_KILL_WRITING && p->at_batch + 2 >= batches)
        usage_error(n, "--fault-at-batch %d: --fault kill-writing kills the rank two batches later, past the run's %d",
                    p->at_batch, batches);
}

// The options: the trainer's, the bucket size, the rendezvous, the checkpoints' and the faults; the
// values checked across the options.
static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    train_options_default(&o->train);
    o->train.batch = DDP_SHARD * d->world;
    ddp_options_default(&o->dp);
    arg_spec specs[40];
    int n = train_option_specs(&o->train, specs);
    ddp_step_option_specs(&o->dp, specs, &n);  // --bucket-mib, --rendezvous (the writers' words too), --timeout-s
    ckpt_option_specs(&o->ckpt, specs, &n);    // --checkpoint-dir, -every, -mode, -busy, --write-delay-ms
    dist_fault_options(&o->fault, "none|kill|torn|disk-full|kill-writing",  // fault_kind's words
                       "inject a fault, in a launch's first attempt only: SIGKILL with an all-reduce issued, die "
                       "half way through a checkpoint (torn, disk-full, kill-writing: the checkpoint after "
                       "--fault-at-batch), a full disk, SIGKILL two batches after a checkpoint whose writer "
                       "stopped half way",
                       specs, &n);
    const char
        *summary = "Train an MLP on every GPU as lesson 12 does, with checkpoints and restarts.\n" DIST_HOW_TO_RUN(
            "ranks") " [--restarts R]; which checkpoints are whole: build/tools/checkpoint-report DIR";
    args_parse(argc, argv, d->name, summary, specs, n);
    ddp_options_check(d, &o->dp, &o->train);  // lesson 12's: the bootstrap configured, the batch divisible
    ckpt_options_check(d->name, &o->ckpt, d->world);
    o->fault.attempt = dist_launch_attempt(d);
    check_faults(d, o);
}

// One rank: its state, what makes its run this run, the checkpoints it may resume from (another
// run's: one line, exit code 2, no GPU touched), then its GPU and its trainer (lesson 12's).
static void open_rank(checkpoint_restart *cr, dist_env *d, const options *o, trainer *t, rank_outputs *outs)
{
    memset(cr, 0, sizeof *cr);
    cr->dist = d;
    ddp_init(&cr->dp, d);  // lesson 12's own variant: each bucket's all-reduce under the backward pass
    cr->fault = o->fault;  // 12's dp.fault: none
    checkpointing *c = &cr->ckpt;
    c->root = o->ckpt.root;
    c->every = o->ckpt.every;
    c->auto_every = o->ckpt.every == 0;
    c->mode = o->ckpt.mode;
    c->busy_rule = o->ckpt.busy;
    c->write_delay_ms = o->ckpt.write_delay_ms;
    c->resume_from = -1;
    train_options shard;  // this rank's trainer: one shard of every batch
    ddp_shard_of(d, &o->train, &shard, outs);
    shard.check_cpu = 0;  // no CPU check: the harness makes it, and 16's loop runs without the harness
    mlp_shape s;
    const train_options *w = &o->train;  // the whole batch's
    mlp_shape_init(&s, w->in_dim, w->hidden, w->hidden_layers, w->out_dim, shard.batch);
    ckpt_run_init(&c->run, d->world, s.dims, s.layers, (long long)s.nparams, w->seed, w->batch, shard.batch, w->lr,
                  w->prep_work, (long long)ddp_bucket_bytes(&o->dp));
    find_checkpoints(cr, w->batches);  // resume.cu
    ddp_rank_open(d, t, &shard, outs, DDP_LOSS_RING);
}

int main(int argc, char **argv)
{
    checkpoint_restart cr;  // this rank's state (checkpoint_restart.h), its trainer, where it reports
    trainer t;
    rank_outputs outs;
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    options o;
    parse_options(&d, argc, argv, &o);
    open_rank(&cr, &d, &o, &t, &outs);
    dist_connect(&d);
    cr.dp.grads = d.comm;  // the gradients' all-reduces on the parent communicator, as lesson 14's
    setup(&t, &cr, &o);
    long long agreed = agree_on_checkpoint(&cr);  // the newest checkpoint every rank holds
    cr.ckpt.start = agreed >= 0 ? restore(&t, &cr, agreed) : 0;
    checkpoints_setup(&t, &cr);  // snapshot.cu: the image, the snapshot's stream, the writer thread

    double loop_ms = train_loop(&t, &cr);            // train.cu: the run, timed and traced, the test delays in it
    int ok = report(&t, &cr, loop_ms, outs.report);  // report.cu
    checkpoints_teardown(&t, &cr);
    ddp_rank_close(&cr.dp);  // lesson 12's: the step's state freed, every communicator finalized (dist_finish)
    return harness_finish(&t, ok);
}
