// args.h: command-line parsing shared by every program (getopt_long underneath).
//
// A program lists its options in a table built with arg_int, arg_double,
// arg_flag, arg_string and arg_choice; args_parse fills the variables, checks
// every number against its range, and handles --help. Defaults are whatever the
// variables hold before the call (--help shows them).
#ifndef COMMON_ARGS_H
#define COMMON_ARGS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ARG_FLAG, ARG_INT, ARG_DOUBLE, ARG_STRING, ARG_CHOICE, ARG_EXIT_CODES } arg_kind;

typedef struct {
    const char *name;  // long option name, without the dashes
    arg_kind kind;
    void *value;          // int* (ARG_FLAG, ARG_INT, ARG_CHOICE), double*, or const char** (ARG_STRING)
    double min, max;      // inclusive range for ARG_INT and ARG_DOUBLE
    const char *metavar;  // shown in --help, e.g. "N"; for ARG_CHOICE the words, "copy|compute"
    const char *help;     // one line
} arg_spec;

arg_spec arg_int(const char *name, int *value, int min, int max, const char *metavar, const char *help);
arg_spec arg_double(const char *name, double *value, double min, double max, const char *metavar, const char *help);
arg_spec arg_flag(const char *name, int *value, const char *help);
arg_spec arg_string(const char *name, const char **value, const char *metavar, const char *help);
// One of the words in `words` ("a|b|c"): *value becomes its index (a = 0).
arg_spec arg_choice(const char *name, int *value, const char *words, const char *help);
// No option: the exit codes --help lists, for a tool with codes of its own, e.g.
// arg_exit_codes("0 the rings agree, 1 no ring, 2 bad usage, 4 a divergence named").
arg_spec arg_exit_codes(const char *codes);

// Parses argv, for the programs (they use a GPU). Returns normally when every option is
// valid. On --help prints the usage on stdout and exits 0; on a bad option prints one line
// on stderr ("prog: --streams expects an integer from 1 to 32, got 'abc'") and exits with
// EXIT_USAGE. `summary` is the one-line description shown by --help. The help's last line
// lists the exit codes: 0, 1, 2 and 3 (no usable GPU).
void args_parse(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs);

// As args_parse, for the host-only tools, which read files and use no GPU: collects up to
// max_files arguments that are not options (file names) into files[], in order; more is a
// usage error. Returns how many. The help lists the exit codes 0, 1 and 2 (no 3: no GPU is
// asked for), or the tool's own (arg_exit_codes).
int args_parse_files(int argc, char **argv, const char *prog, const char *summary, const arg_spec *specs, int nspecs,
                     const char *files_metavar, const char **files, int max_files);

// Reads a whole number or a finite number: 1 on success, 0 when `text` is not one.
int parse_int(const char *text, long long *out);
int parse_double(const char *text, double *out);

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
