// checkpoint-report: which of lesson 16's checkpoints under a folder are complete, why the
// others are not, and where a restart would resume. Reads the files only: no GPU.
//
//   checkpoint-report ROOT [--world W] [--shape 64,256,8] [--prune BATCH]
//
// One line per checkpoint folder, newest first ("ckpt-00000019: complete: batch 19, 2 ranks,
// shape 64,256,8" or "ckpt-00000029: skipped: ROOT/ckpt-00000029/rank1.bin: torn: ..."), then
// "resume: at batch 20 from ckpt-00000019" (or "resume: at batch 0, no complete checkpoint").
// With --world or --shape, a newest complete checkpoint of another rank count or model shape
// is refused as lesson 16 refuses it: one line on stderr, exit code 2. --prune BATCH first
// removes what lesson 16's rank 0 removes once checkpoint BATCH is complete (common/recovery/ckpt.h,
// ckpt_prune): older folders without a manifest, and complete ones beyond the newest two.
// A file is read as untrusted input: no size in it is allocated before it is checked against
// the file's (tests/tools.bats feeds it mutated checkpoints under the sanitizers).
// Exit codes: 0 a checkpoint to resume from, 1 none, 2 bad usage (no such folder) or a
// checkpoint of another run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"      // defines: arg_spec, arg_int, arg_string, args_parse_files, usage_error
#include "common/recovery/ckpt.h"  // defines: ckpt_list, ckpt_check, ckpt_manifest, ckpt_run_differs, ckpt_prune,
                                   //          CKPT_FIELD, CKPT_MAX_RANKS, ckpt_shape_valid

#define PROG "checkpoint-report"

int main(int argc, char **argv)
{
    const char *shape = NULL, *files[1] = {NULL};
    int world = 0, prune = -1;
    const arg_spec specs[] = {
        arg_int("world", &world, 0, CKPT_MAX_RANKS, "W",
                "the run's rank count: refuse a checkpoint of another (0: any)"),
        arg_string("shape", &shape, "DIMS", "the run's layer widths, e.g. 64,256,8: refuse a checkpoint of another"),
        arg_int("prune", &prune, -1, 2147483647, "BATCH",
                "first remove what lesson 16 removes once checkpoint BATCH is complete (-1: nothing)"),
    };
    int n = args_parse_files(argc, argv, PROG,
                             "Say which of lesson 16's checkpoints under ROOT are complete, why the others are not, "
                             "and where a restart would resume.",
                             specs, (int)(sizeof specs / sizeof specs[0]), "ROOT", files, 1);
    if (n != 1) usage_error(PROG, "give the checkpoint folder (--checkpoint-dir of lesson 16; try --help)");
    if (shape && !ckpt_shape_valid(shape))
        usage_error(PROG, "--shape expects layer widths from 1, at least two, e.g. 64,256,8, got '%s'", shape);
    long long *batches = NULL;
    if (prune >= 0) ckpt_prune(files[0], prune, NULL, 0);  // nothing known: every checkpoint kept is verified
    int count = ckpt_list(files[0], &batches);
    if (count < 0) usage_error(PROG, "%s: no such folder (or it cannot be read)", files[0]);
    long long resume = -1;
    ckpt_manifest m, use;
    for (int k = 0; k < count; k++) {
        char why[1400];
        if (ckpt_check(files[0], batches[k], &m, why, sizeof why) != 0) {
            printf("ckpt-%08lld: skipped: %s\n", batches[k], why);
            continue;
        }
        printf("ckpt-%08lld: complete: batch %lld, %d rank%s, shape %s\n", batches[k], m.batch, m.run.world,
               m.run.world == 1 ? "" : "s", m.run.shape);
        if (resume < 0) {
            resume = batches[k];
            use = m;
        }
    }
    free(batches);
    if (resume < 0) {
        printf("resume: at batch 0, no complete checkpoint\n");
        return EXIT_FAILURE;
    }
    ckpt_run want = use.run;  // the fields the options name; the others as the checkpoint's
    unsigned fields = 0;
    if (world) {
        want.world = world;
        fields |= CKPT_FIELD(CKPT_WORLD);
    }
    if (shape) {
        snprintf(want.shape, sizeof want.shape, "%s", shape);
        fields |= CKPT_FIELD(CKPT_SHAPE);
    }
    char why[400];
    if (ckpt_run_differs(&use.run, &want, fields, why, sizeof why))
        usage_error(PROG, "ckpt-%08lld %s: a checkpoint of another run", resume, why);
    printf("resume: at batch %lld from ckpt-%08lld\n", resume + 1, resume);
    return EXIT_SUCCESS;
}
