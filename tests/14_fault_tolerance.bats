#!/usr/bin/env bats
# Lesson 14: a hang found by name. Built only where make finds NCCL (`make -s nccl-status` says why
# not). The flight recorder's rings are files: the tool that reads them (flight-report) and
# tools/launch are checked on fixtures without a GPU in tests/tools.bats; here, the lesson's run ids,
# its recorder under AddressSanitizer, and what its runs write. The runs of two ranks use two GPUs
# where they are visible, else simulated nodes on one (tools/launch --simulate-nodes). Scored checks
# (ex:) fail while their exercise is unsolved: an empty ring names nothing, an unfired event is never
# reported. The checkpoints and restarts are lesson 16's (tests/16_checkpoint_restart.bats).

load helpers

P=14_fault_tolerance
# 30 batches of lesson 12's small model, three buckets (layers 4-3 | 2 | 1): 67848, 65792 and
# 16640 floats (265.0, 257.0 and 65.0 KiB)
S14="--batches 30 --batch 64 --in 64 --hidden 256 --out 8 --bucket-mib 0.25"
FL=$FIXTURES/14_flight

setup_file() {
    detect_nccl "$P"
    detect_gpu
}

# one_line: $stderr is exactly one line
one_line() {
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "expected one line on stderr, got: $stderr"
}

# launch14 N NAME [LAUNCH OPTIONS] -- ARGS...: N ranks of $BIN/$P (or $PROGRAM14) under tools/launch (simulated
# nodes on fewer GPUs), in the rendezvous folder $BATS_TEST_TMPDIR/rv (run id t), with --json.
# Rank 0's last JSON object (an attempt that failed leaves a bare "{") into NAME.json, every
# rank's stderr and the launcher's into NAME.txt.
launch14() {
    local n=$1 name=$2 opts=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    mkdir -p "$BATS_TEST_TMPDIR/rv"
    # shellcheck disable=SC2046
    run --separate-stderr "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" $(launch_options "$n") --rendezvous \
        "$BATS_TEST_TMPDIR/rv" --run-id t "${opts[@]}" "${PROGRAM14:-$BIN/$P}" "$@" --json
    printf '%s\n' "$output" | awk '/^\{$/ { n = 0; delete l } { l[++n] = $0 } END { for (k = 1; k <= n; k++) print l[k] }' \
        >"$BATS_TEST_TMPDIR/$name.json"
    printf '%s\n' "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
}

# assert_same_bits A B: the two runs' JSON give the same final weights and losses
assert_same_bits() {
    local a=$BATS_TEST_TMPDIR/$1.json b=$BATS_TEST_TMPDIR/$2.json
    assert_equal "$(json_get "$a" weights_checksum) $(json_get "$a" loss_checksum)" \
        "$(json_get "$b" weights_checksum) $(json_get "$b" loss_checksum)"
}

# flight_race: tests/flight-race.c with the course's recorder.cu, compiled as C with its CUDA and
# NCCL calls stubbed, under ASan (gcc, seconds); prints its path.
flight_race() {
    local bin=$BATS_FILE_TMPDIR/flight-race flags
    if [ ! -x "$bin" ]; then
        flags=$(make -s --no-print-directory -C "$ROOT" host-includes) || fail "make host-includes failed"
        # shellcheck disable=SC2086
        (cd "$ROOT" && gcc -x c -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=address -fno-omit-frame-pointer \
            $flags -c solutions/$P/recorder.cu -o "$bin.o" &&
            gcc -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=address -fno-omit-frame-pointer $flags \
                tests/flight-race.c common/recovery/flight.c common/base/own_file.c common/base/regular_file.c \
                common/base/stderr_line.c "$bin.o" \
                -lpthread -o "$bin") ||
            fail "tests/flight-race.c and the lesson's recorder.cu do not build"
    fi
    echo "$bin"
}

# ----------------------------------------------------------------------------
# course health: no GPU needed

@test "14 builds, and --help lists its options, one default each inside its range, and how to restart" {
    need_nccl
    check_help "$P"
    for option in --fingerprint-every --ring-slots --fault --fault-rank --fault-at-batch --rendezvous --timeout-s \
        --bucket-mib --json; do
        assert_output --partial -- "$option"
    done
    assert_output --partial "--restarts"
    assert_output --partial "tools/flight-report"
}

