// args.c: getopt_long with validated numbers and a generated --help.
#define _GNU_SOURCE  // getopt_long
#include "args.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"  // EXIT_USAGE

#define MAX_OPTIONS 64

arg_spec arg_int(const char *name, int *value, int min, int max, const char *metavar, const char *help)
{
    arg_spec s = {name, ARG_INT, value, min, max, metavar, help};
    return s;
}

arg_spec arg_double(const char *name, double *value, double min, double max, const char *metavar, const char *help)
{
    arg_spec s = {name, ARG_DOUBLE, value, min, max, metavar, help};
    return s;
}

arg_spec arg_flag(const char *name, int *value, const char *help)
{
    arg_spec s = {name, ARG_FLAG, value, 0, 0, NULL, help};
    return s;
}

arg_spec arg_string(const char *name, const char **value, const char *metavar, const char *help)
{
    arg_spec s = {name, ARG_STRING, value, 0, 0, metavar, help};
    return s;
}

arg_spec arg_choice(const char *name, int *value, const char *words, const char *help)
{
    arg_spec s = {name, ARG_CHOICE, value, 0, 0, words, help};
    return s;
}

// The index of `text` among the '|'-separated words, or -1; the word itself in `word`.
static int choice_index(const char *words, const char *text, int index, char *word, size_t size)
{
    int k = 0;
    for (const char *p = words; *p; k++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (word && k == index) snprintf(word, size, "%.*s", (int)len, p);
        if (text && strlen(text) == len && strncmp(p, text, len) == 0) return k;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}

void usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_USAGE);
}

// A number as --help and the error lines write it: a whole number as digits
// (2147483647, 1000000), never in scientific notation; any other as %g.
static void format_number(double v, char *out, size_t size)
{
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(out, size, "%.0f", v);
    else
        snprintf(out, size, "%g", v);
}

static void print_usage(const char *prog, const char *files_metavar, const char *summary, const arg_spec *specs,
                        int nspecs)
{
    printf("usage: %s [options]%s%s\n%s\n\noptions:\n", prog, files_metavar ? " " : "",
           files_metavar ? files_metavar : "", summary);
    for (int i = 0; i < nspecs; i++) {
        const arg_spec *s = &specs[i];
        char left[64];
        if (s->kind == ARG_FLAG)
            snprintf(left, sizeof left, "--%s", s->name);
        else
            snprintf(left, sizeof left, "--%s %s", s->name, s->metavar ? s->metavar : "X");
        printf("  %-26s %s", left, s->help);
        char lo[32], hi[32], def[32];
        format_number(s->min, lo, sizeof lo);
        format_number(s->max, hi, sizeof hi);
        switch (s->kind) {
        case ARG_INT: printf(" (%s..%s, default %d)", lo, hi, *(int *)s->value); break;
        case ARG_DOUBLE:
            format_number(*(double *)s->value, def, sizeof def);
            printf(" (%s..%s, default %s)", lo, hi, def);
            break;
        case ARG_STRING:
            if (*(const char **)s->value) printf(" (default %s)", *(const char **)s->value);
            break;
        case ARG_CHOICE: {
            char word[64] = "";
            choice_index(s->metavar, NULL, *(int *)s->value, word, sizeof word);
            printf(" (default %s)", word);
            break;
        }
        case ARG_FLAG: break;
        }
        putchar('\n');
    }
    printf("  %-26s %s\n", "--help", "show this help and exit");
    printf("\nexit codes: 0 success, 1 a check failed or a runtime error, 2 bad usage, 3 no usable GPU\n");
}

// Reads a whole number: digits only (an optional sign), nothing after them.
int parse_int(const char *text, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) return 0;
    *out = v;
    return 1;
}

int parse_double(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static void set_value(const char *prog, const arg_spec *s, const char *text)
{
    if (s->kind == ARG_STRING) {
        if (text[0] == '\0') usage_error(prog, "--%s expects a value, got ''", s->name);
        *(const char **)s->value = text;
    } else if (s->kind == ARG_CHOICE) {
        int k = choice_index(s->metavar, text, -1, NULL, 0);
        if (k < 0) usage_error(prog, "--%s expects one of %s, got '%s'", s->name, s->metavar, text);
        *(int *)s->value = k;
    } else if (s->kind == ARG_INT) {
        long long v;
        if (!parse_int(text, &v) || v < s->min || v > s->max)
            usage_error(prog, "--%s expects an integer from %.0f to %.0f, got '%s'", s->name, s->min, s->max, text);
        *(int *)s->value = (int)v;
    } else {
        double v;
        char lo[32], hi[32];
        format_number(s->min, lo, sizeof lo);
        format_number(s->max, hi, sizeof hi);
        if (!parse_double(text, &v) || v < s->min || v > s->max)
            usage_error(prog, "--%s expects a number from %s to %s, got '%s'", s->name, lo, hi, text);
        *(double *)s->value = v;
    }
}

void args_parse(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs)
{
    args_parse_files(argc, argv, prog, summary, specs, nspecs, NULL, NULL, 0);
}

int args_parse_files(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs,
                     const char *files_metavar, const char **files, int max_files)
{
    struct option longopts[MAX_OPTIONS + 2];
    if (nspecs > MAX_OPTIONS) usage_error(prog, "internal error: too many options");
    for (int i = 0; i < nspecs; i++) {
        longopts[i].name = specs[i].name;
        longopts[i].has_arg = specs[i].kind == ARG_FLAG ? no_argument : required_argument;
        longopts[i].flag = NULL;
        longopts[i].val = 1000 + i;
    }
    longopts[nspecs] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[nspecs + 1] = (struct option){NULL, 0, NULL, 0};

    opterr = 0;  // we print our own single line
    optind = 1;
    int nfiles = 0;
    for (;;) {
        int index = -1;
        int c = getopt_long(argc, argv, "-:h", longopts, &index);  // "-": arguments in place, as code 1
        if (c == -1) break;
        if (c == 1) {
            if (nfiles == max_files) usage_error(prog, "unexpected argument '%s' (try --help)", optarg);
            files[nfiles++] = optarg;
            continue;
        }
        if (c == 'h') {
            print_usage(prog, files_metavar, summary, specs, nspecs);
            exit(EXIT_SUCCESS);
        }
        if (c == '?') usage_error(prog, "unknown option '%s' (try --help)", argv[optind - 1]);
        if (c == ':') usage_error(prog, "option '%s' needs a value (try --help)", argv[optind - 1]);
        const arg_spec *s = &specs[c - 1000];
        if (s->kind == ARG_FLAG)
            *(int *)s->value = 1;
        else
            set_value(prog, s, optarg);
    }
    if (optind < argc) usage_error(prog, "unexpected argument '%s' (try --help)", argv[optind]);
    return nfiles;
}
