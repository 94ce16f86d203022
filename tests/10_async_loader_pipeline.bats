#!/usr/bin/env bats
# Lesson 10: loader threads, a ring of pinned slots recycled by events.

load helpers

P=10_async_loader_pipeline

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

@test "10 builds, and --help lists the loader options" {
    run "$BIN/$P" --help
    assert_success
    for option in --workers --prefetch --sync-interval --fail-at-batch; do
        assert_output --partial -- "$option"
    done
}

@test "10 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    check_rejects "$P" workers abc 0 -1 65
    check_rejects "$P" prefetch abc 0 -1 1025
    check_rejects "$P" fail-at-batch abc -1
}

@test "10 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:10-claim,ex:10-publish,ex:10-hand-back,ex:10-recycle
@test "10 gives 06's losses and weights bit for bit, for any workers and prefetch" {
    need_gpu
    run_json ref "$BIN/06_per_batch_sync" $SMALL
    for config in "1 1" "1 4" "3 2" "4 6" "8 3"; do
        set -- $config
        run_json r "$BIN/$P" $SMALL --workers "$1" --prefetch "$2"
        assert_success
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" verified)" true
        assert_equal "$(json_get "$f" loss_checksum)" "$(json_get "$BATS_TEST_TMPDIR/ref.json" loss_checksum)"
        assert_equal "$(json_get "$f" weights_checksum)" "$(json_get "$BATS_TEST_TMPDIR/ref.json" weights_checksum)"
    done
}

# bats test_tags=gpu,ex:10-claim,ex:10-publish
@test "10 a failing loader stops the program within seconds, with a clear error and exit code 1" {
    need_gpu
    start=$(date +%s)
    run --separate-stderr timeout 60 "$BIN/$P" $SMALL --fail-at-batch 17
    assert_equal "$status" 1
    [[ "$stderr" == *"failed while preparing batch 17"* ]] || fail "got: $stderr"
    [[ "$stderr" == *"joined"* ]]
    assert_num $(($(date +%s) - start)) "<" 20 "seconds to stop"
}

# bats test_tags=gpu,ex:10-claim,ex:10-publish,ex:10-hand-back
@test "10 trace: loader threads prepare batches while the GPU works" {
    need_gpu
    run "$BIN/$P" $GPU_HEAVY --workers 2 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_output --partial "all checks passed"
    [[ "$(kv_get "$s" tracks)" == *"loader 0"*"loader 1"* || "$(kv_get "$s" tracks)" == *"loader 1"*"loader 0"* ]]
    assert_num "$(kv_get "$s" prep_under_gpu)" ">" 0.5 "loader prep time with the GPU busy"
    assert_step_kernels "$s" 30 5
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer memcheck, with leak check, is clean" {
    need_sanitizer
    sanitize memcheck "$BIN/$P" $TINY --workers 2 --prefetch 3 --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer racecheck is clean" {
    need_sanitizer
    sanitize racecheck "$BIN/$P" $TINY --workers 2 --prefetch 3 --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer synccheck is clean" {
    need_sanitizer
    sanitize synccheck "$BIN/$P" $TINY --workers 2 --prefetch 3 --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "10 compute-sanitizer initcheck is clean" {
    need_sanitizer
    sanitize initcheck "$BIN/$P" $TINY --workers 2 --prefetch 3 --sync-interval 5
}

# bats test_tags=gpu,sanitizer
@test "10 the failure path leaks nothing (compute-sanitizer leak check)" {
    need_sanitizer
    run compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 "$BIN/$P" $TINY --workers 2 --fail-at-batch 5
    assert_equal "$status" 1
    assert_output --partial "ERROR SUMMARY: 0 errors"
}

# bats test_tags=gpu,host-sanitizer
@test "10 host side: AddressSanitizer finds no memory error and no leak of ours" {
    need_gpu
    kind=$(basename "$BIN")            # solutions, or lessons when grading
    tree=$(cd "$BIN/../.." && pwd)     # the course tree those were built from
    asan=$tree/build/asan/$kind/$P
    [ -x "$asan" ] || make -C "$tree" -s SAN=address BUILD=build/asan "build/asan/$kind/$P" >/dev/null ||
        fail "could not build the AddressSanitizer version"
    run env ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 LSAN_OPTIONS=suppressions=$ROOT/tests/lsan.supp \
        "$asan" $TINY --workers 3 --prefetch 3 --sync-interval 5
    assert_success
    refute_output --partial "ERROR: AddressSanitizer"
    refute_output --partial "ERROR: LeakSanitizer"
}

# bats test_tags=gpu,host-sanitizer
@test "10 host side: ThreadSanitizer finds no data race between the loaders and the main thread" {
    need_gpu
    kind=$(basename "$BIN")
    tree=$(cd "$BIN/../.." && pwd)
    tsan=$tree/build/tsan/$kind/$P
    [ -x "$tsan" ] || make -C "$tree" -s SAN=thread BUILD=build/tsan "build/tsan/$kind/$P" >/dev/null ||
        fail "could not build the ThreadSanitizer version"
    run "$tsan" $TINY --workers 4 --prefetch 3 --sync-interval 5
    assert_success
    refute_output --partial "WARNING: ThreadSanitizer"
}
