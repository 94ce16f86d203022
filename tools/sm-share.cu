// sm-share: what an NCCL kernel running beside a matrix product costs the product. An NCCL
// kernel holds an SM per CTA from its launch to its end, waiting for its peer included; a
// cuBLAS product sized for every SM then runs on the SMs left, often in one more wave.
// Lessons 12 and 13 meet this (notes/12, notes/13); this tool measures it apart, round-robin,
// on rank 0 (rank 1 is the peer):
//
//   alone      the product, nothing beside it
//   waiting    beside a receive whose send comes only after the product (a receive posted early)
//   allreduce  beside all-reduces moving data the whole time (lesson 12's buckets)
//   sendrecv   beside sends and receives moving data the whole time (lesson 13's hand-overs)
//
// for each cap on NCCL's CTAs (--ctas: ncclConfig_t.maxCTAs of a communicator split for it; 0:
// NCCL's choice), with cuBLAS sizing its products for every SM, and for every SM but the cap
// (cublasSetSmCountTarget).
//
// build: make build/tools/sm-share (where make finds NCCL)
// run:   tools/launch -n 2 build/tools/sm-share [--shapes 8192x128x8192,4096x512x4096] [--json]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/args.h"    // defines: arg_spec, arg_int, arg_string, arg_flag, args_parse, usage_error
#include "common/base/check.h"   // defines: CUDA_CHECK, CUBLAS_CHECK
#include "common/gpu/device.h"   // defines: device_info, gpu_open
#include "common/dist/dist.h"    // defines: dist_env, dist_init, dist_configure, dist_select_device, dist_connect,
                                 //          NCCL_CHECK, dist_event_wait, dist_split_ready, dist_finish
#include "common/base/json.h"    // defines: json_writer, json_begin, json_num, json_int, json_str, json_end
#include "common/gpu/kernels.h"  // defines: launch_spin
#include "common/gpu/memory.h"   // defines: device_alloc, pinned_alloc, host_calloc
#include "common/base/timing.h"  // defines: stats_of, event_ms

#include "common/base/stderr_line.h"  // defines: stderr_by_lines

#define MAX_CTAS 8     // cap values tried at most
#define MAX_SHAPES 4   // product shapes at most
#define MAX_ROUNDS 21  // rounds at most
#define WORKSPACE_BYTES (32u << 20)

typedef enum { ALONE, WAITING, ALLREDUCE, SENDRECV, CONDITIONS } condition;
static const char *const CONDITION_NAMES[CONDITIONS] = {"alone", "waiting", "allreduce", "sendrecv"};

typedef struct {
    int rows, cols, inner;
} shape;

typedef struct {
    dist_env *d;
    device_info dev;
    cublasHandle_t blas;
    cudaStream_t compute, link;
    float *a, *b, *c, *send, *recv;
    double *d_agreed, *h_agreed;  // what every rank must agree on, through an all-reduce (max)
    size_t floats;                // of each message
    int reps;                     // products per timing
    cudaEvent_t ev[3];            // around the products; the link stream's end
    ncclComm_t comm;              // the communicator of the cap being measured
} probe;

__global__ void fill_kernel(float *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        x[i] = (float)(h >> 8) / 16777216.0f - 0.5f;  // never zeros: they can run faster than data
    }
}

static float *filled(size_t n, unsigned seed)
{
    float *x = (float *)device_alloc(sizeof(float) * n);
    fill_kernel<<<256, 256>>>(x, n, seed);
    CUDA_CHECK(cudaGetLastError());
    return x;
}

// Every rank waits here for the others: a one-float all-reduce, waited for on the host.
static void line_up(probe *p)
{
    NCCL_CHECK(p->d, ncclAllReduce(p->recv, p->recv, 1, ncclFloat, ncclSum, p->comm, p->link));
    CUDA_CHECK(cudaEventRecord(p->ev[2], p->link));
    CUDA_CHECK(dist_event_wait(p->d, p->ev[2]));
}

// Ranks 0 and 1 swap one message each way (a group: neither waits for the other to post first).
static void swap_messages(probe *p)
{
    int peer = 1 - p->d->rank;
    NCCL_CHECK(p->d, ncclGroupStart());
    NCCL_CHECK(p->d, ncclSend(p->send, p->floats, ncclFloat, peer, p->comm, p->link));
    NCCL_CHECK(p->d, ncclRecv(p->recv, p->floats, ncclFloat, peer, p->comm, p->link));
    NCCL_CHECK(p->d, ncclGroupEnd());
}

