#!/usr/bin/env bats
# Lesson 08: synchronising every N batches.

load helpers

P=08_interval_sync

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

@test "08 builds, and --help lists --sync-interval" {
    run "$BIN/$P" --help
    assert_success
    assert_output --partial "--sync-interval"
}

@test "08 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" sync-interval abc 0 -1 1000001
}

@test "08 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:08-interval,ex:08-device-slot,ex:08-host-slot
@test "08 trains bit-identically to the reference, taking every loss once" {
    need_gpu
    run_json r "$BIN/$P" $SMALL
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" verified)" true
    assert_equal "$(json_get "$f" losses_taken)" 40
    assert_equal "$(json_get "$f" losses_once)" true
    assert_equal "$(json_get "$f" matches_reference)" true
    assert_equal "$(json_get "$f" runs_identical)" true
}

# bats test_tags=gpu,ex:08-interval
@test "08 synchronises ceil(batches / interval) times" {
    need_gpu
    for interval in 10 7 1 64; do
        run_json r "$BIN/$P" $SMALL --sync-interval $interval
        assert_success
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" syncs)" $(((40 + interval - 1) / interval))
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" verified)" true
    done
}

# bats test_tags=gpu,ex:08-interval,ex:08-device-slot,ex:08-host-slot
@test "08 gives 06's and 07's losses and weights, bit for bit" {
    need_gpu
    run_json a "$BIN/06_per_batch_sync" $SMALL
    run_json b "$BIN/07_event_sync" $SMALL
    run_json c "$BIN/$P" $SMALL --sync-interval 7
    for x in b c; do
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/$x.json" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/$x.json" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
    done
}

# bats test_tags=gpu,ex:08-interval
@test "08 trace: the GPU works while the host prepares the next batch" {
    need_gpu
    run "$BIN/$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_num "$(kv_get "$s" prep_under_gpu)" ">" 0.5 "host prep time with the GPU busy"
    assert_step_kernels "$s" 30 5
    assert_equal "$(kv_get "$s" h2d)" 30
    # CUPTI's count: the interval syncs plus the slot waits that had to block
    waits=$(awk -F'slot waits ' 'NF > 1 {split($2, a, ","); print a[1]}' <<<"$output" | tail -n 1)
    assert_equal "$(kv_get "$s" host_syncs)" $((3 + waits))
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer memcheck, with leak check, is clean" {
    need_sanitizer
    sanitize memcheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer racecheck is clean" {
    need_sanitizer
    sanitize racecheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer synccheck is clean" {
    need_sanitizer
    sanitize synccheck "$BIN/$P" $TINY --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer initcheck is clean" {
    need_sanitizer
    sanitize initcheck "$BIN/$P" $TINY --sync-interval 5
}
