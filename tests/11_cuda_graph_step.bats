#!/usr/bin/env bats
# Lesson 11: the whole step captured once as a CUDA graph, launched once per batch.

load helpers

P=11_cuda_graph_step

# A small model with almost no host preparation: the GPU runs a step faster than the
# host issues it call by call, so what the graph saves shows in the step time.
LAUNCH_BOUND="--batches 200 --batch 64 --in 64 --hidden 256 --out 8 --prep-work 0 --reps 3 --warmup 1"

setup_file() {
    detect_gpu
}

# half X: X / 2, for assert_num
half() {
    awk -v x="$1" 'BEGIN { print x / 2 }'
}

@test "11 --help lists its options, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    for option in --sync-interval --eager --capture-error --delay-on; do
        assert_output --partial -- "$option"
    done
}

@test "11 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" sync-interval abc 0 -1 101
}

@test "11 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
    check_no_gpu_exit "$P" --capture-error
}

@test "11 trace tools: a graph id survives the JSON round trip; tracestat counts graph kernels and graph launches" {
    # the hand-made fixture with its sgd_kernel run by graph 7, and its sync range turned into a
    # cudaGraphLaunch issue range of graph 9
    sed -e '/"name":"sgd_kernel"/s/"pageable":0}/"pageable":0,"graph":7}/' \
        -e 's/"name":"sync","cat":"sync"\(.*\)"pageable":0}/"name":"cudaGraphLaunch","cat":"issue"\1"pageable":0,"graph":9}/' \
        "$FIXTURES/handmade_trace.json" >"$BATS_TEST_TMPDIR/g.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s.txt" graph_kernels)" 1
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s.txt" graph_launches)" 1
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s.txt" kernels)" 3
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --rewrite "$BATS_TEST_TMPDIR/again.json"
    run grep -c '"graph":' "$BATS_TEST_TMPDIR/again.json"
    assert_output 2
    diff <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --window run) \
        <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --window run)
    # a trace without graph ids (every older one) reads as none
    "$TOOLS/tracestat" "$FIXTURES/handmade_trace.json" --window run >"$BATS_TEST_TMPDIR/old.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/old.txt" graph_kernels)" 0
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/old.txt" graph_launches)" 0
}

# bats test_tags=gpu,ex:11-external,ex:11-fork,ex:11-join,ex:11-ring,ex:11-capture,ex:11-launch,ex:11-backward-wait
@test "11 graph and eager runs, and the eager run alone, stay exact when a stream is held back, under every test delay" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" runs_identical)" true
    # the eager step alone (--eager)
    assert_verified_under_delays "$P" $SMALL --eager
}

# bats test_tags=gpu
@test "11 the course's harness runs both variants round-robin, checks every run; --eager captures no graph" {
    need_gpu
    run --separate-stderr ref "$P" $SMALL --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    f=$BATS_TEST_TMPDIR/r.json
    # (1 warm-up + 2 timed) x 2 variants
    assert_equal "$(json_get "$f" runs_checked)" 6
    assert_num "$(json_get "$f" graph_step_ms)" ">" 0 "graph step"
    assert_num "$(json_get "$f" eager_step_ms)" ">" 0 "eager step"
    run --separate-stderr ref "$P" $SMALL --eager --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/e.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/e.json" graphs)" 0
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/e.json" verified)" true
}

# bats test_tags=gpu,ex:11-external,ex:11-fork,ex:11-join,ex:11-ring,ex:11-capture,ex:11-launch,ex:11-backward-wait
@test "11 gives the course's 06 losses and weights, bit for bit, for any sync interval" {
    need_gpu
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    # loss rings of 2, 4, 12 and 18 slots: interval + 1, rounded up to a multiple of the 2 host slots (11 -> 12)
    for interval in 1 3 10 17; do
        assert_verified_under_delays "$P" $SMALL --sync-interval "$interval"
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
        assert_equal "$(json_get "$f" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
    done
}

