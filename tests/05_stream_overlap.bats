#!/usr/bin/env bats
# Lesson 05: copies and kernels overlapped across streams.
#
# Scored checks (ex:ID) fail while exercise ID is unsolved: an unsolved issue
# order leaves its output poisoned; an unsolved priority creates `high` at the
# lowest priority, so its probe waits as long as the other; an unsolved wait lets
# the output diverge under the test delays. Checks of speed also assert that the
# run was verified, so a stub (which issues nothing, fast) cannot pass them, and
# ask for at least 80% of the bound (a solution that serialises fails). That the
# bound is a true lower bound is the course's own business: a health check holds
# the course's solution to it (no run beats it beyond the timing's noise).
# Tags: `timed` marks a check that asserts a ratio of times: tools/run-tests runs
# those alone, after the others.

load helpers

P=05_stream_overlap
# Sizes at which each GPU check takes a few seconds.
PART3=(--only 3 --size-mib 64 --chunks 16)
PART5=(--only 5 --size-mib 64)

setup_file() {
    detect_gpu
    export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT-120}  # set but empty (a run inside a check): none
}

# assert_within_bound FILE EFFICIENCY_KEY VERIFIED_KEY: the run was verified, and
# measured against its bound it reached at least 80% of it.
assert_within_bound() {
    local f=$BATS_TEST_TMPDIR/$1.json
    assert_equal "$(json_get "$f" "$3")" true
    assert_num "$(json_get "$f" "$2")" ">=" 0.8 "$2: bound / measured"
}

# The noise allowed when a run is held to its bound: both sides are taken at their
# fastest repetition (noise on a GPU only adds time), then 2% for the rest.
BOUND_NOISE=1.02

# assert_bound_holds FILE BEST_KEY...: a lower bound holds for every repetition: the
# bound from each part's fastest repetition over the run's fastest repetition (the
# program's *_best keys) is at most 1, beyond the noise.
assert_bound_holds() {
    local f=$BATS_TEST_TMPDIR/$1.json key
    shift
    for key in "$@"; do
        assert_num "$(json_get "$f" "$key")" "<=" "$BOUND_NOISE" "$key: fastest bound / fastest run, a lower bound"
    done
}

@test "05 --help lists its options, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    for option in --size-mib --streams --chunks --kernel-work --kernel-ratio --batches --priority-trials --only \
        --delay-us --delay-on --trace --timeline --json; do
        assert_output --partial "$option"
    done
    refute_output --partial "--no-wait"
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
    check_rejects "$P" delay-us abc -1 100001
    check_rejects "$P" delay-on abc 1 copies
}

@test "05 refuses an unknown option and a stray argument with exit code 2" {
    run --separate-stderr prog "$P" --bogus
    assert_equal "$status" 2
    [[ "$stderr" == *"unknown option"* ]]
    run --separate-stderr prog "$P" extra
    assert_equal "$status" 2
    [[ "$stderr" == *"unexpected argument"* ]]
}

@test "05 refuses a --size-mib that does not fit in the machine's memory, before touching the GPU" {
    # 4096 MiB: 3 pinned buffers and part 2's 2 pageable ones, 20 GiB, allowed up to 80% of the memory
    local mem_kib
    mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    [ "$((20 * 1024 * 1024 * 10))" -gt "$((mem_kib * 8))" ] ||
        skip "this machine has $((mem_kib / 1048576)) GiB: --size-mib 4096 fits"
    run --separate-stderr prog "$P" --size-mib 4096
    [ "$status" -eq 2 ] || fail "exit code $status, expected 2 (bad usage): $stderr"
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "expected one line on stderr, got: $stderr"
    [[ "$stderr" == *"--size-mib"* ]] || fail "the message does not name --size-mib: $stderr"
    [[ "$stderr" =~ the\ limit\ is\ 80%\ of\ .*,\ [0-9.]+\ GiB ]] || fail "the message does not name the limit: $stderr"
}