// What runs beside the products, on the link stream, issued before them; `hold_ns` and `repeat`
// from the calibration: the send comes after the products, the moving data outlasts them.
static void beside(probe *p, condition c, long long hold_ns, int repeat)
{
    int r = p->d->rank;
    if (c == WAITING && r == 0) NCCL_CHECK(p->d, ncclRecv(p->recv, p->floats, ncclFloat, 1, p->comm, p->link));
    if (c == WAITING && r == 1) {
        launch_spin(1, 32, hold_ns, p->link);
        NCCL_CHECK(p->d, ncclSend(p->send, p->floats, ncclFloat, 0, p->comm, p->link));
    }
    for (int k = 0; c == ALLREDUCE && k < repeat; k++)
        NCCL_CHECK(p->d, ncclAllReduce(p->send, p->recv, p->floats, ncclFloat, ncclSum, p->comm, p->link));
    for (int k = 0; c == SENDRECV && r < 2 && k < repeat; k++) swap_messages(p);
}

// `reps` products of shape s on the compute stream, beside condition c: milliseconds per product.
static double time_products(probe *p, const shape *s, condition c, long long hold_ns, int repeat)
{
    const float one = 1.0f, zero = 0.0f;
    line_up(p);
    beside(p, c, hold_ns, repeat);
    CUDA_CHECK(cudaEventRecord(p->ev[0], p->compute));
    for (int k = 0; k < p->reps; k++)
        CUBLAS_CHECK(cublasSgemm(p->blas, CUBLAS_OP_N, CUBLAS_OP_N, s->rows, s->cols, s->inner, &one, p->a, s->rows,
                                 p->b, s->inner, &zero, p->c, s->rows));
    CUDA_CHECK(cudaEventRecord(p->ev[1], p->compute));
    CUDA_CHECK(cudaEventRecord(p->ev[2], p->link));
    CUDA_CHECK(dist_event_wait(p->d, p->ev[1]));
    CUDA_CHECK(dist_event_wait(p->d, p->ev[2]));
    return event_ms(p->ev[0], p->ev[1]) / p->reps;
}

// One message alone (an all-reduce, or a swap): milliseconds, the median of five.
static double message_ms(probe *p, condition c)
{
    double ms[5];
    for (int k = 0; k < 5; k++) {
        line_up(p);
        CUDA_CHECK(cudaEventRecord(p->ev[0], p->link));
        beside(p, c, 0, 1);
        CUDA_CHECK(cudaEventRecord(p->ev[1], p->link));
        CUDA_CHECK(dist_event_wait(p->d, p->ev[1]));
        ms[k] = event_ms(p->ev[0], p->ev[1]);
    }
    return stats_of(ms, 5).median;
}

static ncclComm_t split_capped(dist_env *d, int ctas)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    config.splitShare = 0;
    if (ctas > 0) {
        config.minCTAs = 1;
        config.maxCTAs = ctas;
    }
    ncclComm_t comm = NULL;
    NCCL_CHECK(d, ncclCommSplit(d->comm, 0, d->rank, &comm, &config));
    dist_split_ready(d, &comm, "a capped communicator");
    return comm;
}

typedef struct {
    shape shapes[MAX_SHAPES];
    int nshapes, ctas[MAX_CTAS], nctas, rounds, reps, mib, json;
} options;

