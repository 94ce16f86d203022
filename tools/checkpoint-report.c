// checkpoint-report: which of lesson 14's checkpoints under a folder are complete, why the
// others are not, and where a restart would resume. Reads the files only: no GPU.
//
//   checkpoint-report ROOT [--world W] [--shape 64,256,8]
//
// One line per checkpoint folder, newest first ("ckpt-00000019: complete: batch 19, 2 ranks,
// shape 64,256,8" or "ckpt-00000029: skipped: ROOT/ckpt-00000029/rank1.bin: torn: ..."), then
// "resume: at batch 20 from ckpt-00000019" (or "resume: at batch 0, no complete checkpoint").
// With --world or --shape, a newest complete checkpoint of another rank count or model shape
// is refused as lesson 14 refuses it: one line on stderr, exit code 2.
// Exit codes: 0 a checkpoint to resume from, 1 none, 2 bad usage or a checkpoint of another run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"  // defines: arg_spec, arg_int, arg_string, args_parse_files, usage_error
#include "common/ckpt.h"  // defines: ckpt_list, ckpt_check, ckpt_manifest, CKPT_MAX_RANKS

#define PROG "checkpoint-report"

int main(int argc, char **argv)
{
    const char *shape = NULL, *files[1] = {NULL};
    int world = 0;
    const arg_spec specs[] = {
        arg_int("world", &world, 0, CKPT_MAX_RANKS, "W",
                "the run's rank count: refuse a checkpoint of another (0: any)"),
        arg_string("shape", &shape, "DIMS", "the run's layer widths, e.g. 64,256,8: refuse a checkpoint of another"),
    };
    int n = args_parse_files(argc, argv, PROG,
                             "Say which of lesson 14's checkpoints under ROOT are complete, why the others are not, "
                             "and where a restart would resume.",
                             specs, (int)(sizeof specs / sizeof specs[0]), "ROOT", files, 1);
    if (n != 1) usage_error(PROG, "give the checkpoint folder (--checkpoint-dir of lesson 14; try --help)");
    long long batches[1024];
    int count = ckpt_list(files[0], batches, 1024);
    long long resume = -1;
    ckpt_manifest m, use;
    for (int k = 0; k < count; k++) {
        char why[1400];
        if (ckpt_check(files[0], batches[k], &m, why, sizeof why) != 0) {
            printf("ckpt-%08lld: skipped: %s\n", batches[k], why);
            continue;
        }
        printf("ckpt-%08lld: complete: batch %lld, %d rank%s, shape %s\n", batches[k], m.batch, m.world,
               m.world == 1 ? "" : "s", m.shape);
        if (resume < 0) {
            resume = batches[k];
            use = m;
        }
    }
    if (resume < 0) {
        printf("resume: at batch 0, no complete checkpoint\n");
        return EXIT_FAILURE;
    }
    if (world && use.world != world)
        usage_error(PROG, "ckpt-%08lld holds %d ranks, this run has %d: a checkpoint of another run", resume, use.world,
                    world);
    if (shape && strcmp(use.shape, shape) != 0)
        usage_error(PROG, "ckpt-%08lld holds a model of shape %s, this run's is %s: a checkpoint of another run",
                    resume, use.shape, shape);
    printf("resume: at batch %lld from ckpt-%08lld\n", resume + 1, resume);
    return EXIT_SUCCESS;
}
