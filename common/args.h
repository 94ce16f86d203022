// args.h: command-line parsing shared by every program (getopt_long underneath).
//
// A program lists its options in a table of arg_spec; args_parse fills the
// variables, checks every number against its range, and handles --help.
// Defaults are whatever the variables hold before the call (--help shows them).
#ifndef COMMON_ARGS_H
#define COMMON_ARGS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ARG_FLAG, ARG_INT, ARG_DOUBLE, ARG_STRING } arg_kind;

typedef struct {
    const char *name;     // long option name, without the dashes
    arg_kind kind;
    void *value;          // int* (ARG_FLAG, ARG_INT), double*, or const char** (ARG_STRING)
    double min, max;      // inclusive range for ARG_INT and ARG_DOUBLE
    const char *metavar;  // shown in --help, e.g. "N"
    const char *help;     // one line
} arg_spec;

// Parses argv. Returns normally when every option is valid. On --help prints the
// usage on stdout and exits 0; on a bad option prints one line on stderr
// ("prog: --streams expects an integer from 1 to 32, got 'abc'") and exits with
// EXIT_USAGE. `summary` is the one-line description shown by --help.
void args_parse(int argc, char **argv, const char *prog, const char *summary,
                const arg_spec *specs, int nspecs);

// Prints one "prog: message" line on stderr and exits with EXIT_USAGE. For checks
// that involve several options at once (e.g. "--chunks must be a multiple of --streams").
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void usage_error(const char *prog, const char *fmt, ...);

#ifdef __cplusplus
}
#endif
#endif
