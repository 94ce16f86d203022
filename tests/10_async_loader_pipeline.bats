#!/usr/bin/env bats
# Lesson 10: loader threads, a ring of pinned slots recycled by events.

load helpers

P=10_async_loader_pipeline

setup_file() {
    detect_gpu
}

@test "10 --help lists the loader options, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    for option in --workers --prefetch --sync-interval --fault-at-batch; do
        assert_output --partial -- "$option"
    done
}

@test "10 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" workers abc 0 -1 65
    check_rejects "$P" prefetch abc 0 -1 4097
    check_rejects "$P" fault-at-batch abc -2 1000001 1.5
}

@test "10 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:10-claim,ex:10-publish,ex:10-hand-back,ex:10-recycle
@test "10 gives the course's 06 losses and weights bit for bit, for any workers and prefetch, under every test delay" {
    need_gpu
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/ref.json"
    for config in "1 1" "3 2" "4 6" "8 3" "2 1024"; do
        set -- $config
        assert_verified_under_delays "$P" $SMALL --workers "$1" --prefetch "$2"
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/ref.json" loss_checksum)"
        assert_equal "$(json_get "$f" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/ref.json" weights_checksum)"
    done
}

# bats test_tags=gpu,timed,deadline,ex:10-claim,ex:10-publish,ex:10-hand-back,ex:10-recycle
@test "10 a failing loader stops the run within seconds, however the loaders stand: every loader joined, the batch named" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL --workers 3 --prefetch 2
    # the first batch, one in the middle (others asleep on full slots), the last; one and
    # many loaders; a ring of one slot and of several; with the copy held back, so that
    # loaders are waiting for their slots' copies when the failure comes
    for config in "0 1 1" "17 4 1" "17 1 3" "39 4 3" "17 8 2"; do
        set -- $config
        start=$(date +%s)
        run --separate-stderr prog "$P" $SMALL --fault-at-batch "$1" --workers "$2" --prefetch "$3" --delay-us "$DELAY_US" --delay-on copy
        assert_equal "$status" 1
        [[ "$stderr" == *"failed while preparing batch $1"* ]] || fail "batch $1, $2 loaders, $3 slots: $stderr"
        [[ "$stderr" == *"every loader thread joined"* ]] || fail "batch $1, $2 loaders, $3 slots: $stderr"
        assert_num $(($(date +%s) - start)) "<" 20 "seconds to stop"
    done
}

# bats test_tags=gpu,timed,ex:10-claim,ex:10-publish,ex:10-hand-back,ex:10-recycle
@test "10 trace: loader threads prepare batches while the GPU works; CUPTI sees the lesson's waits" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run --separate-stderr prog "$P" $GPU_HEAVY --workers 2 --trace "$BATS_TEST_TMPDIR/t.json" --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    [[ "$(kv_get "$s" tracks)" == *"loader 0"* && "$(kv_get "$s" tracks)" == *"loader 1"* ]] || fail "tracks: $(kv_get "$s" tracks)"
    assert_num "$(kv_get "$s" prep_under_gpu)" ">" 0.5 "loader prep time with the GPU busy"
    # the interval syncs of the main thread and the loaders' waits for their slots' copies
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(kv_get "$s" host_syncs)" $(($(json_get "$f" syncs) + $(json_get "$f" loader_waits)))
}

# bats test_tags=gpu,timed,ex:10-claim,ex:10-publish,ex:10-hand-back,ex:10-recycle
@test "10 at the balanced default runs within 20% of its bound" {
    need_overlap
    assert_verified_under_test_delays "$P" $SMALL
    run_json r "$P" $BALANCED
    assert_success
    assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" efficiency)" ">=" 0.8 "bound / step"
}

# bats test_tags=gpu
@test "10 trace of the course's program: every copy and kernel of each step is in it, none dropped" {
    need_gpu
    assert_trace_complete 10_async_loader_pipeline 30
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}

# bats test_tags=gpu,sanitizer
@test "10 the failure path leaks nothing (compute-sanitizer leak check)" {
    need_sanitizer
    run "$ROOT/tests/timed" 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 "$BIN/$P" $TINY --workers 2 --fault-at-batch 5
    assert_equal "$status" 1
    assert_output --partial "ERROR SUMMARY: 0 errors"
}

# host_sanitized KIND: the lesson built with -fsanitize=KIND (address or thread), built on demand
host_sanitized() {
    local san=$1 kind tree exe
    kind=$(basename "$BIN")         # solutions, or lessons when grading
    tree=$(cd "$BIN/../.." && pwd)  # the course tree those were built from
    exe=$tree/build/$san/$kind/$P
    [ -x "$exe" ] || make -C "$tree" -s SAN=$san BUILD=build/$san "build/$san/$kind/$P" >/dev/null ||
        fail "could not build the $san-sanitizer version"
    echo "$exe"
}

# bats test_tags=gpu,host-sanitizer
@test "10 host side: AddressSanitizer finds no memory error and no leak of ours, on success and on failure" {
    need_gpu
    asan=$(host_sanitized address)
    export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 LSAN_OPTIONS=suppressions=$ROOT/tests/lsan.supp
    run "$ROOT/tests/timed" 300 "$asan" $TINY --workers 3 --prefetch 3 --sync-interval 5
    assert_success
    refute_output --partial "ERROR: AddressSanitizer"
    refute_output --partial "ERROR: LeakSanitizer"
    run "$ROOT/tests/timed" 300 "$asan" $TINY --workers 3 --prefetch 2 --fault-at-batch 7
    assert_equal "$status" 1
    refute_output --partial "ERROR: AddressSanitizer"
    refute_output --partial "ERROR: LeakSanitizer"
}

# bats test_tags=gpu,host-sanitizer
@test "10 host side: ThreadSanitizer finds no data race between the loaders and the main thread, on success and on failure" {
    need_gpu
    tsan=$(host_sanitized thread)
    run "$ROOT/tests/timed" 300 "$tsan" $TINY --workers 4 --prefetch 3 --sync-interval 5
    assert_success
    refute_output --partial "WARNING: ThreadSanitizer"
    run "$ROOT/tests/timed" 300 "$tsan" $TINY --workers 4 --prefetch 2 --fault-at-batch 7
    assert_equal "$status" 1
    refute_output --partial "WARNING: ThreadSanitizer"
}
