// ddp_plan.cu: lesson 12's bucket plan checked and written as text, and the checksums every rank
// compares after the runs (ddp.h). Making the plan is lesson 12's exercise (12-bucket-plan).
#include "ddp.h"

#include <stdio.h>
#include <string.h>

#include "common/train/harness.h"  // defines: harness_loss_checksum

int ddp_plan_is_sound(const mlp_shape *s, const ddp_bucket_plan *p, char *why, size_t size)
{
    if (p->count < 1 || p->count > DDP_MAX_BUCKETS) {
        snprintf(why, size, "%d buckets for %d layers", p->count, s->layers);
        return 0;
    }
    int next = s->layers;     // the layer the backward pass finishes next
    size_t end = s->nparams;  // where that layer's parameters end
    for (int b = 0; b < p->count; b++) {
        int first = p->first_layer[b], last = p->last_layer[b];
        if (last != next || first < 1 || first > last) {
            snprintf(why, size, "bucket %d holds layers %d to %d; the backward pass finishes layer %d next", b, first,
                     last, next);
            return 0;
        }
        if (p->first[b] != s->w_off[first] || p->first[b] + p->floats[b] != end) {
            snprintf(why, size, "bucket %d is parameters [%zu, %zu); layers %d to %d are [%zu, %zu)", b, p->first[b],
                     p->first[b] + p->floats[b], first, last, s->w_off[first], end);
            return 0;
        }
        next = first - 1;
        end = p->first[b];
    }
    if (next != 0) {
        snprintf(why, size, "the buckets stop at layer %d: the layers below it are never averaged", next + 1);
        return 0;
    }
    return 1;
}

void ddp_plan_text(const ddp_bucket_plan *p, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int b = 0; b < p->count && n < size; b++) {
        if (p->first_layer[b] == p->last_layer[b])
            n += (size_t)snprintf(out + n, size - n, "%s%d", b ? "|" : "", p->last_layer[b]);
        else
            n += (size_t)snprintf(out + n, size - n, "%s%d-%d", b ? "|" : "", p->last_layer[b], p->first_layer[b]);
    }
}

// ----------------------------------------------------------------------------
// the checksums the ranks compare

ddp_checksums ddp_checksums_of(trainer *t, int flag)
{
    ddp_checksums c = {mlp_weights_checksum(&t->model, t->compute_stream),
                       harness_loss_checksum(t->run.losses, t->opt.batches), (uint64_t)flag};
    return c;
}

int ddp_checksums_agree(const ddp_checksums *all, int world, int *flags, char *sums, size_t size)
{
    int same = 1;
    size_t n = 0;
    *flags = 1;
    sums[0] = '\0';
    for (int r = 0; r < world; r++) {
        same = same && all[r].weights == all[0].weights && all[r].losses == all[0].losses;
        *flags = *flags && all[r].flag == 1;
        if (n < size)
            n += (size_t)snprintf(sums + n, size - n, "%s%016llx", r ? "," : "", (unsigned long long)all[r].weights);
    }
    return same;
}