@test "14 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_rejects "$P" fault abc 1 crash torn
    check_rejects "$P" fault-rank abc -2 65536
    check_rejects "$P" fault-at-batch abc -2
    check_rejects "$P" fingerprint-every abc -1
    check_rejects "$P" ring-slots abc 15 65537
    check_rejects "$P" timeout-s 0
    check_rejects "$P" bucket-mib 0
}

@test "14 refuses a fault that cannot happen, with one line" {
    need_nccl
    check() {
        run --separate-stderr env "$@"
        [ "$status" -eq 2 ] || fail "$*: exit code $status, expected 2: $stderr"
        one_line
    }
    check X=1 "$BIN/$P" $S14 --fault kill
    check X=1 "$BIN/$P" $S14 --fault-rank 0 --fault-at-batch 3
    check X=1 "$BIN/$P" $S14 --fault kill --fault-rank 0 --fault-at-batch 30
    [[ "$stderr" == *"--fault-at-batch 30"* ]] || fail "got: $stderr"
    check X=1 "$BIN/$P" $S14 --fault kill --fault-rank 1 --fault-at-batch 3
    [[ "$stderr" == *"--fault-rank 1"* ]] || fail "got: $stderr"
    check RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" LAUNCH_ATTEMPT=x "$BIN/$P" $S14
    [[ "$stderr" == *"LAUNCH_ATTEMPT"* ]] || fail "got: $stderr"
}

# Ids of 76 and 79 characters once became the same 63: attempt 1 of a launch read attempt 0's
# NCCL id, notes and rings.
# bats test_tags=claim:14-run-id
@test "14 a run id too long to name the run's files is refused, one line, exit code 2, before any GPU work: never cut" {
    need_nccl
    long=$(printf 'job-%072d' 7)  # 76 characters
    for var in RUN_ID TORCHELASTIC_RUN_ID; do
        run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 "$var=$long" \
            RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" "$ROOT/tests/timed" 60 "$BIN/$P" $S14
        [ "$status" -eq 2 ] || fail "$var: exit code $status, expected 2: $stderr"
        one_line
        [[ "$stderr" == *"the run id $long (from $var) has 76 characters, where at most 63 fit"* ]] || fail "$stderr"
    done
    run --separate-stderr env CUDA_VISIBLE_DEVICES= OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 \
        PMIX_NAMESPACE="$long" RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" "$ROOT/tests/timed" 60 "$BIN/$P" $S14
    assert_equal "$status" 2
    [[ "$stderr" == *"(from PMIX_NAMESPACE)"* ]] || fail "$stderr"
    # 63 characters fit: on to the GPU (none here: exit code 3)
    run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 RUN_ID="${long:0:63}" \
        RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" "$ROOT/tests/timed" 60 "$BIN/$P" $S14
    assert_equal "$status" 3
}

# "a:b" and "a_b" once named the same files: every character but letters, digits, '.', '_' and '-'
# became '_'. tests/run-ids.c prints the name dist_init (common/dist/dist_env.c) gives them (named
# $ROOT/tests/run-ids.c below, so that make-handout copies it).
# bats test_tags=claim:14-run-id-names
@test "14 two run ids never name the same files: a character a file name cannot hold is written %XX, no GPU needed" {
    need_nccl  # dist.h includes nccl.h
    local flags cuda=${CUDA_HOME:-/usr/local/cuda} bin=$BATS_TEST_TMPDIR/run-ids
    flags=$(make -s --no-print-directory -C "$ROOT" host-includes) || fail "make host-includes failed"
    # shellcheck disable=SC2086
    (cd "$ROOT" && gcc -std=c11 -Wall -Wextra -Werror $flags "$ROOT/tests/run-ids.c" common/dist/dist_env.c \
        common/base/args.c common/base/own_file.c common/base/stderr_line.c common/base/timing.c common/base/check.c \
        common/base/host_memory.c common/base/json.c -L"$cuda/lib64" -Wl,-rpath="$cuda/lib64" -lcudart -lm \
        -o "$bin") || fail "tests/run-ids.c does not build"
    name() { env RANK=0 WORLD_SIZE=2 RUN_ID="$1" "$bin"; }
    declare -A seen
    for id in a:b a_b a-b a.b 'a b' a%3Ab a/b launch-host-123-456 x.a1; do
        got=$(name "$id") || fail "$id: refused"
        [ -z "${seen[$got]:-}" ] || fail "'$id' and '${seen[$got]}' name the same files: $got"
        seen[$got]=$id
        [[ "$got" =~ ^[A-Za-z0-9._%-]+$ ]] || fail "'$id' names its files '$got'"
    done
    assert_equal "$(name a:b) $(name a_b) $(name launch-host-123-456) $(name a%3Ab)" "a%3Ab a_b launch-host-123-456 a%253Ab"
    assert_equal "$(env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 PMIX_NAMESPACE='prterun-h-12@1' "$bin")" \
        "prterun-h-12%401"
    # 30 characters that each take three: refused, never cut
    run --separate-stderr name "$(printf ':%.0s' {1..30})"
    assert_equal "$status" 2
    [[ "$stderr" == *"names its files with 90 characters"*"where at most 63 fit"* ]] || fail "$stderr"
}

