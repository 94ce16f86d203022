// buckets.cu (lesson 12): the gradients grouped into buckets in the order the backward pass
// finishes them (exercise 12-bucket-plan), the plan checked, and written as text.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_parallel.h"  // the lesson's types, and through it the course's headers

// the buckets

// Groups the layers into buckets in the order the backward pass finishes them, the
// last layer first. A bucket closes once it holds at least `bytes` of gradients (the
// first layer's may hold less). Layer l's parameters are W_l then b_l, and the layers
// lie in increasing order in d_grads (mlp_shape_init), so a bucket of layers
// first..last is one range: from W_first to the end of b_last.
void plan_buckets(const mlp_shape *s, size_t bytes, bucket_plan *p)
{
    memset(p, 0, sizeof *p);
    // BEGIN SOLUTION(12-bucket-plan): walk down from the last layer; a bucket closes at the layer
    // where its range of parameters (from that layer's W to its top layer's b: s->w_off, s->b_off,
    // s->dims) reaches `bytes`, or at layer 1; fill first_layer, last_layer, first, floats, count
    int last = s->layers;
    for (int l = s->layers; l >= 1; l--) {
        size_t first = s->w_off[l], end = s->b_off[last] + (size_t)s->dims[last];
        if ((end - first) * sizeof(float) >= bytes || l == 1) {
            int b = p->count++;
            p->first_layer[b] = l;
            p->last_layer[b] = last;
            p->first[b] = first;
            p->floats[b] = end - first;
            last = l - 1;
        }
    }
    //| (void)s, (void)bytes;
    // END SOLUTION
}

// Every parameter in exactly one bucket, the buckets in the order the backward pass
// finishes the layers: the program checks the plan before training with it.
int plan_is_sound(const mlp_shape *s, const bucket_plan *p, char *why, size_t size)
{
    if (p->count < 1 || p->count > MAX_BUCKETS) {
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

// "4-3|2|1": the layers of each bucket, in the order they are issued.
void plan_text(const bucket_plan *p, char *out, size_t size)
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
