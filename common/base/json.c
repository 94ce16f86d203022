// json.c: the flat JSON writer.
#include "common/base/json.h"

#include <math.h>

void json_write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void key(json_writer *w, const char *k)
{
    fputs(w->count++ ? ",\n  " : "  ", w->out);
    json_write_string(w->out, k);
    fputs(": ", w->out);
}

static void number(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.9g", v);
    else
        fputs("null", out);
}

void json_begin(json_writer *w, FILE *out)
{
    w->out = out;
    w->count = 0;
    fputs("{\n", out);
}

void json_end(json_writer *w) { fputs("\n}\n", w->out); }

void json_int(json_writer *w, const char *k, long long v)
{
    key(w, k);
    fprintf(w->out, "%lld", v);
}

void json_num(json_writer *w, const char *k, double v)
{
    key(w, k);
    number(w->out, v);
}

void json_str(json_writer *w, const char *k, const char *v)
{
    key(w, k);
    json_write_string(w->out, v);
}

void json_hex(json_writer *w, const char *k, uint64_t v)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)v);
    json_str(w, k, hex);
}

void json_bool(json_writer *w, const char *k, int v)
{
    key(w, k);
    fputs(v ? "true" : "false", w->out);
}
