// dist_env.c: who this process is, from its launcher's environment; the rendezvous folder and the
// time limit (options, then dist_configure); its GPU; the names the report uses (dist.h).
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>  // stat: the folder

#include "common/base/args.h"   // parse_int, usage_error
#include "common/base/check.h"  // CUDA_CHECK
#include "common/dist/dist.h"
#include "common/dist/dist_parts.h"  // dist_note_early_exit
#include "common/base/exit_codes.h"  // EXIT_NO_GPU
#include "common/base/own_file.h"    // own_folder_check: the rendezvous folder is this user's
#include "common/base/timing.h"      // wall_clock_s

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

// Reads an integer variable; returns 0 when it is not set. A value that is not a whole number
// in [min, max] is a usage error.
static int read_env(const char *prog, const char *var, int min, int max, int *out)
{
    const char *text = getenv(var);
    if (!text || !*text) return 0;
    long long v = 0;
    if (!parse_int(text, &v) || v < min || v > max)
        usage_error(prog, "%s=%s: expected a whole number from %d to %d (set by the launcher)", var, text, min, max);
    *out = (int)v;
    return 1;
}

static int names_a_file(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

// A run id becomes part of file names: letters, digits, '.', '_' and '-' are kept, every other
// byte is written %XX (its two hex digits; '%' itself too), so that two ids never name the same
// files ("a:b" names a%3Ab, "a_b" stays a_b; once both were a_b). An id too long for `out` so
// written is refused, never cut: two ids that differ only past the cut would name the same files
// (an attempt of a launch would read the NCCL id, notes and rings of the one before).
static void safe_copy(const char *prog, const char *from, char *out, size_t size, const char *text)
{
    size_t need = 0, n = 0;
    for (const char *p = text; *p; p++) need += names_a_file(*p) ? 1 : 3;
    if (need >= size && need == strlen(text))
        usage_error(prog,
                    "the run id %s (from %s) has %zu characters, where at most %zu fit (it names the run's files "
                    "in the rendezvous folder): give the ranks a shorter RUN_ID",
                    text, from, need, size - 1);
    if (need >= size)
        usage_error(prog,
                    "the run id %s (from %s) names its files with %zu characters (each one other than letters, "
                    "digits, '.', '_' and '-' written %%XX), where at most %zu fit: give the ranks a shorter RUN_ID",
                    text, from, need, size - 1);
    for (; *text && n + 3 < size; text++) {
        if (names_a_file(*text))
            out[n++] = *text;
        else
            n += (size_t)snprintf(out + n, size - n, "%%%02X", (unsigned)(unsigned char)*text);
    }
    out[n] = '\0';
}

typedef struct {
    int rank, world, local, local_world;
} placement;

// srun starts every task of a step with SLURM_STEP_ID set; a batch script's own shell has
// SLURM_PROCID=0 and the allocation's SLURM_NTASKS too, but is no task of a step (its step id,
// when set, is one of Slurm's reserved values near 2^32).
static int under_srun(void)
{
    const char *step = getenv("SLURM_STEP_ID");
    return getenv("SLURM_PROCID") && getenv("SLURM_NTASKS") && step && *step && strtoul(step, NULL, 10) < 4294967290UL;
}

// The launcher and where it placed this process; the run's id from the launcher when it has one.
static dist_launcher read_launcher(const char *prog, placement *p, char *run, size_t size)
{
    const char *id = NULL, *from = "RUN_ID";
    dist_launcher l = DIST_ALONE;
    p->rank = 0, p->world = 1, p->local = -1, p->local_world = 0;
    if (getenv("RANK") || getenv("WORLD_SIZE")) {
        l = DIST_LAUNCH;
        if (!read_env(prog, "WORLD_SIZE", 1, 65536, &p->world))
            usage_error(prog, "RANK is set but WORLD_SIZE is not: run under tools/launch, torchrun, mpirun or srun");
        if (!read_env(prog, "RANK", 0, 65535, &p->rank))
            usage_error(prog, "WORLD_SIZE is set but RANK is not: run under tools/launch, torchrun, mpirun or srun");
        read_env(prog, "LOCAL_RANK", 0, 65535, &p->local);
        read_env(prog, "LOCAL_WORLD_SIZE", 1, 65536, &p->local_world);
        id = getenv("RUN_ID");
        if (!id || !*id) id = getenv("TORCHELASTIC_RUN_ID"), from = "TORCHELASTIC_RUN_ID";
    } else if (getenv("OMPI_COMM_WORLD_RANK")) {
        l = DIST_MPIRUN;
        read_env(prog, "OMPI_COMM_WORLD_SIZE", 1, 65536, &p->world);
        read_env(prog, "OMPI_COMM_WORLD_RANK", 0, 65535, &p->rank);
        read_env(prog, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 65535, &p->local);
        read_env(prog, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 65536, &p->local_world);
        id = getenv("PMIX_NAMESPACE"), from = "PMIX_NAMESPACE";  // Open MPI 5: one per mpirun
    } else if (under_srun()) {
        l = DIST_SRUN;
        read_env(prog, "SLURM_NTASKS", 1, 65536, &p->world);
        read_env(prog, "SLURM_PROCID", 0, 65535, &p->rank);
        read_env(prog, "SLURM_LOCALID", 0, 65535, &p->local);
        read_env(prog, "SLURM_NTASKS_PER_NODE", 1, 65536, &p->local_world);  // set when srun was told
        static char step[256];
        snprintf(step, sizeof step, "slurm-%s.%s", getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "job",
                 getenv("SLURM_STEP_ID"));
        id = step, from = "srun's job and step";  // one per srun: a fresh id for every launch
    }
    if (p->local < 0) p->local = p->rank;
    if (getenv("RUN_ID") && *getenv("RUN_ID")) id = getenv("RUN_ID"), from = "RUN_ID";  // an id given wins
    safe_copy(prog, from, run, size, id && *id ? id : "run");
    return l;
}

void dist_init(dist_env *d, const char *prog)
{
    memset(d, 0, sizeof *d);
    d->prog = prog;
    d->timeout_s = DIST_TIMEOUT_S;
    d->started_s = wall_clock_s();
    placement p;
    d->launcher = read_launcher(prog, &p, d->run, sizeof d->run);
    if (p.rank >= p.world)
        usage_error(prog, "rank %d is not below the world size %d (the launcher's environment)", p.rank, p.world);
    if (p.local_world && p.local >= p.local_world)
        usage_error(prog, "LOCAL_RANK %d is not below LOCAL_WORLD_SIZE %d (the launcher's environment)", p.local,
                    p.local_world);
    if (p.local_world > p.world)
        usage_error(prog, "LOCAL_WORLD_SIZE %d is larger than WORLD_SIZE %d (the launcher's environment)",
                    p.local_world, p.world);
    d->rank = p.rank;
    d->world = p.world;
    d->local_rank = p.local;
    d->local_world = p.local_world;
    const char *sim = getenv("SIMULATED_NODES");
    d->simulate_asked = sim && strcmp(sim, "1") == 0;
    if (d->world > 1)
        snprintf(d->name, sizeof d->name, "%s rank %d", prog, d->rank);
    else
        snprintf(d->name, sizeof d->name, "%s", prog);
    // NVLink multicast (NVLS) stays off on the shared machines, whoever starts us
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    dist_note_early_exit(d);
}

void dist_option_specs(dist_options *o, arg_spec *specs, int *n)
{
    o->rendezvous = NULL;
    o->timeout_s = DIST_TIMEOUT_S;
    specs[(*n)++] = arg_string("rendezvous", &o->rendezvous, "DIR",
                               "the folder every rank sees, where rank 0 leaves NCCL's id (default: $RENDEZVOUS_DIR)");
    specs[(*n)++] = arg_double("timeout-s", &o->timeout_s, 1, 3600, "S",
                               "give up waiting for another rank after this long");
}

void dist_configure(dist_env *d, const char *folder, double timeout_s)
{
    d->timeout_s = timeout_s;
    const char *from = "--rendezvous";
    if (!folder || !*folder) {
        folder = getenv("RENDEZVOUS_DIR");
        from = "RENDEZVOUS_DIR";
    }
    if (folder && *folder) {
        struct stat st;
        if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
            usage_error(d->name, "%s %s: no such folder (the rendezvous folder must exist and be shared by every rank)",
                        from, folder);
        char why[1300];
        if (own_folder_check(folder, why, sizeof why) != 0) usage_error(d->name, "%s %s", from, why);
        if (strlen(folder) >= sizeof d->folder - 64) usage_error(d->name, "%s %s: the path is too long", from, folder);
        snprintf(d->folder, sizeof d->folder, "%s", folder);
    } else if (d->world > 1) {
        usage_error(d->name,
                    "%d ranks need a rendezvous folder that every rank sees: --rendezvous DIR or "
                    "RENDEZVOUS_DIR (tools/launch makes one)",
                    d->world);
    }
}

void dist_select_device(dist_env *d)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return;  // gpu_open says why (exit code 3)
    int need = d->local_world > 0 ? d->local_world : d->local_rank + 1;
    if (need > count) {
        stderr_line("%s: no usable GPU for this rank: %d ranks on this machine need as many GPUs, %d visible "
                    "(tools/launch --simulate-nodes runs them on one GPU, each a node of its own)",
                    d->name, need, count);
        exit(EXIT_NO_GPU);
    }
    CUDA_CHECK(cudaSetDevice(d->local_rank));
}

