#!/usr/bin/env bats
# Lesson 09: four streams, every dependency an event.

load helpers

P=09_four_stream_pipeline

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

@test "09 builds, and --help lists --unsafe" {
    run "$BIN/$P" --help
    assert_success
    assert_output --partial "--unsafe"
    assert_output --partial "--backward-delay-us"
}

@test "09 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" sync-interval abc 0 -1
    check_rejects "$P" backward-delay-us abc -1 100001
}

@test "09 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free
@test "09 gives 06's losses and weights bit for bit, and syncs once per interval" {
    need_gpu
    run_json a "$BIN/06_per_batch_sync" $SMALL
    run_json b "$BIN/$P" $SMALL
    assert_success
    f=$BATS_TEST_TMPDIR/b.json
    assert_equal "$(json_get "$f" verified)" true
    assert_equal "$(json_get "$f" losses_once)" true
    assert_equal "$(json_get "$f" syncs)" 4
    assert_equal "$(json_get "$f" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
    assert_equal "$(json_get "$f" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
}

# bats test_tags=gpu,ex:09-forward-waits,ex:09-backward-wait,ex:09-slot-free
@test "09 stays exact when the backward pass is slow: the events hold" {
    need_gpu
    run_json r "$BIN/$P" $SMALL --backward-delay-us 500
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" matches_reference)" true
}

# bats test_tags=gpu,ex:09-forward-waits
@test "09 --unsafe races, and the losses are caught diverging" {
    need_gpu
    run "$BIN/$P" $SMALL --unsafe
    assert_equal "$status" 1
    assert_output --partial "diverge"
}

# bats test_tags=gpu,ex:09-forward-waits,ex:09-backward-wait
@test "09 trace: forward and backward never overlap, and copies run under the compute" {
    need_gpu
    run "$BIN/$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    # kernels only: the loss's 4-byte copy on the backward stream may run beside the next forward
    assert_num "$(kv_get "$s" 'kernel_overlap_ms\[forward,backward\]')" "<" 0.001 "forward/backward kernel overlap"
    assert_num "$(kv_get "$s" h2d_hidden)" ">" 0.5 "copy-to-GPU time under kernels"
    assert_step_kernels "$s" 30 5
    assert_equal "$(kv_get "$s" h2d)" 30
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer memcheck, with leak check, is clean" {
    need_sanitizer
    sanitize memcheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer racecheck is clean" {
    need_sanitizer
    sanitize racecheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer synccheck is clean" {
    need_sanitizer
    sanitize synccheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "09 compute-sanitizer initcheck is clean" {
    need_sanitizer
    sanitize initcheck "$BIN/$P" $TINY --sync-interval 5
}