@test "14 without a GPU says so and exits with code 3" {
    need_nccl
    check_no_gpu_exit "$P" $S14
}

# bats test_tags=claim:14-report-part
@test "14 flight-report names two buckets of equal size issued in another order: the bucket differs, not the size" {
    run --separate-stderr "$TOOLS/flight-report" "$FL/swap"
    assert_equal "$status" 4
    assert_equal "$output" "rank 1 issued all-reduce #20 (batch 5, bucket 3, 257.0 KiB) where rank 0 issued all-reduce #20 (batch 5, bucket 0, 257.0 KiB)"
}

# The watchdog claims a stop while the main thread is inside an NCCL call; the call returns and
# is recorded while the stop hook copies the ring. Built host-only (no GPU), the copy made slow.
# bats test_tags=host-sanitizer,claim:14-ring-copy
@test "14 the ring copied by the stop hook while the main thread records: never past its end, no entry torn (ASan)" {
    need_nccl
    [ -d "$ROOT/solutions" ] || skip "the course's own recorder.cu: not in a student's copy"
    bin=$(flight_race)
    for k in 1 2 3; do
        rm -rf "$BATS_TEST_TMPDIR/r" && mkdir "$BATS_TEST_TMPDIR/r"
        run "$ROOT/tests/timed" 60 "$bin" "$BATS_TEST_TMPDIR/r"
        [ "$status" -eq 0 ] || fail "run $k: exit code $status: $(grep -m 3 -E 'ERROR|WRITE|#0|torn|does not' <<<"$output")"
        assert_output --partial "none torn"
        refute_output --partial "AddressSanitizer"
    done
}

# bats test_tags=claim:14-launch-run-id
@test "14 tools/launch: its own run id fits a rank's with a 64-character host name, attempts too; a --run-id too long refused" {
    mkdir "$BATS_TEST_TMPDIR/bin"
    printf '#!/bin/sh\necho %s\n' "$(printf 'h%.0s' {1..64})" >"$BATS_TEST_TMPDIR/bin/hostname"
    chmod +x "$BATS_TEST_TMPDIR/bin/hostname"
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
echo "$RUN_ID" >>"$OUT/ids"
[ "$LAUNCH_ATTEMPT" = 0 ] && [ "$RANK" = 1 ] && exit 7
exit 0
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" "$LAUNCH" -n 2 --restarts 1 "$BATS_TEST_TMPDIR/rank"
    assert_success
    assert_equal "$(wc -l <"$OUT/ids")" 4
    while read -r id; do
        [ "${#id}" -le 63 ] || fail "a run id of ${#id} characters, more than a rank takes: $id"
    done <"$OUT/ids"
    grep -q "^launch-hhhh.*\.a1$" "$OUT/ids" || fail "the fake host name is not used: $(cat "$OUT/ids")"
    if [ -x "$BIN/$P" ]; then  # the lesson itself takes it (no GPU here: exit code 3, never 2)
        run --separate-stderr env PATH="$BATS_TEST_TMPDIR/bin:$PATH" CUDA_VISIBLE_DEVICES= "$LAUNCH" -n 2 \
            "$BIN/$P" $S14
        [ "$status" -eq 3 ] || fail "exit code $status, expected 3: $stderr"
    fi
    # --run-id: what fits with its attempts' .aR
    run --separate-stderr "$LAUNCH" -n 2 --restarts 1 --run-id "$(printf 'j%.0s' {1..61})" "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == "launch: --run-id expects at most 60 characters (its attempts add .a1), got 61"* ]] || fail "$stderr"
    run --separate-stderr "$LAUNCH" -n 2 --run-id "$(printf 'j%.0s' {1..64})" "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 2
    run --separate-stderr "$LAUNCH" -n 1 --run-id "$(printf 'j%.0s' {1..63})" "$BATS_TEST_TMPDIR/rank"
    assert_success
}

