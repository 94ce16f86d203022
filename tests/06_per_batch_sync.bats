#!/usr/bin/env bats
# Lesson 06: the training loop that synchronises after every batch.
# Scored checks (ex:) run the student's loop under the test delays first: a
# missing wait diverges there every time.

load helpers

P=06_per_batch_sync
EX=ex:06-copy-sync,ex:06-step-sync

setup_file() {
    detect_gpu
}

@test "06 --help lists the training options, with whole-number ranges and one default each, inside its range" {
    run prog "$P" --help
    assert_success
    check_help "$P"
    for option in --batches --batch --hidden --layers --prep-work --check-cpu --delay-us --delay-on --trace --timeline --json; do
        assert_output --partial -- "$option"
    done
}

@test "06 refuses bad values with exit code 2 and one line naming the option" {
    check_training_options "$P" all
    run --separate-stderr prog "$P" --bogus
    assert_equal "$status" 2
}

@test "06 refuses a model whose matrices an int cannot index, before looking for a GPU" {
    run --separate-stderr prog "$P" --in 65536 --hidden 65536
    assert_equal "$status" 2
    [[ "$stderr" == *"at most 2147483647"* ]]
}

@test "06 refuses sizes this machine's memory cannot hold, with one line, before allocating" {
    # nine 46340 x 46340 weight matrices: 77 GiB of initial weights on the host, more on the GPU
    run --separate-stderr prog "$P" --in 46340 --hidden 46340 --layers 8 --out 46340 --batch 1 --batches 1
    if [ "$status" -eq 3 ]; then
        skip "this machine holds 77 GiB of host memory and has no GPU to refuse it"
    fi
    assert_equal "$status" 2
    [[ "$stderr" == *"GiB of host memory"* || "$stderr" == *"GiB of device memory"* ]] || fail "got: $stderr"
    [[ "$stderr" =~ the\ limit\ is\ .*,\ [0-9.]+\ GiB ]] || fail "the message does not name the limit: $stderr"
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "expected one line, got: $stderr"
}

@test "06 without a GPU says so and exits with code 3" {
    check_no_gpu_exit "$P" $SMALL
}

# bats test_tags=gpu
@test "06 refuses a model larger than the GPU's memory with one clear line" {
    need_gpu
    # three copies of the weights (params, gradients, initial) and the activations must not fit:
    # 8 hidden layers of H x H floats, H chosen from this GPU's memory
    command -v nvidia-smi >/dev/null || skip "nvidia-smi is not on the PATH: the GPU's memory is unknown"
    mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
    hidden=$(awk -v m="$mib" 'BEGIN { h = int(sqrt(m * 1048576 / (3 * 4 * 8)) * 1.2) + 1; print (h > 46340 ? 0 : h) }')
    [ "$hidden" -gt 0 ] || skip "this GPU's memory is too large for a model an int can index"
    run --separate-stderr prog "$P" --hidden "$hidden" --layers 8 --batch 1 --batches 1
    assert_equal "$status" 2
    [[ "$stderr" == *"GiB of device memory"* ]] || fail "got: $stderr"
    [[ "$stderr" =~ the\ limit\ is\ .*,\ [0-9.]+\ GiB ]] || fail "the message does not name the limit: $stderr"
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 trains bit-identically to the reference under every test delay, every loss taken, the runs identical" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" losses_taken)" 40
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" runs_identical)" true
}

# bats test_tags=gpu
@test "06 the course's training loop learns: its loss falls over 40 batches (the course's program)" {
    need_gpu
    run --separate-stderr ref "$P" $SMALL --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/r.json"
    assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" loss_last)" "<" "$(json_get "$BATS_TEST_TMPDIR/r.json" loss_first)" "the loss falls"
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 synchronises twice per batch: for the copy, then for the step" {
    need_gpu
    assert_verified_under_delays "$P" $SMALL
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" syncs)" 80
}

# bats test_tags=gpu,ex:06-copy-sync,ex:06-step-sync
@test "06 the lesson's loss curve agrees with the CPU reference to 1e-4, under every test delay" {
    need_gpu
    for delay in "${DELAYS[@]}"; do
        run_json r "$P" $TINY --check-cpu $delay
        assert_success
        assert_num "$(json_get "$BATS_TEST_TMPDIR/r.json" cpu_check_max_rel)" "<=" 1e-4 "relative difference ($delay)"
    done
}

# bats test_tags=gpu,timed,ex:06-copy-sync,ex:06-step-sync
@test "06 trace: the GPU idles while the host prepares, and CUPTI sees the lesson's two syncs per batch and no other" {
    need_gpu
    assert_verified_under_test_delays "$P" $SMALL
    run prog "$P" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    jq -e . "$BATS_TEST_TMPDIR/t.json" >/dev/null
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_num "$(kv_get "$s" prep_under_gpu)" "<" 0.1 "host prep time with the GPU busy"
    assert_equal "$(kv_get "$s" host_syncs)" 60
}

# bats test_tags=gpu
@test "06 trace of the course's program: every copy and kernel of each step is in it, none dropped" {
    need_gpu
    assert_trace_complete 06_per_batch_sync 30
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/complete.txt" d2h)" 30
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "06 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