@test "05 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P"
}

# bats test_tags=gpu
@test "05 --only 1 --json reports copy engines, concurrent kernels and MIG" {
    need_gpu
    run_json r "$P" --only 1 --size-mib 1
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    [[ "$(json_get "$f" copy_engines)" =~ ^[0-9]+$ ]] || fail "copy_engines: '$(json_get "$f" copy_engines)'"
    [[ "$(json_get "$f" concurrent_kernels)" =~ ^[01]$ ]] || fail "concurrent_kernels: '$(json_get "$f" concurrent_kernels)'"
    [[ "$(jq -r .mig "$f")" =~ ^(true|false)$ ]] || fail "mig: '$(jq -r .mig "$f")'"
}

# bats test_tags=gpu,ex:05-per-chunk
@test "05 part 3: the per-chunk order gives the sequential output bit for bit" {
    need_gpu
    run_json r "$P" "${PART3[@]}" --reps 1 --warmup 0
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" reference_verified)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" per_chunk_verified)" true
}

# bats test_tags=gpu,ex:05-by-stage
@test "05 part 3: the by-stage order gives the sequential output bit for bit" {
    need_gpu
    run_json r "$P" "${PART3[@]}" --reps 1 --warmup 0
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" reference_verified)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" by_stage_verified)" true
}

# bats test_tags=gpu,timed,ex:05-per-chunk
@test "05 part 3: the per-chunk order reaches 80% of the bound, and 1.3x over sequential with two copy engines" {
    need_overlap
    run_json r "$P" "${PART3[@]}" --reps 5
    assert_within_bound r efficiency per_chunk_verified
    if [ "$(json_get "$BATS_TEST_TMPDIR/r.json" copy_engines)" -ge 2 ]; then
        assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" speedup)" ">" 1.3 "sequential / per chunk"
    fi
}

# bats test_tags=gpu,timed,ex:05-by-stage
@test "05 part 3: the by-stage order reaches 80% of the bound" {
    need_overlap
    run_json r "$P" "${PART3[@]}" --reps 5
    assert_within_bound r efficiency_by_stage by_stage_verified
}

# bats test_tags=gpu,timed,ex:05-per-chunk
@test "05 part 3: on 1 and 2 streams the per-chunk order is verified and no faster than the bound for that many streams" {
    need_overlap
    for streams in 1 2; do
        run_json r$streams "$P" "${PART3[@]}" --reps 5 --streams "$streams"
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r$streams.json" per_chunk_verified)" true
        assert_bound_holds r$streams efficiency_best
    done
}

# bats test_tags=gpu
@test "05 part 3: on one stream the bound is set by the streams term (the course's program)" {
    need_gpu
    run --separate-stderr ref "$P" "${PART3[@]}" --reps 1 --warmup 0 --streams 1 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" bound_limit)" streams
}

# bats test_tags=gpu,timed
@test "05 the bound is a true lower bound: part 3's orders and part 5's pipeline never beat it (fastest runs, 2% noise)" {
    need_overlap
    run --separate-stderr ref "$P" "${PART3[@]}" --reps 5 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/p3.json"
    assert_bound_holds p3 efficiency_best efficiency_best_by_stage
    run --separate-stderr ref "$P" "${PART5[@]}" --reps 5 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/p5.json"
    assert_bound_holds p5 pipeline_efficiency_best
}

# bats test_tags=gpu,timed
@test "05 the sequential baseline takes the sum of its stages timed alone (within 5%)" {
    need_gpu
    run_json r "$P" "${PART3[@]}" --reps 5
    f=$BATS_TEST_TMPDIR/r.json
    ratio=$(awk -v s="$(json_get "$f" sequential_ms)" -v t="$(json_get "$f" serial_sum_ms)" 'BEGIN { print s / t }')
    assert_num "$ratio" ">=" 0.95 "sequential / sum of the stages alone"
    assert_num "$ratio" "<=" 1.05 "sequential / sum of the stages alone (a baseline from pageable memory is slower)"
}

