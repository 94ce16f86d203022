#!/usr/bin/env bats
# Lesson 07: events instead of stream synchronisation; spinning and sleeping waits.

load helpers

P=07_event_sync

setup_file() {
    detect_gpu
}

@test "07 --help lists --batches, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    assert_output --partial "--batches"
}

@test "07 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
}

@test "07 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:07-copy-event,ex:07-step-event
@test "07 trains bit-identically to the reference under every test delay, one host sync per batch in both waiting modes" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    f=$BATS_TEST_TMPDIR/v.json
    assert_equal "$(json_get "$f" spin_syncs)" 40
    assert_equal "$(json_get "$f" blocking_syncs)" 40
}

# bats test_tags=gpu,ex:07-copy-event,ex:07-step-event
@test "07 gives the course's 06 losses and weights, bit for bit" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
}

# bats test_tags=gpu,timed,ex:07-copy-event,ex:07-step-event
@test "07 the sleeping wait costs less CPU time per step than the spinning one" {
    need_gpu
    assert_verified_under_test_delays "$P" $SMALL
    # the GPU-heavy model: the host waits long enough per batch for the difference to show
    run_json r "$P" --batches 40 --reps 3 --warmup 1
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_num "$(json_get "$f" blocking_cpu_ms_per_step)" "<" "$(json_get "$f" spin_cpu_ms_per_step)" "CPU time per step"
    grep -q "blocking" "$BATS_TEST_TMPDIR/r.txt"
}

# bats test_tags=gpu,ex:07-copy-event,ex:07-step-event
@test "07 trace: CUPTI sees exactly the lesson's host syncs" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    run prog "$P" $SMALL --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s.txt" host_syncs)" 40
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window blocking >"$BATS_TEST_TMPDIR/b.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/b.txt" host_syncs)" 40
}

# bats test_tags=gpu,sanitizer
@test "07 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "07 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "07 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "07 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
