// ckpt_options.c: the options of a run that takes checkpoints (ckpt_options.h).
#include "common/recovery/ckpt_options.h"

#include <string.h>
#include <sys/stat.h>  // stat: the checkpoint folder

#include "common/recovery/ckpt.h"  // CKPT_MAX_RANKS

void ckpt_option_specs(ckpt_options *o, arg_spec *specs, int *n)
{
    memset(o, 0, sizeof *o);
    o->mode = CKPT_SNAPSHOT;
    o->busy = BUSY_WAIT;
    o->every_text = "auto";
    specs[(*n)++] = arg_string("checkpoint-dir", &o->root, "DIR",
                               "write checkpoints into this folder, and resume from its newest complete one");
    specs[(*n)++] = arg_string("checkpoint-every", &o->every_text, "N|auto",
                               "batches between two checkpoints; auto: the first after 10 batches measures one, then "
                               "the smallest interval its write fits in (by 1.5 times) at a cost of at most 3.5% of "
                               "the step");
    specs[(*n)++] = arg_choice("checkpoint-mode", &o->mode, "blocking|snapshot",
                               "blocking: training waits while the weights are copied and written; snapshot: they "
                               "are copied on a stream of their own beside the next step and written by a thread");
    specs[(*n)++] = arg_choice("checkpoint-busy", &o->busy, "wait|skip",
                               "a checkpoint due while the one before is still being written: wait for the writer, "
                               "or skip it (snapshot)");
    specs[(*n)++] = arg_int("write-delay-ms", &o->write_delay_ms, 0, 600000, "MS",
                            "a test delay: the writer sleeps this long before each file (snapshot)");
}

void ckpt_options_check(const char *name, ckpt_options *o, int world)
{
    long long v = 0;
    if (o->root && !o->root[0]) o->root = NULL;  // --checkpoint-dir "": none, said once here
    if (strcmp(o->every_text, "auto") == 0)
        o->every = 0;
    else if (parse_int(o->every_text, &v) && v >= 1 && v <= 1000000)
        o->every = (int)v;
    else
        usage_error(name, "--checkpoint-every expects auto or a whole number from 1 to 1000000, got '%s'",
                    o->every_text);
    struct stat st;
    if (o->root && (stat(o->root, &st) != 0 || !S_ISDIR(st.st_mode)))
        usage_error(name, "--checkpoint-dir %s: no such folder", o->root);
    if (o->root && world > CKPT_MAX_RANKS)
        usage_error(name, "--checkpoint-dir: checkpoints hold at most %d ranks, this run has %d", CKPT_MAX_RANKS,
                    world);
}
