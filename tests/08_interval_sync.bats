#!/usr/bin/env bats
# Lesson 08: synchronising every N batches, one batch behind.

load helpers

P=08_interval_sync

setup_file() {
    detect_gpu
}

@test "08 --help lists --sync-interval, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    assert_output --partial "--sync-interval"
}

@test "08 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" sync-interval abc 0 -1 1000001
}

@test "08 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:08-host-slot,ex:08-device-slot,ex:08-interval
@test "08 trains bit-identically to the reference under every test delay, taking every loss once" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" losses_taken)" 40
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" runs_identical)" true
}

# bats test_tags=gpu,ex:08-host-slot,ex:08-device-slot,ex:08-interval
@test "08 synchronises once per interval, in both variants, for any interval" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    # one wait per interval; with an interval of 1 the lagged variant has nothing to
    # wait for after batch 0 (batch -1 does not exist): 39 waits for 40 batches
    for interval in 10 7 2 64 1; do
        run_json r "$P" $SMALL --sync-interval $interval --delay-us "$DELAY_US" --delay-on compute
        assert_success
        f=$BATS_TEST_TMPDIR/r.json
        want=$(((40 + interval - 1) / interval))
        assert_equal "$(json_get "$f" newest_syncs)" "$want"
        [ "$interval" -eq 1 ] && want=39
        assert_equal "$(json_get "$f" syncs)" "$want"
        assert_equal "$(json_get "$f" verified)" true
    done
}

# bats test_tags=gpu,ex:08-host-slot,ex:08-device-slot,ex:08-interval
@test "08 gives the course's 06 losses and weights, bit for bit" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL --sync-interval 7
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum)"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
}

# bats test_tags=gpu,timed,ex:08-host-slot,ex:08-device-slot,ex:08-interval
@test "08 at the balanced default runs within 20% of its bound: prep and GPU overlap" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run_json r "$P" $BALANCED
    assert_success
    # bound = max(the main thread's own work, copy, GPU step), all measured in this run
    assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" efficiency)" ">=" 0.8 "bound / step"
}

# bats test_tags=gpu,timed,ex:08-host-slot,ex:08-device-slot,ex:08-interval
@test "08 trace: the GPU works while the host prepares; CUPTI sees the lesson's waits and no other" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run --separate-stderr prog "$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json" --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_num "$(kv_get "$s" prep_under_gpu)" ">" 0.5 "host prep time with the GPU busy"
    # the window is the last run of the lesson's own loop: its syncs, plus its slot waits that blocked
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(kv_get "$s" host_syncs)" $(($(json_get "$f" syncs) + $(json_get "$f" slot_waits)))
}

# bats test_tags=gpu
@test "08 trace of the course's program: every copy and kernel of each step is in it, none dropped" {
    need_gpu
    assert_trace_complete 08_interval_sync 30
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "08 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
