#!/usr/bin/env bats
# Lesson 05: copies and kernels overlapped across streams.

load helpers

P=05_stream_overlap

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}
}

@test "05 builds, and --help lists its options" {
    run "$BIN/$P" --help
    assert_success
    assert_output --partial "--streams"
    assert_output --partial "--chunks"
    assert_output --partial "--no-wait"
    assert_output --partial "exit codes"
}

@test "05 refuses bad values with exit code 2 and one line naming the option" {
    for option in size-mib streams chunks reps priority-trials; do
        check_rejects "$P" "$option" abc 0 -1 99999999999999999999
    done
    check_rejects "$P" kernel-work abc -1 1000001
    check_rejects "$P" kernel-ratio abc 0 -1 101
    check_rejects "$P" warmup abc -1 101
    check_rejects "$P" batches abc 1 -1
    check_rejects "$P" only abc -1 6
}

@test "05 refuses an unknown option and a stray argument with exit code 2" {
    run --separate-stderr "$BIN/$P" --bogus
    assert_equal "$status" 2
    [[ "$stderr" == *"unknown option"* ]]
    run --separate-stderr "$BIN/$P" extra
    assert_equal "$status" 2
    [[ "$stderr" == *"unexpected argument"* ]]
}

@test "05 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P"
}

# bats test_tags=gpu,ex:05-per-chunk,ex:05-by-stage
@test "05 overlapped output equals the sequential one bit for bit, both issue orders" {
    need_gpu
    run_json r "$BIN/$P" --only 3 --reps 5
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" overlap_verified)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" verified)" true
}

# bats test_tags=gpu,ex:05-per-chunk
@test "05 overlap reaches 80% of the bound, and 1.3x over sequential with two copy engines" {
    need_gpu
    run_json r "$BIN/$P" --only 3 --reps 5
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_num "$(json_get "$f" efficiency)" ">=" 0.8 "bound / measured, per-chunk order"
    if [ "$(json_get "$f" copy_engines)" -ge 2 ]; then
        assert_num "$(json_get "$f" speedup)" ">" 1.3 "sequential / overlapped"
    fi
    # the bound can't be beaten: measured is never far below it
    assert_num "$(json_get "$f" per_chunk_ms)" ">=" "$(awk -v b="$(json_get "$f" bound_ms)" 'BEGIN{print b*0.97}')"
}

# bats test_tags=gpu
@test "05 pinned copies are faster than pageable ones" {
    need_gpu
    run_json r "$BIN/$P" --only 2 --size-mib 64 --reps 5
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_num "$(json_get "$f" h2d_pinned_gbs)" ">" "$(json_get "$f" h2d_pageable_gbs)"
}

# bats test_tags=gpu,ex:05-priority
@test "05 the high-priority probe waits less than half as long as the equal-priority one" {
    need_gpu
    run_json r "$BIN/$P" --only 4 --size-mib 1 --priority-trials 20
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    high=$(json_get "$f" priority_high_median_us)
    control=$(json_get "$f" priority_control_median_us)
    assert_num "$high" "<" "$(awk -v c="$control" 'BEGIN{print c/2}')" "high-priority median vs half the control's"
}

# bats test_tags=gpu,ex:05-kernel-wait,ex:05-copy-out-wait
@test "05 the two-stream pipeline is verified" {
    need_gpu
    run_json r "$BIN/$P" --only 5 --size-mib 64
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" pipeline_verified)" true
}

# bats test_tags=gpu,ex:05-copy-out-wait
@test "05 the pipeline's copy-out waits for its kernel, even when kernels are slow" {
    need_gpu
    run_json r "$BIN/$P" --only 5 --size-mib 16 --kernel-work 20000
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" pipeline_verified)" true
}

# bats test_tags=gpu
@test "05 --no-wait races, and the check catches it" {
    need_gpu
    run "$BIN/$P" --only 5 --size-mib 64 --no-wait
    assert_equal "$status" 1
    assert_output --partial "verification FAILED"
}

# bats test_tags=gpu,ex:05-per-chunk
@test "05 trace: copies overlap kernels in the per-chunk run, and not at all in the sequential run" {
    need_gpu
    run "$BIN/$P" --only 3 --size-mib 64 --reps 2 --chunks 16 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    run "$TOOLS/jsoncheck" "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window "per chunk" >"$BATS_TEST_TMPDIR/chunk.txt"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window sequential >"$BATS_TEST_TMPDIR/seq.txt"
    # every copy and kernel the run issued is in the trace
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" h2d)" 16
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" d2h)" 16
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" 'kernel_count\[fma_chain_kernel\]')" 16
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/seq.txt" 'kernel_count\[fma_chain_kernel\]')" 1
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" dropped)" 0
    assert_num "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" copy_hidden)" ">" 0.5 "copy time under kernels, per chunk"
    assert_num "$(kv_get "$BATS_TEST_TMPDIR/seq.txt" kernel_copy_overlap_ms)" "<" 0.001 "sequential overlap"
}

# bats test_tags=gpu
@test "05 --timeline draws the sequential and the per-chunk runs" {
    need_gpu
    run "$BIN/$P" --only 3 --size-mib 64 --reps 2 --timeline
    assert_success
    assert_output --partial "timeline of sequential"
    assert_output --partial "timeline of per chunk"
    assert_output --regexp "stream 0 *\|[ #<>]*#"
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer memcheck, with leak check, is clean" {
    need_sanitizer
    sanitize memcheck "$BIN/$P" --size-mib 2 --chunks 8 --reps 1 --warmup 0 --priority-trials 2
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer racecheck is clean" {
    need_sanitizer
    sanitize racecheck "$BIN/$P" --size-mib 2 --chunks 8 --reps 1 --warmup 0 --priority-trials 2
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer synccheck is clean" {
    need_sanitizer
    sanitize synccheck "$BIN/$P" --size-mib 2 --chunks 8 --reps 1 --warmup 0 --priority-trials 2
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer initcheck is clean" {
    need_sanitizer
    sanitize initcheck "$BIN/$P" --size-mib 2 --chunks 8 --reps 1 --warmup 0 --priority-trials 2
}