# bats test_tags=gpu,ex:11-external,ex:11-fork,ex:11-join,ex:11-ring,ex:11-capture,ex:11-launch,ex:11-backward-wait
@test "11 one graph launch per batch holding every kernel of the eager step; nothing syncs or runs inside the capture" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    run --separate-stderr prog "$P" $SMALL --trace "$BATS_TEST_TMPDIR/t.json" --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    f=$BATS_TEST_TMPDIR/r.json
    n=$(json_get "$f" batches)
    nodes=$(json_get "$f" graph_kernel_nodes)
    # what the program counted: one launch per batch, one graph per loss-ring slot
    assert_equal "$(json_get "$f" graph_launches)" "$n"
    assert_equal "$(json_get "$f" graphs)" "$(json_get "$f" loss_ring_slots)"
    assert_equal "$(json_get "$f" graph_memcpy_nodes)" 2        # the batch in, the loss out
    assert_equal "$(json_get "$f" graph_event_record_nodes)" 2  # host slot copied, loss landed
    T=$BATS_TEST_TMPDIR/t.json
    "$TOOLS/tracestat" "$T" --window eager >"$BATS_TEST_TMPDIR/eager.txt"
    "$TOOLS/tracestat" "$T" --window run >"$BATS_TEST_TMPDIR/graph.txt"
    "$TOOLS/tracestat" "$T" --window capture >"$BATS_TEST_TMPDIR/capture.txt"
    e=$BATS_TEST_TMPDIR/eager.txt g=$BATS_TEST_TMPDIR/graph.txt c=$BATS_TEST_TMPDIR/capture.txt
    # the eager step's kernels, as CUPTI saw them, are the graph's kernel nodes
    assert_equal "$(kv_get "$e" kernels)" $((n * nodes))
    assert_equal "$(kv_get "$e" graph_kernels)" 0
    assert_equal "$(kv_get "$e" graph_launches)" 0
    assert_step_kernels "$e" "$n" 4
    # the graph run: the same kernels, every one run by a graph, and one cudaGraphLaunch call per batch
    assert_equal "$(kv_get "$g" kernels)" $((n * nodes))
    assert_equal "$(kv_get "$g" graph_kernels)" $((n * nodes))
    assert_equal "$(kv_get "$g" graph_launches)" "$n"
    assert_step_kernels "$g" "$n" 4
    assert_equal "$(kv_get "$g" h2d)" "$n"
    # the only host waits of the graph run are the lesson's own (interval syncs and slot waits)
    assert_equal "$(kv_get "$g" host_syncs)" $(($(json_get "$f" syncs) + $(json_get "$f" slot_waits)))
    # a capture records work: nothing runs while it lasts, and no host wait is inside it
    assert_equal "$(kv_get "$c" host_syncs)" 0
    assert_equal "$(kv_get "$c" kernels)" 0
    assert_equal "$(kv_get "$c" copies)" 0
    run "$TOOLS/tracestat" "$T" --check
    assert_success
}

# bats test_tags=gpu,timed,ex:11-external,ex:11-fork,ex:11-join,ex:11-ring,ex:11-capture,ex:11-launch,ex:11-backward-wait
@test "11 on a small model the graph issues a step in half the eager host time and steps faster; no slower at the default" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run_json l "$P" $LAUNCH_BOUND
    assert_success
    f=$BATS_TEST_TMPDIR/l.json
    assert_num "$(json_get "$f" graph_issue_ms)" "<" "$(half "$(json_get "$f" eager_issue_ms)")" "graph issue vs half the eager issue, ms per step"
    assert_num "$(json_get "$f" graph_step_ms)" "<" "$(json_get "$f" eager_step_ms)" "graph vs eager step, ms"
    run_json d "$P" $BALANCED
    assert_success
    f=$BATS_TEST_TMPDIR/d.json
    assert_num "$(json_get "$f" graph_step_ms)" "<=" "$(awk -v x="$(json_get "$f" eager_step_ms)" 'BEGIN { print 1.1 * x }')" "graph step vs 1.1 x eager step, ms"
}

# bats test_tags=gpu
@test "11 --capture-error: CUDA refuses a host synchronisation inside a capture; one line names the error, exit code 1" {
    need_gpu
    run --separate-stderr prog "$P" $TINY --capture-error
    assert_equal "$status" 1
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "expected one line on stderr, got: $stderr"
    [[ "$stderr" == *cudaErrorStreamCaptureUnsupported* ]] || fail "the line does not name the error: $stderr"
    [[ "$stderr" == *cudaErrorStreamCaptureInvalidated* ]] || fail "the line does not say the capture was lost: $stderr"
    run --separate-stderr prog "$P" $TINY --capture-error --json
    assert_equal "$status" 1
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/e.json"
    jq -e . "$BATS_TEST_TMPDIR/e.json" >/dev/null || fail "--json output is not valid JSON"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/e.json" capture_error)" cudaErrorStreamCaptureUnsupported
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/e.json" verified)" false
}

# bats test_tags=gpu,sanitizer
@test "11 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "11 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "11 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "11 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}

# bats test_tags=gpu,sanitizer
@test "11 --capture-error leaks nothing (compute-sanitizer leak check)" {
    need_sanitizer
    # the refused synchronisation is the point of the run: not reported as an API error
    run "$ROOT/tests/timed" 300 compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
        --error-exitcode 99 "$BIN/$P" $TINY --capture-error
    assert_equal "$status" 1
    assert_output --partial "ERROR SUMMARY: 0 errors"
}
