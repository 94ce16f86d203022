#!/usr/bin/env bats
# The course as a whole: the build, the generated student versions, the tools.

load helpers

@test "course: every solution and every student lesson is built" {
    for dir in "$ROOT"/solutions/[0-9][0-9]_*; do
        name=$(basename "$dir")
        [ -x "$ROOT/build/solutions/$name" ] || fail "build/solutions/$name is missing: run make"
        [ -x "$ROOT/build/lessons/$name" ] || fail "build/lessons/$name is missing: run make"
    done
}

@test "course: lessons/ is exactly what 'make lessons' generates from solutions/" {
    for src in "$ROOT"/solutions/[0-9][0-9]_*/*.cu; do
        rel=${src#"$ROOT"/solutions/}
        "$ROOT/tools/gen-lesson" "$src" >"$BATS_TEST_TMPDIR/gen.cu"
        diff -u "$ROOT/lessons/$rel" "$BATS_TEST_TMPDIR/gen.cu" >"$BATS_TEST_TMPDIR/diff" ||
            fail "lessons/$rel differs from its solution's student version (run make lessons): $(head -20 "$BATS_TEST_TMPDIR/diff")"
    done
}

@test "course: every exercise region has a hint, and every lesson has at least one" {
    for src in "$ROOT"/solutions/[0-9][0-9]_*/*.cu; do
        grep -q "BEGIN SOLUTION(" "$src" || fail "$src has no exercise"
        if grep "BEGIN SOLUTION" "$src" | grep -vqE "BEGIN SOLUTION\([0-9]{2}-[a-z-]+\): .{20,}"; then
            fail "$src: an exercise without an id or a hint: $(grep "BEGIN SOLUTION" "$src" | grep -vE "BEGIN SOLUTION\([0-9]{2}-[a-z-]+\): .{20,}")"
        fi
    done
}

@test "course: the generator turns a region into its hint and stand-in, and rejects broken markers" {
    printf 'a\n  // BEGIN SOLUTION(99-x): do the thing\n  secret();\n  //| stub();\n  // END SOLUTION\nb\n' >"$BATS_TEST_TMPDIR/s.cu"
    run "$ROOT/tools/gen-lesson" "$BATS_TEST_TMPDIR/s.cu"
    assert_success
    assert_line --index 2 "  // TODO(99-x): do the thing"
    assert_line --index 3 "  stub();"
    refute_output --partial "secret"
    printf '// BEGIN SOLUTION(99-x): never ends\n' >"$BATS_TEST_TMPDIR/bad.cu"
    run "$ROOT/tools/gen-lesson" "$BATS_TEST_TMPDIR/bad.cu"
    assert_failure
}

@test "course: the host-only helpers build as C11 with gcc, warnings as errors" {
    for src in "$ROOT"/common/*.c; do
        gcc -std=c11 -Wall -Wextra -Werror -I"$ROOT" -I"${CUDA_HOME:-/usr/local/cuda}/include" \
            -c "$src" -o "$BATS_TEST_TMPDIR/x.o" || fail "$src does not build with gcc -std=c11"
    done
}

@test "course: the .cu files are C style: no classes, templates, lambdas, auto, new or std::" {
    run grep -nE "^\s*(class|template|namespace)\b|\bstd::|\bauto\b|\bnew [A-Za-z_]|\[\]\s*\(|\[&\]|\[=\]" \
        "$ROOT"/common/*.cu "$ROOT"/common/*.h "$ROOT"/solutions/*/*.cu
    assert_failure
}
