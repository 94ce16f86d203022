#!/usr/bin/env bats
# The timeline tools on fixtures: the JSON writer, the reader, the checks, the renderers.
# handmade_trace.json is small enough to verify by hand; 08_small_trace.json was
# recorded by lesson 08 on an H200 (notes/README.md says how to record it again).

load helpers

HAND=$FIXTURES/handmade_trace.json
RECORDED=$FIXTURES/08_small_trace.json

@test "timeline: both fixtures are valid JSON and well-formed traces" {
    for f in "$HAND" "$RECORDED"; do
        run "$TOOLS/jsoncheck" "$f"
        assert_success
        run "$TOOLS/tracestat" "$f" --check
        assert_success
        assert_output --partial "ok:"
    done
}

@test "timeline: the writer's output, read back, is valid, sorted, nested, and measures the same" {
    for f in "$HAND" "$RECORDED"; do
        "$TOOLS/tracestat" "$f" --rewrite "$BATS_TEST_TMPDIR/again.json"
        run "$TOOLS/jsoncheck" "$BATS_TEST_TMPDIR/again.json"
        assert_success
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --check
        assert_success
        diff <("$TOOLS/tracestat" "$f" --window run) <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --window run)
    done
}

@test "timeline: every track of the recorded trace is named, with the lesson's stream names" {
    "$TOOLS/tracestat" "$RECORDED" --window run >"$BATS_TEST_TMPDIR/s.txt"
    tracks=$(kv_get "$BATS_TEST_TMPDIR/s.txt" tracks)
    [[ "$tracks" == *"main"* && "$tracks" == *"copy"* && "$tracks" == *"compute"* ]] || fail "tracks: $tracks"
    run grep -c '"ph":"X"' "$RECORDED"
    assert_num "$output" ">" 100
    run grep '"name":""' "$RECORDED"
    assert_failure
}

@test "timeline: the checker rejects unsorted events and partly overlapping ones" {
    sed 's/"ts":610.000/"ts":100.000/' "$HAND" >"$BATS_TEST_TMPDIR/unsorted.json"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/unsorted.json" --check
    assert_failure
    assert_output --partial "starts before"
    # the second kernel made to start inside the first one on the same stream
    sed 's/"name":"sgd_kernel","cat":"kernel","ph":"X","ts":600.000/"name":"sgd_kernel","cat":"kernel","ph":"X","ts":599.000/' "$HAND" >"$BATS_TEST_TMPDIR/overlap.json"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/overlap.json" --check
    assert_failure
    assert_output --partial "overlap without nesting"
}

@test "timeline: the figures of the hand-made trace are the ones worked out by hand" {
    "$TOOLS/tracestat" "$HAND" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_equal "$(kv_get "$s" gpu_busy)" 0.660000          # GPU busy from 300 to 960 us of 1000
    assert_equal "$(kv_get "$s" copy_hidden)" 0.400000       # 40 of 100 us of copies under a kernel
    assert_equal "$(kv_get "$s" host_blocked)" 0.100000      # the 100 us sync
    assert_equal "$(kv_get "$s" prep_under_gpu)" 0.500000    # the second prep, not the first
    assert_equal "$(kv_get "$s" largest_gap_ms)" 0.300000    # nothing on the GPU before 300 us
    assert_equal "$(kv_get "$s" kernels)" 3
    assert_equal "$(kv_get "$s" own_kernels)" 1
    assert_equal "$(kv_get "$s" h2d)" 2
    assert_equal "$(kv_get "$s" host_syncs)" 1
}

@test "timeline: the terminal rendering of the hand-made trace matches" {
    run "$TOOLS/tracestat" "$HAND" --window run --text --width 60
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/handmade_trace.timeline.txt"
}

@test "timeline: the terminal rendering of the recorded trace matches, at 100 columns" {
    run "$TOOLS/tracestat" "$RECORDED" --window run --from-batch 10 --batches 3 --text
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/08_small_trace.timeline.txt"
    while IFS= read -r line; do
        [ "${#line}" -le 100 ] || fail "a line is wider than 100 columns: $line"
    done <<<"$output"
}

@test "timeline: the SVG of a trace names every drawn track and is closed" {
    "$TOOLS/tracestat" "$RECORDED" --window run --from-batch 10 --batches 3 --svg "$BATS_TEST_TMPDIR/t.svg"
    run head -c 4 "$BATS_TEST_TMPDIR/t.svg"
    assert_output "<svg"
    run tail -n 1 "$BATS_TEST_TMPDIR/t.svg"
    assert_output "</svg>"
    grep -q ">main</text>" "$BATS_TEST_TMPDIR/t.svg"
    grep -q ">compute</text>" "$BATS_TEST_TMPDIR/t.svg"
}
