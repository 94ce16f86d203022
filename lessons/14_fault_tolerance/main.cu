// STUDENT VERSION of solutions/14_fault_tolerance/main.cu, made by `make lessons` (checksum 1064747610)
// No exercise in this file, read it as it stands; the TODOs are in checkpoint.cu, recorder.cu, resume.cu.
// 14_fault_tolerance: lesson 12's data-parallel training that finds out why a run hangs, and
// survives a rank that dies, losing at most --checkpoint-every batches and never a bit.
//
// build: make build/solutions/14_fault_tolerance      (where make finds NCCL: its first line says)
// run:   tools/launch -n 2 --simulate-nodes build/solutions/14_fault_tolerance --checkpoint-dir DIR
//        tools/launch -n 2 --simulate-nodes --restarts 1 build/solutions/14_fault_tolerance --checkpoint-dir DIR
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
//  - Checkpoints and restarts (checkpoint.cu, resume.cu): every --checkpoint-every batches each
//    rank writes its whole state, atomically, and rank 0 a manifest last. tools/launch
//    --restarts R starts every rank again after a failure; each resumes from the newest
//    complete checkpoint (a torn or corrupt one is passed over) and ends with the bits of a run
//    that never failed.
// --fault injects what the lesson is about, in a launch's first attempt only: a rank killed
// with an all-reduce issued (the others wait in it), a rank that skips one, buckets in another order on one rank, a
// checkpoint torn half way through its write, a full disk.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: the checkpoint folder

#include "fault_tolerance.h"  // the lesson's types, and through it the course's headers

static const char *PROG = "14_fault_tolerance";

static void setup(trainer *t, fault_tolerance *f, double bucket_mib, int ring_slots)
{
    plan_buckets(&t->model.shape, (size_t)(bucket_mib * 1048576.0), &f->plan);
    CUDA_CHECK(cudaStreamCreateWithPriority(&f->comm_stream, cudaStreamNonBlocking, t->dev.priority_greatest));
    trace_name_stream(f->comm_stream, "comm");
    size_t nparams = t->model.shape.nparams;
    f->d_sum = (float *)device_alloc(sizeof(float) * nparams);
    CUDA_CHECK(cudaMemset(f->d_sum, 0, sizeof(float) * nparams));
    f->averaged = t->model;  // lesson 12: the update reads the summed gradients at rate lr / ranks
    f->averaged.d_grads = f->d_sum;
    f->averaged.lr = t->model.lr / (float)f->dist->world;
    f->h_losses = (float *)pinned_alloc(sizeof(float) * (size_t)t->opt.batches);
    f->d_losses = (float *)device_alloc(sizeof(float) * (size_t)t->opt.batches);
    f->h_params = (float *)pinned_alloc(sizeof(float) * nparams);
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&f->copied[s], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&f->stepped[s], cudaEventDisableTiming));
    }
    loss_ring_create(&f->losses, t, 0);
    loss_ring_wait_with(&f->losses, dist_polled_wait, f->dist);  // a rank that failed stops this one's waits too
    for (int b = 0; b < MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventCreateWithFlags(&f->grads_ready[b], cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&f->reduced[b], cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&f->params_copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&f->losses_averaged, cudaEventDisableTiming));
    recorder_init(&f->rec, f->dist, ring_slots);
    f->dist->on_stop = recorder_stop_hook;  // any stop writes the ring first
    f->dist->on_stop_ctx = &f->rec;
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void teardown(fault_tolerance *f)
{
    f->dist->on_stop = NULL;
    recorder_destroy(&f->rec);
    for (int s = 0; s < SLOTS; s++) {
        CUDA_CHECK(cudaEventDestroy(f->copied[s]));
        CUDA_CHECK(cudaEventDestroy(f->stepped[s]));
    }
    loss_ring_destroy(&f->losses);
    for (int b = 0; b < MAX_BUCKETS; b++) {
        CUDA_CHECK(cudaEventDestroy(f->grads_ready[b]));
        CUDA_CHECK(cudaEventDestroy(f->reduced[b]));
    }
    CUDA_CHECK(cudaEventDestroy(f->params_copied));
    CUDA_CHECK(cudaEventDestroy(f->losses_averaged));
    device_free(f->d_sum);
    device_free(f->d_losses);
    pinned_free(f->h_losses);
    pinned_free(f->h_params);
    CUDA_CHECK(cudaStreamDestroy(f->comm_stream));
}

