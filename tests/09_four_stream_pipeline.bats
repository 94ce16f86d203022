#!/usr/bin/env bats
# Lesson 09: four streams, every dependency an event.

load helpers

P=09_four_stream_pipeline

setup_file() {
    detect_gpu
}

@test "09 --help lists the delay options, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    assert_output --partial "--sync-interval"
    assert_output --partial "--delay-on"
}

@test "09 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" sync-interval abc 0 -1
}

@test "09 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free,ex:09-host-slot
@test "09 stays exact when a stream is held back: every event holds, under every test delay" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" runs_identical)" true
}

# bats test_tags=gpu,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free
@test "09 gives the course's 06 losses and weights, bit for bit" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
}

# bats test_tags=gpu
@test "09 synchronises once per interval, and CUPTI sees those waits and no other" {
    need_gpu
    run --separate-stderr prog "$P" $SMALL --trace "$BATS_TEST_TMPDIR/t.json" --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" syncs)" 4
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s.txt" host_syncs)" $(($(json_get "$f" syncs) + $(json_get "$f" slot_waits)))
}

# bats test_tags=gpu,timed,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free
@test "09 trace: forward and backward never overlap, and copies run under the compute" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run prog "$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    # kernels only: the loss's 4-byte copy on the backward stream may run beside the next forward
    assert_num "$(kv_get "$s" 'kernel_overlap_ms\[forward,backward\]')" "<" 0.001 "forward/backward kernel overlap"
    assert_num "$(kv_get "$s" h2d_hidden)" ">" 0.5 "copy-to-GPU time under kernels"
}

# bats test_tags=gpu,timed,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free
@test "09 at the balanced default runs within 20% of its bound" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run_json r "$P" $BALANCED
    assert_success
    assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" efficiency)" ">=" 0.8 "bound / step"
}

# bats test_tags=gpu
@test "09 trace of the course's program: every copy and kernel of each step is in it, none dropped" {
    need_gpu
    assert_trace_complete 09_four_stream_pipeline 30
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