# ----------------------------------------------------------------------------
# two ranks: two GPUs, or simulated nodes on one

# bats test_tags=ranks,gpu,ex:14-ring,claim:14-ring-end
@test "14 two ranks: every rank's ring written at the end, agreeing, every call completed" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    # a fingerprint check before batches 0, 10 and 20 (its default), 30 batches x 3 buckets, the
    # losses' all-reduce, the checksums' all-gather
    launch14 2 a -- $S14
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/a.txt")"
    f=$BATS_TEST_TMPDIR/a.json
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
    calls=95
    assert_equal "$(json_get "$f" flight_calls)" $calls
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv" --ranks
    assert_success
    assert_equal "${lines[0]}" "rank 0: $calls calls, the last $calls in its ring; stopped: - (the run ended)"
    [[ "${lines[2]}" == "no divergence: the 2 ranks' rings agree, every call completed (rank 0: $calls calls, the last all-gather #$((calls - 1)) "* ]] ||
        fail "${lines[2]}"
}

# bats test_tags=ranks,gpu,timed,deadline,ex:14-ring
@test "14 buckets in another order, or one all-reduce skipped, on one rank: the run stops, flight-report names the call" {
    need_nccl_gpu
    for fault in order skip; do
        rm -rf "$BATS_TEST_TMPDIR/rv"
        SECONDS=0
        # the recorder alone: no fingerprint check (the next, before batch 10, would come too late anyway)
        launch14 2 x --grace-s 60 -- $S14 --fingerprint-every 0 --fault $fault --fault-rank 1 --fault-at-batch 5 \
            --timeout-s 10
        [ "$status" -ne 0 ] || fail "--fault $fault: the run passed"
        assert_num "$SECONDS" "<" 40 "seconds until every rank had stopped (--fault $fault, --timeout-s 10)"
        run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
        assert_equal "$status" 4
        want="rank 1 issued all-reduce #15 (batch 5, bucket 2, 65.0 KiB) where rank 0 issued all-reduce #15 (batch 5, bucket 0, 265.0 KiB)"
        [ $fault = skip ] && want="rank 1 issued all-reduce #15 (batch 5, bucket 1, 257.0 KiB) where rank 0 issued all-reduce #15 (batch 5, bucket 0, 265.0 KiB)"
        assert_equal "$output" "$want"
    done
}

# bats test_tags=ranks,gpu,timed,deadline,ex:14-ring,ex:14-events,claim:14-stop-hook
@test "14 a rank killed inside an all-reduce: the other stops, and flight-report names the rank and the call it waits in" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- $S14 --fingerprint-every 0 --fault kill --fault-rank 1 --fault-at-batch 5 --timeout-s 10
    [ "$status" -ne 0 ] || fail "the run passed"
    assert_num "$SECONDS" "<" 40 "seconds until every rank had stopped (--timeout-s 10)"
    grep -q "$P rank 1: killed inside all-reduce #15 at batch 5" "$BATS_TEST_TMPDIR/x.txt" ||
        fail "rank 1's line: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
    assert_equal "$status" 4
    assert_equal "$output" "rank 1 left no ring (killed, or stopped before it could write one); rank 0 waits in all-reduce #15 (batch 5, bucket 0, 265.0 KiB), never completed"
}

