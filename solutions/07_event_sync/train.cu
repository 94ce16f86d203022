// 07_event_sync: the same loop, ordered with events instead of stream synchronisation.
//
// build: make build/solutions/07_event_sync
// run:   build/solutions/07_event_sync [--batches 200] [--prep-work 4] [--json]
//
// Two changes from 06. The compute stream waits for the copy on the device
// (cudaStreamWaitEvent): the host no longer waits for the copy. And the host
// waits for an event recorded after the step (cudaEventSynchronize) where 06
// synchronised the compute stream. That second wait sits at the same point, so it
// costs what 06's cost: events say *what* to wait for, the gain comes in 08 from
// waiting less often. Then the loop runs twice more: the host spinning in its
// wait (the default) and sleeping in it (cudaEventBlockingSync), to show what
// each costs in CPU time.
#include <stdio.h>
#include <stdlib.h>

#include "common/args.h"   // defines: arg_spec, args_parse
#include "common/check.h"  // defines: CUDA_CHECK
#include "common/train.h"  // defines: trainer, trainer_init, trainer_run, trainer_prepare, trainer_step,
                           //          trainer_sync_event, trainer_take_loss, trainer_time_loop

static const char *PROG = "07_event_sync";

#define LOSS_READ_INTERVAL 10  // the seeds read the loss back every 10 batches

static struct {
    cudaEvent_t copied;   // the batch has landed in d_batch
    cudaEvent_t stepped;  // the step (and the loss copy) has finished
} ev;

// `wait_flags` is 0 (the host spins while it waits) or cudaEventBlockingSync (it sleeps).
static void create_events(unsigned wait_flags)
{
    // events used only for ordering and waiting need no timestamps
    CUDA_CHECK(cudaEventCreateWithFlags(&ev.copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&ev.stepped, cudaEventDisableTiming | wait_flags));
}

static void destroy_events(void)
{
    CUDA_CHECK(cudaEventDestroy(ev.copied));
    CUDA_CHECK(cudaEventDestroy(ev.stepped));
}

// ----------------------------------------------------------------------------
// the training loop

static void train_loop(trainer *t)
{
    float *h_batch = t->h_batch[0], *d_batch = t->d_batch[0];
    for (long i = 0; i < t->opt.batches; i++) {
        trainer_prepare(t, i, h_batch);  // the host's work: generate, augment, normalise
        CUDA_CHECK(cudaMemcpyAsync(d_batch, h_batch, t->batch_bytes, cudaMemcpyHostToDevice, t->copy_stream));
        // BEGIN SOLUTION(07-copy-event): order the step after the copy on the device, not on the host: mark the copy's end with one of the events in `ev`, and find the call that makes another stream wait for an event
        CUDA_CHECK(cudaEventRecord(ev.copied, t->copy_stream));
        CUDA_CHECK(cudaStreamWaitEvent(t->compute_stream, ev.copied, 0));
        // END SOLUTION
        trainer_step(t, i, d_batch, t->compute_stream);
        CUDA_CHECK(cudaMemcpyAsync(&t->h_loss[i % t->loss_slots], trainer_loss_slot(t, i), sizeof(float),
                                   cudaMemcpyDeviceToHost, t->compute_stream));
        // BEGIN SOLUTION(07-step-event): where 06 synchronised the compute stream, wait instead for an event that marks the end of the step and its loss copy (counted, like 06's wait)
        CUDA_CHECK(cudaEventRecord(ev.stepped, t->compute_stream));
        trainer_sync_event(t, ev.stepped);
        // END SOLUTION
        if ((i + 1) % LOSS_READ_INTERVAL == 0 || i == t->opt.batches - 1)
            for (long k = i - i % LOSS_READ_INTERVAL; k <= i; k++) trainer_take_loss(t, k);
    }
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv)
{
    train_options o;
    train_options_default(&o);
    arg_spec specs[32];
    int n = train_option_specs(&o, specs);
    args_parse(argc, argv, PROG, "Train an MLP, ordering copy and step with CUDA events.", specs, n);

    trainer t;
    trainer_init(&t, PROG, &o, 1, 1, LOSS_READ_INTERVAL);
    create_events(0);
    int ok = trainer_run(&t, train_loop);

    // spin or sleep: the same loop, only the host's way of waiting changes
    run_result spin = trainer_time_loop(&t, train_loop, o.reps);
    destroy_events();
    create_events(cudaEventBlockingSync);
    run_result sleep = trainer_time_loop(&t, train_loop, o.reps);
    destroy_events();
    FILE *out = o.json ? stderr : stdout;
    fprintf(out, "waiting mode      step       CPU per step   host blocked per batch\n");
    fprintf(out, "spin (default)    %.3f ms   %.3f ms       %.3f ms\n", spin.step_ms, spin.cpu_ms_per_step,
            spin.blocked_ms_per_batch);
    fprintf(out, "blocking sync     %.3f ms   %.3f ms       %.3f ms\n", sleep.step_ms, sleep.cpu_ms_per_step,
            sleep.blocked_ms_per_batch);
    if (o.json) {
        json_num(&t.js, "spin_step_ms", spin.step_ms);
        json_num(&t.js, "spin_cpu_ms_per_step", spin.cpu_ms_per_step);
        json_num(&t.js, "blocking_step_ms", sleep.step_ms);
        json_num(&t.js, "blocking_cpu_ms_per_step", sleep.cpu_ms_per_step);
    }
    return trainer_finish(&t, ok);
}
