// run-ids.c: the name a rank gives its run's files (common/dist/dist_env.c's dist_init, the real
// file, built host-only beside this one), from the launcher's environment as given: prints it.
//   env RANK=0 WORLD_SIZE=2 RUN_ID=a:b run-ids        ->  a%3Ab
// Built by tests/14_fault_tolerance.bats. An id refused is dist_init's own line and exit code 2.
#include <stdio.h>

#include "common/dist/dist.h"

// What dist_init calls that this check does not need: the note at an early exit, NCCL's version.
void dist_note_early_exit(dist_env *d) { (void)d; }
ncclResult_t ncclGetVersion(int *version) { return *version = 0, ncclSuccess; }

int main(void)
{
    dist_env d;
    dist_init(&d, "run-ids");
    printf("%s\n", d.run);
    return 0;
}