# A restart (tools/launch --restarts) runs the lesson again from batch 0 (no checkpoint: lesson 16's)
# with the fault in the first attempt only; the failed attempt's rings stay, under its own run id.
# bats test_tags=ranks,gpu,timed,deadline,ex:14-ring,ex:14-events
@test "14 a rank killed, every rank restarted: the restart runs clean, and the failed attempt's rings name the call" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    launch14 2 clean -- $S14
    assert_success
    rm -rf "$BATS_TEST_TMPDIR/rv"
    launch14 2 r --restarts 1 --grace-s 60 -- $S14 --fault kill --fault-rank 1 --fault-at-batch 13 --timeout-s 10
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 8 "$BATS_TEST_TMPDIR/r.txt")"
    grep -q "launch: a rank failed .*restarting every rank, attempt 2 of 2" "$BATS_TEST_TMPDIR/r.txt" ||
        fail "no restart: $(cat "$BATS_TEST_TMPDIR/r.txt")"
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" attempt) $(json_get "$f" flight_calls)" "1 95"
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
    assert_same_bits clean r
    # the failed attempt's rings are there too: rank 1 left none, rank 0 waited in its all-reduce
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv" --run t
    assert_equal "$status" 4
    [[ "$output" == "rank 1 left no ring"*"rank 0 waits in all-reduce #"*"(batch 13, bucket 0, "* ]] || fail "$output"
}

# A rank that hangs before batch 5's fingerprint check: the other enters the check's all-gather and
# waits there until --timeout-s. The all-gather is in its ring as soon as it is queued, before the
# host waits: flight-report names it. Written down after the wait, it is in no ring, and the rings
# agree. (Before issue 47, lesson 16's blocking checkpoint's all-gather showed the same.)
# bats test_tags=ranks,gpu,timed,deadline,claim:14-allgather-recorded
@test "14 a rank that hangs before a fingerprint check: the other waits in the check's all-gather, in its ring" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- $S14 --fingerprint-every 5 --fault hang --fault-rank 1 --fault-at-batch 5 --timeout-s 10
    [ "$status" -ne 0 ] || fail "the run passed"
    assert_num "$SECONDS" "<" 40 "seconds until every rank had stopped (--timeout-s 10)"
    grep -q "$P rank 1: hanging at batch 5" "$BATS_TEST_TMPDIR/x.txt" || fail "rank 1's line: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    # the check before batch 0 is #0, batches 0 to 4 all-reduces #1 to #15: the check before batch 5 is #16
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
    assert_equal "$status" 4
    [[ "$output" == "rank 0 waits in all-gather #16 (batch 5, "*"); rank 1 never issued #16 (its last: all-reduce #15 (batch 4, bucket 2, 65.0 KiB))" ]] ||
        fail "$output"
}

# bats test_tags=ranks,gpu,timed,deadline,claim:14-fp-next
@test "14 the fingerprint check stops a skipped all-reduce before anything hangs, naming it, well under the time limit" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- $S14 --fingerprint-every 1 --fault skip --fault-rank 1 --fault-at-batch 5 --timeout-s 30
    assert_equal "$status" 1
    assert_num "$SECONDS" "<" 20 "seconds until every rank had stopped (the time limit is 30 s)"
    for r in 0 1; do
        grep -q "^$P rank $r: .*fingerprint check before batch 5: rank 1 would issue all-reduce #21 (batch 5, bucket 1, 257.0 KiB) where rank 0 would issue all-reduce #21 (batch 5, bucket 0, 265.0 KiB)" \
            "$BATS_TEST_TMPDIR/x.txt" || fail "rank $r: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    done
    # with no fault: a check every batch, and the run passes
    launch14 2 y -- $S14 --fingerprint-every 1
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/y.json" fingerprint_checks)" 30
}

# A skip on a batch between two checks (every 4 batches, the skip at batch 5): the check before batch
# 4 saw the same calls about to be made, and rank 1's calls pair one off with rank 0's from batch 5
# on, the next check's own all-gather with an all-reduce: the time limit stops the run (or NCCL, or
# that check reading the wrong bytes), and flight-report names the first pair, as note 14 says.
# bats test_tags=ranks,gpu,timed,deadline,claim:14-fp-between
@test "14 a skip between two fingerprint checks: neither check names it; its calls pair one off, flight-report names #17" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- $S14 --fingerprint-every 4 --fault skip --fault-rank 1 --fault-at-batch 5 --timeout-s 10
    [ "$status" -ne 0 ] || fail "the run passed"
    assert_num "$SECONDS" "<" 40 "seconds until every rank had stopped (--timeout-s 10)"
    ! grep -q "fingerprint check before batch [0-5]:" "$BATS_TEST_TMPDIR/x.txt" ||
        fail "a check before the skip named it: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    # the checks before batches 0 and 4 are all-gathers #0 and #13, batches 0 to 3 all-reduces #1 to
    # #12, batch 4 #14 to #16: batch 5's first all-reduce is #17
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
    assert_equal "$status" 4
    assert_equal "$output" "rank 1 issued all-reduce #17 (batch 5, bucket 1, 257.0 KiB) where rank 0 issued all-reduce #17 (batch 5, bucket 0, 265.0 KiB)"
}

