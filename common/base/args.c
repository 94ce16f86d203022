// args.c: getopt_long with validated numbers and a generated --help.
#define _GNU_SOURCE  // getopt_long
#include "common/base/args.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/exit_codes.h"  // EXIT_USAGE

#include "common/base/stderr_line.h"  // stderr_line: a message, one write

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

arg_spec arg_exit_codes(const char *codes)
{
    arg_spec s = {NULL, ARG_EXIT_CODES, NULL, 0, 0, NULL, codes};
    return s;
}

// The exit codes of a program (it asks for a GPU) and of a host-only tool (it asks for none).
#define TOOL_EXIT_CODES "0 success, 1 a check failed or a runtime error, 2 bad usage"
#define PROGRAM_EXIT_CODES TOOL_EXIT_CODES ", 3 no usable GPU"

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
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    stderr_line("%s: %s", prog, message);
    exit(EXIT_USAGE);
}

// A number as --help and the error lines write it, never in scientific notation: a whole
// number as digits (2147483647), any other in decimals to six significant digits (0.000001,
// 0.02), trailing zeros dropped.
static void format_number(double v, char *out, size_t size)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, size, "%.0f", v);
        return;
    }
    int decimals = 6 - (int)floor(log10(fabs(v))) - 1;  // six significant digits after the leading zeros
    if (decimals < 0) decimals = 0;
    if (decimals > 20) decimals = 20;
    snprintf(out, size, "%.*f", decimals, v);
    if (strchr(out, '.')) {
        char *end = out + strlen(out) - 1;
        while (*end == '0') *end-- = '\0';
        if (*end == '.') *end = '\0';
    }
}

// The width of --help's option column: an option longer than that has its description on
// the next line, under the others', never run into it.
#define OPTION_COLUMN 26

static void print_usage(const char *prog, const char *files_metavar, const char *summary, const arg_spec *specs,
                        int nspecs, const char *exit_codes)
{
    printf("usage: %s [options]%s%s\n%s\n\noptions:\n", prog, files_metavar ? " " : "",
           files_metavar ? files_metavar : "", summary);
    for (int i = 0; i < nspecs; i++) {
        const arg_spec *s = &specs[i];
        char left[96];
        if (s->kind == ARG_EXIT_CODES) {
            exit_codes = s->help;
            continue;
        }
        if (s->kind == ARG_FLAG)
            snprintf(left, sizeof left, "--%s", s->name);
        else
            snprintf(left, sizeof left, "--%s %s", s->name, s->metavar ? s->metavar : "X");
        if (strlen(left) > OPTION_COLUMN)
            printf("  %s\n  %-*s %s", left, OPTION_COLUMN, "", s->help);
        else
            printf("  %-*s %s", OPTION_COLUMN, left, s->help);
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
        case ARG_FLAG:
        case ARG_EXIT_CODES: break;
        }
        putchar('\n');
    }
    printf("  %-*s %s\n", OPTION_COLUMN, "--help", "show this help and exit");
    printf("\nexit codes: %s\n", exit_codes);
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
        char lo[32], hi[32];
        format_number(s->min, lo, sizeof lo);
        format_number(s->max, hi, sizeof hi);
        if (!parse_int(text, &v) || v < s->min || v > s->max)
            usage_error(prog, "--%s expects an integer from %s to %s, got '%s'", s->name, lo, hi, text);
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

static int parse(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs,
                 const char *files_metavar, const char **files, int max_files, const char *exit_codes)
{
    struct option longopts[MAX_OPTIONS + 2];
    int nlong = 0;
    if (nspecs > MAX_OPTIONS) usage_error(prog, "internal error: too many options");
    for (int i = 0; i < nspecs; i++) {
        if (specs[i].kind == ARG_EXIT_CODES) continue;  // what --help says, not an option
        longopts[nlong].name = specs[i].name;
        longopts[nlong].has_arg = specs[i].kind == ARG_FLAG ? no_argument : required_argument;
        longopts[nlong].flag = NULL;
        longopts[nlong].val = 1000 + i;
        nlong++;
    }
    longopts[nlong] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[nlong + 1] = (struct option){NULL, 0, NULL, 0};

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
            print_usage(prog, files_metavar, summary, specs, nspecs, exit_codes);
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

void args_parse(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs)
{
    parse(argc, argv, prog, summary, specs, nspecs, NULL, NULL, 0, PROGRAM_EXIT_CODES);
}

int args_parse_files(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs,
                     const char *files_metavar, const char **files, int max_files)
{
    return parse(argc, argv, prog, summary, specs, nspecs, files_metavar, files, max_files, TOOL_EXIT_CODES);
}
