// json.h: a small writer for the flat JSON object every program prints with --json.
//
// One key per line, in the order written, so that scripts can also read a key
// with grep. NaN and infinities are written as null.
#ifndef COMMON_JSON_H
#define COMMON_JSON_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    FILE *out;
    int count;  // keys written so far
} json_writer;

void json_begin(json_writer *w, FILE *out);
void json_end(json_writer *w);
void json_int(json_writer *w, const char *key, long long value);
void json_num(json_writer *w, const char *key, double value);
void json_str(json_writer *w, const char *key, const char *value);
void json_bool(json_writer *w, const char *key, int value);
// A 64-bit checksum as a string of 16 hexadecimal digits ("00c0ffee00c0ffee"): JSON's numbers
// are doubles, which would round it.
void json_hex(json_writer *w, const char *key, uint64_t value);

// Writes s as a JSON string (quotes included), escaping what must be escaped.
void json_write_string(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif
#endif
