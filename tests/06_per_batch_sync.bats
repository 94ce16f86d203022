#!/usr/bin/env bats
# Lesson 06: the training loop that synchronises after every batch.

load helpers

P=06_per_batch_sync

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

@test "06 builds, and --help lists the training options" {
    run "$BIN/$P" --help
    assert_success
    for option in --batches --batch --hidden --layers --prep-work --check-cpu --trace --timeline --json; do
        assert_output --partial -- "$option"
    done
}

@test "06 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P"
    run --separate-stderr "$BIN/$P" --bogus
    assert_equal "$status" 2
}

@test "06 refuses a model whose matrices an int cannot index, before looking for a GPU" {
    run --separate-stderr "$BIN/$P" --in 65536 --hidden 65536
    assert_equal "$status" 2
    [[ "$stderr" == *"at most 2147483647"* ]]
}

@test "06 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 trains: every loss taken exactly once, bit-identical to the synchronous reference and run to run" {
    need_gpu
    run_json r "$BIN/$P" $SMALL
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" verified)" true
    assert_equal "$(json_get "$f" losses_taken)" 40
    assert_equal "$(json_get "$f" losses_once)" true
    assert_equal "$(json_get "$f" matches_reference)" true
    assert_equal "$(json_get "$f" runs_identical)" true
    assert_num "$(json_get "$f" loss_last)" "<" "$(json_get "$f" loss_first)" "the loss falls"
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 synchronises twice per batch: for the copy, then for the step" {
    need_gpu
    run_json r "$BIN/$P" $SMALL
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" syncs)" 80
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 the GPU loss curve agrees with the CPU reference to 1e-4" {
    need_gpu
    run_json r "$BIN/$P" $TINY --check-cpu
    assert_success
    assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" cpu_check_max_rel)" "<=" 1e-4
}

# bats test_tags=gpu
@test "06 refuses a model larger than the GPU's memory with one clear line" {
    need_gpu
    run --separate-stderr "$BIN/$P" --hidden 46000 --layers 8 --batches 1
    assert_equal "$status" 2
    [[ "$stderr" == *"GiB of device memory"* ]] || fail "got: $stderr"
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 trace: the GPU idles while the host prepares, and every copy and kernel is there" {
    need_gpu
    run "$BIN/$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/jsoncheck" "$BATS_TEST_TMPDIR/t.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_num "$(kv_get "$s" prep_under_gpu)" "<" 0.1 "host prep time with the GPU busy"
    assert_equal "$(kv_get "$s" h2d)" 30
    assert_equal "$(kv_get "$s" d2h)" 30
    assert_step_kernels "$s" 30 5
    assert_equal "$(kv_get "$s" host_syncs)" 60  # CUPTI sees the lesson's two syncs per batch
    assert_equal "$(kv_get "$s" dropped)" 0
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer memcheck, with leak check, is clean" {
    need_sanitizer
    sanitize memcheck "$BIN/$P" $TINY
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer racecheck is clean" {
    need_sanitizer
    sanitize racecheck "$BIN/$P" $TINY
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer synccheck is clean" {
    need_sanitizer
    sanitize synccheck "$BIN/$P" $TINY
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer initcheck is clean" {
    need_sanitizer
    sanitize initcheck "$BIN/$P" $TINY
}
