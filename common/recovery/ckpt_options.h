// ckpt_options.h: the options of a run that takes checkpoints (lesson 16): --checkpoint-dir,
// --checkpoint-every N|auto, --checkpoint-mode blocking|snapshot, --checkpoint-busy wait|skip and
// --write-delay-ms, a test delay. Host-only C.
#ifndef COMMON_CKPT_OPTIONS_H
#define COMMON_CKPT_OPTIONS_H

#include "common/base/args.h"  // arg_spec

#ifdef __cplusplus
extern "C" {
#endif

// How a checkpoint is taken (--checkpoint-mode): the main thread copies the weights and writes the
// files while training waits (blocking), or a snapshot is copied on a stream of its own beside the
// next step and a thread writes it (snapshot).
typedef enum { CKPT_BLOCKING, CKPT_SNAPSHOT } ckpt_mode;  // --checkpoint-mode's words, in this order

// What a checkpoint that comes due while the one before is still being written does
// (--checkpoint-busy): the main thread waits for the writer, or the checkpoint is skipped.
typedef enum { BUSY_WAIT, BUSY_SKIP } ckpt_busy;  // --checkpoint-busy's words, in this order

typedef struct {
    const char *root;  // --checkpoint-dir: NULL when none (an empty one is none too)
    const char *every_text;
    int every;           // --checkpoint-every: 0 auto
    int mode;            // a ckpt_mode: snapshot by default
    int busy;            // a ckpt_busy: wait by default
    int write_delay_ms;  // --write-delay-ms: the writer sleeps this long before each rank's file
} ckpt_options;

// The options, with their defaults, appended to specs[*n].
void ckpt_option_specs(ckpt_options *o, arg_spec *specs, int *n);
// After args_parse: --checkpoint-every read (auto: 0), the folder there, the run's world within a
// checkpoint's; a usage error (exit code 2) names what is wrong.
void ckpt_options_check(const char *name, ckpt_options *o, int world);

#ifdef __cplusplus
}
#endif
#endif
