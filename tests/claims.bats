#!/usr/bin/env bats
# Every claim of notes/14_fault_tolerance.md, of notes/16_checkpoint_restart.md and of the fault
# sections of notes 12, 13 and 15 has a row in tests/claims.tsv: a mutant that breaks it and the checks that must then fail.
# tools/dev-check claims proves each on a GPU (every check tagged with the claim fails against its
# mutant). Here, without a GPU, what keeps the table from rotting: every mutant still applies to
# today's code (each of its sed expressions changes the file) and compiles for one architecture,
# every claim has a check tagged with it, and every claim: tag of the checks names a row.

load helpers
load claims

# Each mutant of a .cu is compiled by nvcc, a few seconds each (more on a busy machine of two
# CPUs): such a check has CLAIMS_TEST_TIMEOUT seconds (default 600), not the suite's limit.
BATS_TEST_TIMEOUT=${CLAIMS_TEST_TIMEOUT:-600}

setup_file() {
    detect_nccl 14_fault_tolerance
}

# assert_claims_compile LESSON: every row of the lesson applies, compiles, and has a tagged check
assert_claims_compile() {
    [ -d "$ROOT/solutions" ] || skip "the claims break the course's own solutions: not in a student's copy"
    need_nccl
    local rows=$BATS_TEST_TMPDIR/rows id file brk tag tests n=0
    claims_rows "$ROOT" "$1" >"$rows"
    [ -s "$rows" ] || fail "no row of lesson $1 in tests/claims.tsv"
    while IFS=$'\t' read -r _ id file brk tag tests _; do
        n=$((n + 1))
        [ -f "$ROOT/$file" ] || fail "$id: $file is no file of the course"
        claim_tree "$ROOT" "$BATS_TEST_TMPDIR/$id" "$file" "$brk" 2>"$BATS_TEST_TMPDIR/why" ||
            fail "$id: the mutant does not apply to today's code: $(cat "$BATS_TEST_TMPDIR/why")"
        cmp -s "$ROOT/$file" "$BATS_TEST_TMPDIR/$id/$file" && fail "$id: the mutant is today's $file"
        [ -f "$ROOT/tests/$tests.bats" ] || fail "$id: tests/$tests.bats: no such file"
        "$ROOT/tools/grade" --list-tags "$ROOT/tests/$tests.bats" | cut -f2 | tr ',' '\n' | grep -qxF "$tag" ||
            fail "$id: no check of tests/$tests.bats is tagged $tag"
        printf '%s\t%s\n' "$id" "$file"
    done <"$rows" >"$BATS_TEST_TMPDIR/trees"
    # compiled as many at a time as the CPUs: nvcc takes seconds a file
    xargs -P "$(nproc 2>/dev/null || echo 2)" -L 1 bash -c '. "$0/tests/claims.bash"; claim_compile "$1/$2" "$3" "$1/$2.o" >"$1/$2.log" 2>&1 ||
        { echo "$2: its mutant of $3 does not compile: $(grep -m 2 -E "error|rror:" "$1/$2.log")"; }' \
        "$ROOT" "$BATS_TEST_TMPDIR" <"$BATS_TEST_TMPDIR/trees" >"$BATS_TEST_TMPDIR/broken"
    [ ! -s "$BATS_TEST_TMPDIR/broken" ] || fail "$(cat "$BATS_TEST_TMPDIR/broken")"
    assert_equal "$(wc -l <"$BATS_TEST_TMPDIR/trees")" "$n"
}

@test "12 claims (fault sections): each row's mutant applies to today's code and compiles, and a check is tagged with it" {
    assert_claims_compile 12
}

@test "13 claims (faults, as in 12): each row's mutant applies to today's code and compiles, and a check is tagged with it" {
    assert_claims_compile 13
}

@test "14 claims: each row's mutant applies to today's code and compiles, and a check is tagged with it" {
    assert_claims_compile 14
}

@test "16 claims: each row's mutant applies to today's code and compiles, and a check is tagged with it" {
    assert_claims_compile 16
}

@test "15 claims (a rank that fails, the graphs' census): each row's mutant applies to today's code and compiles" {
    assert_claims_compile 15
}

@test "14 claims: every claim: tag of the checks names a row of tests/claims.tsv, every id once, every row of 7 columns" {
    run awk -F'\t' '!/^#/ && NF > 0 && NF != 7 { print FILENAME ":" FNR ": " NF " columns" }' "$ROOT/tests/claims.tsv"
    assert_output ""
    run bash -c "grep -v '^#' '$ROOT/tests/claims.tsv' | cut -f2 | sort | uniq -d"
    assert_output ""
    ids=$(claims_rows "$ROOT" | cut -f2)
    while read -r tag; do
        grep -qxF "${tag#claim:}" <<<"$ids" || fail "the tag $tag names no row of tests/claims.tsv"
    done < <("$ROOT/tools/grade" --list-tags "$ROOT"/tests/*.bats | cut -f2 | tr ',' '\n' | grep '^claim:' | sort -u)
}