void dist_nccl_version(char *out, size_t size)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    snprintf(out, size, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
}

const char *dist_launcher_name(dist_launcher l)
{
    return l == DIST_LAUNCH   ? "tools/launch or torchrun"
           : l == DIST_MPIRUN ? "mpirun"
           : l == DIST_SRUN   ? "srun"
                              : "none";
}

void dist_describe(const dist_env *d, FILE *out)
{
    char version[32];
    dist_nccl_version(version, sizeof version);
    fprintf(out, "ranks: %d on %d GPU%s (launcher: %s, NCCL %s)%s\n", d->world, d->gpus, d->gpus == 1 ? "" : "s",
            dist_launcher_name(d->launcher), version,
            d->simulated ? "; SIMULATED NODES: the ranks share GPUs and talk over loopback sockets, so no timing "
                           "below is a performance figure"
                         : "");
}

extern char **environ;  // the process's environment (POSIX): unistd.h declares it only under _GNU_SOURCE

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// "NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0": the NCCL_* variables of the environment, sorted, into out
// (cut short at its size).
static void nccl_env_text(char *out, size_t size)
{
    const char *found[256];
    int n = 0;
    for (char **e = environ; e && *e && n < 256; e++)
        if (strncmp(*e, "NCCL_", 5) == 0) found[n++] = *e;
    qsort(found, (size_t)n, sizeof found[0], by_name);
    size_t at = 0;
    out[0] = '\0';
    for (int k = 0; k < n && at < size; k++)
        at += (size_t)snprintf(out + at, size - at, "%s%s", k ? " " : "", found[k]);
}

void dist_describe_json(const dist_env *d, json_writer *js)
{
    char version[32];
    dist_nccl_version(version, sizeof version);
    json_int(js, "world_size", d->world);
    json_str(js, "launcher", dist_launcher_name(d->launcher));
    json_str(js, "nccl_version", version);
    json_int(js, "gpus", d->gpus);
    json_bool(js, "simulated_nodes", d->simulated);
    json_bool(js, "performance", !d->simulated);  // false: the timings are not performance figures
    char env[2048];
    nccl_env_text(env, sizeof env);
    json_str(js, "nccl_env", env);
}