static int parse_list(const char *text, int *out, int max)
{
    int n = 0;
    for (const char *c = text; *c && n < max;) {
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c || v < 0 || v > 64) return -1;
        out[n++] = (int)v;
        c = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void parse_options(dist_env *d, int argc, char **argv, options *o)
{
    const char *shapes = "8192x128x8192,4096x512x4096", *ctas = "0,1,4,8", *folder = NULL;
    double timeout_s = DIST_TIMEOUT_S;
    o->rounds = 5;
    o->reps = 10;
    o->mib = 64;
    o->json = 0;
    arg_spec specs[] = {
        arg_string("shapes", &shapes, "RxCxK,...", "products ROWS x COLS = (ROWS x INNER)(INNER x COLS), cuBLAS's"),
        arg_string("ctas", &ctas, "N,...", "caps on NCCL's CTAs to try (ncclConfig_t.maxCTAs; 0: NCCL's choice)"),
        arg_int("rounds", &o->rounds, 1, MAX_ROUNDS, "N", "rounds, every measurement once each (medians)"),
        arg_int("reps", &o->reps, 1, 1000, "N", "products per timing"),
        arg_int("mib", &o->mib, 1, 4096, "MIB", "each message moved beside the products"),
        arg_string("rendezvous", &folder, "DIR", "the folder every rank sees (default: $RENDEZVOUS_DIR)"),
        arg_double("timeout-s", &timeout_s, 1, 3600, "S", "give up waiting for another rank after this long"),
        arg_flag("json", &o->json, "print the results as one JSON object on stdout (rank 0)"),
    };
    args_parse(argc, argv, d->name,
               "What an NCCL kernel beside a matrix product costs the product.\n"
               "Run two ranks: tools/launch -n 2 PROGRAM",
               specs, (int)(sizeof specs / sizeof specs[0]));
    o->nctas = parse_list(ctas, o->ctas, MAX_CTAS);
    if (o->nctas < 1) usage_error(d->name, "--ctas expects numbers from 0 to 64 separated by commas, got '%s'", ctas);
    o->nshapes = 0;
    for (const char *c = shapes; *c && o->nshapes < MAX_SHAPES;) {
        shape *s = &o->shapes[o->nshapes++];
        int used = 0;
        if (sscanf(c, "%dx%dx%d%n", &s->rows, &s->cols, &s->inner, &used) != 3 || s->rows < 1 || s->cols < 1 ||
            s->inner < 1 || s->rows > 65536 || s->cols > 65536 || s->inner > 65536 || (c[used] && c[used] != ','))
            usage_error(d->name, "--shapes expects ROWSxCOLSxINNER[,...] of 1 to 65536 each, got '%s'", shapes);
        c += used + (c[used] == ',');
    }
    if (d->world < 2) usage_error(d->name, "needs two ranks at least: tools/launch -n 2 %s", argv[0]);
    dist_configure(d, folder, timeout_s);
}

// Every figure: [shape][cap][cuBLAS's SMs: all, all but the cap][condition], each round's, then the medians.
typedef struct {
    double samples[MAX_SHAPES][MAX_CTAS][2][CONDITIONS][MAX_ROUNDS];
    double ms[MAX_SHAPES][MAX_CTAS][2][CONDITIONS];
} results;

// The largest of every rank's values, on every rank: how many messages a rank issues beside the
// products must be the same everywhere (NCCL pairs the ranks' calls by their order and size).
static void agree_max(probe *p, double *values, int n)
{
    memcpy(p->h_agreed, values, sizeof(double) * n);
    CUDA_CHECK(cudaMemcpyAsync(p->d_agreed, p->h_agreed, sizeof(double) * n, cudaMemcpyHostToDevice, p->link));
    NCCL_CHECK(p->d, ncclAllReduce(p->d_agreed, p->d_agreed, n, ncclDouble, ncclMax, p->comm, p->link));
    CUDA_CHECK(cudaMemcpyAsync(p->h_agreed, p->d_agreed, sizeof(double) * n, cudaMemcpyDeviceToHost, p->link));
    CUDA_CHECK(cudaEventRecord(p->ev[2], p->link));
    CUDA_CHECK(dist_event_wait(p->d, p->ev[2]));
    memcpy(values, p->h_agreed, sizeof(double) * n);
}

// One round of every cap: the product alone (which also sets how long the waiting receive's send
// holds back and how many messages outlast the products), then beside each condition.
static void measure_cap(probe *p, const options *o, int c, int r, results *res)
{
    double message[2] = {message_ms(p, ALLREDUCE), message_ms(p, SENDRECV)};
    agree_max(p, message, 2);
    double reduce_ms = message[0], swap_ms = message[1];
    for (int s = 0; s < o->nshapes; s++)
        for (int t = 0; t < (o->ctas[c] > 0 ? 2 : 1); t++) {
            CUBLAS_CHECK(cublasSetSmCountTarget(p->blas, t ? p->dev.sms - o->ctas[c] : 0));
            double alone = time_products(p, &o->shapes[s], ALONE, 0, 0) * p->reps;
            agree_max(p, &alone, 1);
            long long hold_ns = (long long)(3e6 * alone) + 1000000;
            for (int k = 0; k < CONDITIONS; k++) {
                double m = k == ALLREDUCE ? reduce_ms : swap_ms;
                int repeat = (int)(1.5 * alone / m) + 2;
                res->samples[s][c][t][k][r] = time_products(p, &o->shapes[s], (condition)k, hold_ns, repeat);
            }
        }
}

static void measure(probe *p, const options *o, results *res)
{
    ncclComm_t comms[MAX_CTAS];
    for (int c = 0; c < o->nctas; c++) {
        comms[c] = split_capped(p->d, o->ctas[c]);
        p->comm = comms[c];
        swap_messages(p);  // connects the pair (a blocking communicator: both ranks at once, in a group)
    }
    for (int r = 0; r < o->rounds; r++)
        for (int c = 0; c < o->nctas; c++) {
            p->comm = comms[c];
            measure_cap(p, o, c, r, res);
        }
    for (int c = 0; c < o->nctas; c++) dist_close(p->d, &comms[c]);
    for (int s = 0; s < o->nshapes; s++)
        for (int c = 0; c < o->nctas; c++)
            for (int t = 0; t < 2; t++)
                for (int k = 0; k < CONDITIONS; k++)
                    res->ms[s][c][t][k] = stats_of(res->samples[s][c][t][k], o->rounds).median;
}

static void report(const probe *p, const options *o, const results *res)
{
    json_writer js;
    if (o->json) json_begin(&js, stdout);
    FILE *out = o->json ? stderr_by_lines() : stdout;  // on stderr a line at a time, as the ranks' own
    fprintf(out, "sm-share: %s, %d SMs; %d MiB messages; median of %d rounds, %d products each\n", p->dev.name,
            p->dev.sms, o->mib, o->rounds, p->reps);
    for (int s = 0; s < o->nshapes; s++) {
        const shape *sh = &o->shapes[s];
        double base = res->ms[s][0][0][ALONE];
        fprintf(out, "product %dx%dx%d (ms per product; x: against alone, NCCL's choice, every SM):\n", sh->rows,
                sh->cols, sh->inner);
        fprintf(out, "  %-9s %-8s %18s %18s %18s %18s\n", "NCCL CTAs", "cuBLAS", "alone", "waiting", "allreduce",
                "sendrecv");
        for (int c = 0; c < o->nctas; c++)
            for (int t = 0; t < (o->ctas[c] > 0 ? 2 : 1); t++) {
                char cap[16], sms[16];
                snprintf(cap, sizeof cap, o->ctas[c] ? "%d" : "NCCL's", o->ctas[c]);
                snprintf(sms, sizeof sms, "%d SMs", t ? p->dev.sms - o->ctas[c] : p->dev.sms);
                fprintf(out, "  %-9s %-8s", cap, sms);
                for (int k = 0; k < CONDITIONS; k++) {
                    double m = res->ms[s][c][t][k];
                    fprintf(out, " %9.4f (x%5.2f)", m, m / base);
                    if (o->json) {
                        char key[96];
                        snprintf(key, sizeof key, "ms_%dx%dx%d_ctas%d_sms%d_%s", sh->rows, sh->cols, sh->inner,
                                 o->ctas[c], t ? p->dev.sms - o->ctas[c] : 0, CONDITION_NAMES[k]);
                        json_num(&js, key, m);
                    }
                }
                fprintf(out, "\n");
            }
    }
    if (o->json) {
        json_str(&js, "device", p->dev.name);
        json_int(&js, "sms", p->dev.sms);
        json_int(&js, "mib", o->mib);
        json_int(&js, "rounds", o->rounds);
        json_end(&js);
    }
}

int main(int argc, char **argv)
{
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // the link stream never shares a queue with the products
    dist_env d;
    dist_init(&d, "sm-share");
    options o;
    parse_options(&d, argc, argv, &o);
    dist_select_device(&d);
    probe p;
    memset(&p, 0, sizeof p);
    p.d = &d;
    p.reps = o.reps;
    gpu_open(d.name, &p.dev);
    dist_connect(&d);
    size_t most = 0;
    for (int s = 0; s < o.nshapes; s++) {
        size_t a = (size_t)o.shapes[s].rows * o.shapes[s].inner, b = (size_t)o.shapes[s].inner * o.shapes[s].cols;
        size_t c = (size_t)o.shapes[s].rows * o.shapes[s].cols;
        if (a > most) most = a;
        if (b > most) most = b;
        if (c > most) most = c;
    }
    p.a = filled(most, 1u);
    p.b = filled(most, 2u);
    p.c = filled(most, 3u);
    p.floats = (size_t)o.mib << 18;
    p.send = filled(p.floats, 4u);
    p.recv = filled(p.floats, 5u);
    p.d_agreed = (double *)device_alloc(sizeof(double) * 4);
    p.h_agreed = (double *)pinned_alloc(sizeof(double) * 4);
    CUDA_CHECK(cudaStreamCreateWithFlags(&p.compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&p.link, cudaStreamNonBlocking));
    for (int k = 0; k < 3; k++) CUDA_CHECK(cudaEventCreate(&p.ev[k]));
    void *workspace = device_alloc(WORKSPACE_BYTES);
    CUBLAS_CHECK(cublasCreate(&p.blas));
    CUBLAS_CHECK(cublasSetStream(p.blas, p.compute));
    CUBLAS_CHECK(cublasSetWorkspace(p.blas, workspace, WORKSPACE_BYTES));
    CUDA_CHECK(cudaDeviceSynchronize());
    results *res = (results *)host_calloc(1, sizeof(results), "the measurements");
    measure(&p, &o, res);
    if (d.rank == 0) report(&p, &o, res);
    free(res);
    CUBLAS_CHECK(cublasDestroy(p.blas));
    dist_finish(&d);
    return 0;
}
