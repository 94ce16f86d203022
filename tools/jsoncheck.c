// jsoncheck FILE: exit 0 when FILE holds exactly one valid JSON value (RFC 8259),
// else print where it goes wrong and exit 1. The tests check every trace and
// every --json output with it.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *p, *start;
static int depth;

static int fail(const char *what)
{
    fprintf(stderr, "jsoncheck: %s at byte %ld\n", what, (long)(p - start));
    return 0;
}

static void skip_space(void)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
}

static int value(void);

static int string(void)
{
    if (*p++ != '"') return fail("expected a string");
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c == '\0') return fail("unterminated string");
        if (c < 0x20) return fail("control character in a string");
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i])) return fail("bad \\u escape");
                p += 5;
                continue;
            }
            if (!strchr("\"\\/bfnrt", *p) || *p == '\0') return fail("bad escape");
        }
        p++;
    }
    p++;
    return 1;
}

static int number(void)
{
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (isdigit((unsigned char)*p)) while (isdigit((unsigned char)*p)) p++;
    else return fail("bad number");
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return fail("bad fraction");
        while (isdigit((unsigned char)*p)) p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return fail("bad exponent");
        while (isdigit((unsigned char)*p)) p++;
    }
    return 1;
}

static int container(char open, char close)
{
    if (++depth > 512) return fail("nested too deeply");
    p++;
    skip_space();
    if (*p == close) {
        p++;
        depth--;
        return 1;
    }
    for (;;) {
        skip_space();
        if (open == '{') {
            if (!string()) return 0;
            skip_space();
            if (*p++ != ':') return fail("expected ':'");
        }
        if (!value()) return 0;
        skip_space();
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p++ != close) return fail(open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        depth--;
        return 1;
    }
}

static int value(void)
{
    skip_space();
    switch (*p) {
    case '{': return container('{', '}');
    case '[': return container('[', ']');
    case '"': return string();
    case 't': return strncmp(p, "true", 4) == 0 ? (p += 4, 1) : fail("bad literal");
    case 'f': return strncmp(p, "false", 5) == 0 ? (p += 5, 1) : fail("bad literal");
    case 'n': return strncmp(p, "null", 4) == 0 ? (p += 4, 1) : fail("bad literal");
    default: return number();
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: jsoncheck FILE\n");
        return 2;
    }
    FILE *f = strcmp(argv[1], "-") == 0 ? stdin : fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "jsoncheck: cannot open %s\n", argv[1]);
        return 1;
    }
    size_t size = 0, cap = 1 << 16;
    char *text = malloc(cap);
    size_t n;
    while ((n = fread(text + size, 1, cap - size - 1, f)) > 0) {
        size += n;
        if (size + 1 == cap) text = realloc(text, cap *= 2);
    }
    text[size] = '\0';
    if (f != stdin) fclose(f);
    if (strlen(text) != size) {
        fprintf(stderr, "jsoncheck: NUL byte in %s\n", argv[1]);
        return 1;
    }
    start = p = text;
    int ok = value();
    if (ok) {
        skip_space();
        if (*p) ok = fail("text after the value");
    }
    free(text);
    return ok ? 0 : 1;
}