# One bucket: the rank that skips its all-reduce is about to make no call where the other makes
# one. Counted before, the checks agreed and rank 0's all-reduce paired with rank 1's next all-gather.
# bats test_tags=ranks,gpu,timed,deadline,claim:14-fp-next
@test "14 the fingerprint check stops a rank about to skip the one all-reduce of a one-bucket plan: one call against none" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- $S14 --bucket-mib 25 --fingerprint-every 1 --fault skip --fault-rank 1 \
        --fault-at-batch 5 --timeout-s 30
    assert_equal "$status" 1
    assert_num "$SECONDS" "<" 20 "seconds until every rank had stopped (the time limit is 30 s)"
    # 5 batches of one all-reduce and one check before it: #11 is batch 5's all-reduce
    for r in 0 1; do
        grep -q "^$P rank $r: .*fingerprint check before batch 5: rank 0 would issue 1 call in batch 5, rank 1 0: rank 0's all-reduce #11 (batch 5, bucket 0, 587.0 KiB) would pair with whatever rank 1 issues next" \
            "$BATS_TEST_TMPDIR/x.txt" || fail "rank $r: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    done
}

# Four buckets of one size (--in 256 --hidden 256 --out 256: 65792 weights a layer): issued in
# another order they sum the wrong buffers and nothing hangs. Between two checks (every 2 batches,
# the fault at batch 5) only the hash of the calls made, bucket by bucket, sees it.
# bats test_tags=ranks,gpu,timed,deadline,claim:14-fp-hash,claim:14-report-part
@test "14 buckets of one size swapped between two fingerprint checks: the next stops the run; flight-report names it" {
    need_nccl_gpu
    SECONDS=0
    launch14 2 x --grace-s 60 -- --batches 12 --batch 64 --in 256 --hidden 256 --out 256 --bucket-mib 0.001 \
        --fingerprint-every 2 --fault order --fault-rank 1 --fault-at-batch 5 --timeout-s 30
    assert_equal "$status" 1
    assert_num "$SECONDS" "<" 20 "seconds until every rank had stopped (the time limit is 30 s)"
    # before batch 6: 6 batches x 4 all-reduces and the checks before batches 0, 2 and 4
    for r in 0 1; do
        grep -q "^$P rank $r: .*fingerprint check before batch 6: rank 1 made 27 calls before batch 6 (fingerprint [0-9a-f]*), rank 0 27 " \
            "$BATS_TEST_TMPDIR/x.txt" || fail "rank $r: $(cat "$BATS_TEST_TMPDIR/x.txt")"
    done
    # batch 5's first all-reduce is #23 (5 x 4, and 3 checks)
    run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
    assert_equal "$status" 4
    assert_equal "$output" "rank 1 issued all-reduce #23 (batch 5, bucket 3, 257.0 KiB) where rank 0 issued all-reduce #23 (batch 5, bucket 0, 257.0 KiB)"
}

# bats test_tags=gpu,ex:14-ring
@test "14 one rank: the weights and losses of lesson 12, bit for bit" {
    need_nccl_gpu
    run --separate-stderr ref 12_data_parallel_overlap $S14 --reps 1 --warmup 0 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    run --separate-stderr prog "$P" $S14 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/b.json"
    assert_same_bits a b
    # 30 x 3, the fingerprint checks before batches 0, 10 and 20, the losses', the checksums'
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/b.json" flight_calls)" 95
}

# ----------------------------------------------------------------------------
# compute-sanitizer, one rank: the course's set (helpers.bash, sanitizer_check)

# bats test_tags=gpu,sanitizer
@test "14 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "14 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "14 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "14 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