# bats test_tags=gpu,timed
@test "05 pinned copies are faster than pageable ones" {
    need_gpu
    run_json r "$P" --only 2 --size-mib 64 --reps 5
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_num "$(json_get "$f" h2d_pinned_gbs)" ">" "$(json_get "$f" h2d_pageable_gbs)"
}

# bats test_tags=gpu,timed,ex:05-priority
@test "05 part 4: the high-priority probe waits less than half as long as the equal-priority one" {
    need_overlap
    run_json r "$P" --only 4 --priority-trials 20
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    # every pair that counts had both probes queued while the flood ran
    assert_equal "$(json_get "$f" priority_pairs_kept)" 20
    high=$(json_get "$f" priority_high_median_us)
    control=$(json_get "$f" priority_control_median_us)
    assert_num "$high" "<" "$(awk -v c="$control" 'BEGIN{print c/2}')" "high-priority median vs half the control's"
}

# bats test_tags=gpu,ex:05-kernel-wait,ex:05-copy-out-wait
@test "05 part 5: the two-stream pipeline is bit-identical with no delay, copies delayed and kernels delayed" {
    need_gpu
    for delay in "${DELAYS[@]}"; do
        # shellcheck disable=SC2086
        run_json r "$P" "${PART5[@]}" --reps 1 --warmup 0 $delay
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" reference_verified)" true
        [ "$(json_get "$BATS_TEST_TMPDIR/r.json" pipeline_verified)" = true ] || fail "part 5 ${delay:-with no delay}: not bit-identical"
    done
}

# bats test_tags=gpu,timed,ex:05-kernel-wait,ex:05-copy-out-wait
@test "05 part 5: the pipeline reaches 80% of its bound, and stays bit-identical under delays" {
    need_overlap
    # the delays hold back only the checked run: the timed runs have none
    for on in copy compute; do
        run_json r "$P" "${PART5[@]}" --reps 5 --delay-us "$DELAY_US" --delay-on "$on"
        assert_within_bound r pipeline_efficiency pipeline_verified
    done
}

# bats test_tags=gpu,timed,ex:05-per-chunk
@test "05 trace: the per-chunk run issues every chunk's two copies and kernel, and its copies run under its kernels" {
    need_overlap
    run_json r "$P" "${PART3[@]}" --reps 2 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" per_chunk_verified)" true
    run jq -e . "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window "per chunk" >"$BATS_TEST_TMPDIR/chunk.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" h2d)" 16
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" d2h)" 16
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" 'kernel_count\[fma_chain_kernel\]')" 16
    assert_num "$(kv_get "$BATS_TEST_TMPDIR/chunk.txt" copy_hidden)" ">" 0.5 "copy time under kernels, per chunk"
}

# bats test_tags=gpu
@test "05 trace of the course's program: the sequential run is one kernel that no copy overlaps, and no record is dropped" {
    need_gpu
    run --separate-stderr ref "$P" "${PART3[@]}" --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window sequential >"$BATS_TEST_TMPDIR/seq.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/seq.txt" 'kernel_count\[fma_chain_kernel\]')" 1
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/seq.txt" dropped)" 0
    assert_num "$(kv_get "$BATS_TEST_TMPDIR/seq.txt" kernel_copy_overlap_ms)" "<" 0.001 "sequential overlap"
}

# bats test_tags=gpu
@test "05 --timeline draws the sequential and the per-chunk runs" {
    need_gpu
    run prog "$P" "${PART3[@]}" --reps 2 --timeline
    [ "$status" -le 1 ] || fail "exit code $status"
    assert_output --partial "timeline of sequential"
    assert_output --partial "timeline of per chunk"
    assert_output --regexp "stream 0 *\|[ #<>]*#"
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "05 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