// Options that depend on each other or on the number of ranks: usage errors, before any GPU work.
static void check_options(const dist_env *d, const train_options *o, const fault_tolerance *f)
{
    const char *n = d->name;
    if (o->batch % d->world != 0)
        usage_error(n, "--batch %d is not divisible by the %d ranks: every rank trains on an equal shard", o->batch,
                    d->world);
    const fault_plan *p = &f->fault;
    if ((p->kind != FAULT_NONE) != (p->rank >= 0) || (p->rank >= 0) != (p->at_batch >= 0))
        usage_error(n, "--fault, --fault-rank and --fault-at-batch go together: what, which rank, at which batch");
    if (p->rank >= d->world)
        usage_error(n, "--fault-rank %d: there are %d ranks (0 to %d)", p->rank, d->world, d->world - 1);
    if (p->at_batch >= o->batches)
        usage_error(n, "--fault-at-batch %d: the run has %d batches", p->at_batch, o->batches);
    int on_checkpoint = p->kind == FAULT_TORN || p->kind == FAULT_DISK_FULL;
    if (on_checkpoint && (!f->ckpt_root || !f->ckpt_root[0]))
        usage_error(n, "--fault torn and --fault disk-full break a checkpoint's write: give --checkpoint-dir");
    if (on_checkpoint && ((p->at_batch + 1) % f->ckpt_every != 0 || p->at_batch + 1 >= o->batches))
        usage_error(n,
                    "--fault-at-batch %d: no checkpoint is written after batch %d (--checkpoint-every %d, %d batches)",
                    p->at_batch, p->at_batch, f->ckpt_every, o->batches);
    struct stat st;
    if (f->ckpt_root && f->ckpt_root[0] && (stat(f->ckpt_root, &st) != 0 || !S_ISDIR(st.st_mode)))
        usage_error(n, "--checkpoint-dir %s: no such folder", f->ckpt_root);
    if (f->ckpt_root && f->ckpt_root[0] && d->world > CKPT_MAX_RANKS)
        usage_error(n, "--checkpoint-dir: checkpoints hold at most %d ranks, this run has %d", CKPT_MAX_RANKS,
                    d->world);
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

// Every rank's weights and losses: identical everywhere, and every loss taken once. Rank 0 reports.
static int report(trainer *t, fault_tolerance *f, double loop_ms, FILE *out)
{
    dist_env *d = f->dist;
    int once = 1;
    for (int i = 0; i < t->opt.batches; i++) once = once && t->run.taken[i] == 1;
    uint64_t mine[3] = {mlp_weights_checksum(&t->model, t->compute_stream),
                        harness_loss_checksum(t->run.losses, t->opt.batches), (uint64_t)once};
    uint64_t *all = (uint64_t *)host_calloc((size_t)d->world * 3, sizeof(uint64_t), "every rank's checksums");
    recorder_allgather(&f->rec, d, t->opt.batches, mine, all, sizeof mine, t->compute_stream, "compute");
    int same = 1, every_once = 1;
    char sums[1024] = "";
    size_t n = 0;
    for (int r = 0; r < d->world; r++) {
        same = same && all[3 * r] == all[0] && all[3 * r + 1] == all[1];
        every_once = every_once && all[3 * r + 2] == 1;
        if (n < sizeof sums)
            n += (size_t)snprintf(sums + n, sizeof sums - n, "%s%016llx", r ? "," : "", (unsigned long long)all[3 * r]);
    }
    long trained = t->opt.batches - f->start;
    double step_ms = trained > 0 ? (loop_ms - f->ckpt_ms) / trained : 0;
    double ckpt_each = f->checkpoints ? f->ckpt_ms / f->checkpoints : 0;
    double per_gb = f->ckpt_bytes ? ckpt_each / (f->ckpt_bytes / 1e9) : 0;
    const char *not_perf = d->simulated ? " [simulated nodes: not performance]" : "";
    if (out) {
        dist_describe(d, out);
        if (f->resume_from >= 0)
            fprintf(out, "resumed: from the checkpoint of batch %lld (attempt %d): trained batches %ld to %d\n",
                    f->resume_from, f->attempt, f->start, t->opt.batches - 1);
        else
            fprintf(out, "started: at batch 0 (attempt %d%s)\n", f->attempt,
                    f->ckpt_root && f->ckpt_root[0] ? ", no complete checkpoint" : ", no --checkpoint-dir");
        fprintf(out, "step: %.3f ms per batch, checkpoints apart%s\n", step_ms, not_perf);
        if (f->checkpoints)
            fprintf(out,
                    "checkpoints: %ld written, %.3f ms each for %.2f MB per rank (%.1f ms per GB), %.2f%% of the "
                    "run%s\n",
                    f->checkpoints, ckpt_each, f->ckpt_bytes / 1e6, per_gb,
                    100.0 * f->ckpt_ms / (loop_ms > 0 ? loop_ms : 1), not_perf);
        fprintf(out, "flight recorder: %lld calls, the last %d kept%s; fingerprint checks: %ld\n", f->rec.calls,
                f->rec.slots, f->rec.path[0] ? "" : " (one rank, no rendezvous folder: never written)",
                f->fingerprint_checks);
        fprintf(out, "weights %016llx, losses %016llx; identical on every rank: %s; every loss taken once: %s\n",
                (unsigned long long)all[0], (unsigned long long)all[1], same ? "yes" : "NO", every_once ? "yes" : "NO");
    }
    if (t->opt.json) {
        json_writer *js = &t->js;
        dist_describe_json(d, js);
        json_int(js, "batches", t->opt.batches);
        json_int(js, "shard_batch", t->opt.batch);
        json_int(js, "attempt", f->attempt);
        json_int(js, "resumed_from", f->resume_from);
        json_int(js, "start_batch", f->start);
        json_int(js, "checkpoint_every", f->ckpt_root && f->ckpt_root[0] ? f->ckpt_every : 0);
        json_int(js, "checkpoints_written", f->checkpoints);
        json_num(js, "checkpoint_ms", ckpt_each);
        json_int(js, "checkpoint_bytes", (long long)f->ckpt_bytes);
        json_num(js, "checkpoint_ms_per_gb", per_gb);
        json_num(js, "step_ms", step_ms);
        json_int(js, "flight_calls", f->rec.calls);
        json_int(js, "fingerprint_checks", f->fingerprint_checks);
        json_int(js, "buckets", f->plan.count);
        char text[32];
        snprintf(text, sizeof text, "%016llx", (unsigned long long)all[0]);
        json_str(js, "weights_checksum", text);
        snprintf(text, sizeof text, "%016llx", (unsigned long long)all[1]);
        json_str(js, "loss_checksum", text);
        json_str(js, "weights_checksums", sums);
        json_bool(js, "ranks_identical", same);
        json_bool(js, "losses_once", every_once);
    }
    free(all);
    return same && every_once;
}

// The options: the trainer's, the bucket size, the rendezvous, and lesson 14's own (checkpoints,
// fingerprints, the recorder's size, the faults); the values checked across the options.
static void parse_options(dist_env *d, int argc, char **argv, train_options *o, fault_tolerance *f, double *bucket_mib,
                          int *ring_slots)
{
    train_options_default(o);
    o->batch = SHARD * d->world;
    memset(f, 0, sizeof *f);
    f->dist = d;
    f->ckpt_every = 10;
    f->resume_from = -1;
    f->fault.kind = FAULT_NONE;
    f->fault.rank = f->fault.at_batch = -1;
    *bucket_mib = 25;
    *ring_slots = RING_SLOTS;
    double timeout_s = DIST_TIMEOUT_S;
    const char *rendezvous = NULL;
    arg_spec specs[40];
    int n = train_option_specs(o, specs);
    specs[n++] = arg_double("bucket-mib", bucket_mib, 0.001, 4096, "MIB", "gradients per all-reduce, about");
    specs[n++] = arg_string("rendezvous", &rendezvous, "DIR",
                            "the folder every rank sees, where rank 0 leaves NCCL's id and every rank its flight "
                            "recorder ring (default: $RENDEZVOUS_DIR)");
    specs[n++] = arg_double("timeout-s", &timeout_s, 1, 3600, "S", "give up waiting for another rank after this long");
    specs[n++] = arg_string("checkpoint-dir", &f->ckpt_root, "DIR",
                            "write checkpoints into this folder, and resume from its newest complete one");
    specs[n++] = arg_int("checkpoint-every", &f->ckpt_every, 1, 1000000, "N", "batches between two checkpoints");
    specs[n++] = arg_int("fingerprint-every", &f->fingerprint_every, 0, 1000000, "N",
                         "every N batches the ranks compare their calls before they issue them; 0: never");
    specs[n++] = arg_int("ring-slots", ring_slots, 16, FLIGHT_MAX_SLOTS, "K",
                         "the flight recorder keeps the last K calls");
    specs[n++] = arg_choice("fault", &f->fault.kind, "none|kill|skip|order|torn|disk-full",
                            "inject a fault, in a launch's first attempt only: SIGKILL with an all-reduce issued, skip "
                            "one, buckets in the opposite order, die half way through a checkpoint, a full disk");
    specs[n++] = arg_int("fault-rank", &f->fault.rank, -1, 65535, "R", "with --fault: the rank it strikes; -1: none");
    specs[n++] = arg_int("fault-at-batch", &f->fault.at_batch, -1, 1000000, "N",
                         "with --fault: at this batch (torn, disk-full: the checkpoint after it); -1: none");
    const char *summary = "Train an MLP on every GPU as lesson 12 does, with a flight recorder, fingerprint checks, "
                          "checkpoints and restarts.\n" DIST_HOW_TO_RUN(
                              "ranks") " [--restarts R]; where the "
                                       "ranks went apart: build/tools/flight-report DIR";
    args_parse(argc, argv, d->name, summary, specs, n);
    dist_configure(d, rendezvous, timeout_s);
    f->attempt = launch_attempt(d->name);
    check_options(d, o, f);
}

int main(int argc, char **argv)
{
    dist_env d;
    dist_init(&d, PROG);  // who this process is: the launcher's environment, no GPU yet
    train_options o;
    fault_tolerance f;
    double bucket_mib;
    int ring_slots;
    parse_options(&d, argc, argv, &o, &f, &bucket_mib, &ring_slots);

    train_options shard = o;  // this rank's trainer: one shard of every batch
    shard.batch = o.batch / d.world;
    shard.check_cpu = 0;
    char trace_path[1100];
    FILE *out = dist_rank_outputs(&d, &shard, trace_path, sizeof trace_path);  // rank 0 reports for every rank
    mlp_shape shape;
    mlp_shape_init(&shape, o.in_dim, o.hidden, o.hidden_layers, o.out_dim, shard.batch);
    ckpt_run_init(&f.run, d.world, shape.dims, shape.layers, (long long)shape.nparams, o.seed, o.batch, shard.batch,
                  o.lr, o.prep_work, (long long)(bucket_mib * 1048576.0));
    long long found = find_checkpoint(&f, o.batches);  // another run's: one line, exit code 2, no GPU touched

    dist_select_device(&d);
    trainer t;
    trainer_init(&t, d.name, &shard, SLOTS, SLOTS, LOSS_RING);
    dist_connect(&d);
    setup(&t, &f, bucket_mib, ring_slots);
    f.start = found >= 0 ? restore(&t, &f, found) : 0;

    double t0 = host_now_ms();
    trace_range run = trace_begin(TL_RANGE_PHASE, "run", -1);
    train_loop(&t, &f);
    CUDA_CHECK(dist_event_wait(&d, f.losses_averaged));
    trace_end(&run);
    int ok = report(&t, &f, host_now_ms() - t0, out);
    recorder_write(&f.rec, ok ? "- (the run ended)" : "the run ended, its checks FAILED");
    teardown(&f);
    dist_finish(&d);
    return harness_finish(&t, ok);
}
