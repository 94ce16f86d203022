#!/usr/bin/env bats
# Lesson 14: a hang found by name, a failure survived, nothing lost. Built only where make finds
# NCCL (`make -s nccl-status` says why not). The flight recorder's rings and the checkpoints are
# files: tools/flight-report and tools/checkpoint-report are checked on fixtures without a GPU
# (tests/fixtures/14_flight, 14_checkpoints), and so are tools/launch --restarts and the refusal
# of another run's checkpoint. The runs of two ranks use two GPUs where they are visible, else
# simulated nodes on one (tools/launch --simulate-nodes). Scored checks (ex:) fail while their
# exercise is unsolved: an empty ring names nothing, an unfired event is never reported, a
# checkpoint never written or never read back redoes every batch.

load helpers

P=14_fault_tolerance
# 30 batches of lesson 12's small model, three buckets (layers 4-3 | 2 | 1): 67848, 65792 and
# 16640 floats (265.0, 257.0 and 65.0 KiB)
S14="--batches 30 --batch 64 --in 64 --hidden 256 --out 8 --bucket-mib 0.25"
FL=$FIXTURES/14_flight
CK=$FIXTURES/14_checkpoints

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

# fnv1a FILE: the course's FNV-1a 64 of FILE (common/recovery/ckpt.c's start value), 16 hex digits. Bash's
# arithmetic is 64-bit and wraps as C's unsigned multiplication does. In a bash of its own: bats'
# traps would run at every byte.
fnv1a() {
    # shellcheck disable=SC2016
    bash -c 'h=1469598103934665603; for b in $(od -An -v -tu1 "$0"); do h=$(((h ^ b) * 1099511628211)); done
             printf "%016x" "$h"' "$1"
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
                tests/flight-race.c common/recovery/flight.c common/base/own_file.c "$bin.o" -lpthread -o "$bin") ||
            fail "tests/flight-race.c and the lesson's recorder.cu do not build"
    fi
    echo "$bin"
}

# snapshot_host: tests/snapshot-host.c with the course's snapshot.cu, writer.cu and checkpoint.cu,
# compiled as C with their CUDA and NCCL calls stubbed, under ThreadSanitizer (gcc, seconds); prints
# its path.
snapshot_host() {
    local bin=$BATS_FILE_TMPDIR/snapshot-host flags f
    if [ ! -x "$bin" ]; then
        flags=$(make -s --no-print-directory -C "$ROOT" host-includes) || fail "make host-includes failed"
        for f in snapshot writer checkpoint; do
            # shellcheck disable=SC2086
            (cd "$ROOT" && gcc -x c -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=thread $flags \
                -c solutions/$P/$f.cu -o "$bin.$f.o") || fail "the lesson's $f.cu does not build host-only"
        done
        # shellcheck disable=SC2086
        (cd "$ROOT" && gcc -std=gnu11 -g -O1 -Wall -Wextra -Werror -fsanitize=thread $flags tests/snapshot-host.c \
            "$bin.snapshot.o" "$bin.writer.o" "$bin.checkpoint.o" common/recovery/ckpt.c common/recovery/ckpt_run.c \
            common/recovery/ckpt_folders.c common/base/own_file.c -lpthread -o "$bin") ||
            fail "tests/snapshot-host.c does not build"
    fi
    echo "$bin"
}

# The fixture's run, as a header and a manifest write it: two ranks, --in 4 --hidden 8 --layers 1
# --out 2 (58 weights), --seed 1, --batch 64, and the defaults of --lr, --prep-work, --bucket-mib.
FIXTURE_RUN="world 2 shape 4,8,2 params 58 seed 1 global-batch 64 rank-batch 32 lr 0.02 prep-work 5 bucket-bytes 26214400"

# write_rank FILE HEADER PAYLOAD_BYTES: a rank file of zero weights and losses, its checksum right
write_rank() {
    printf '%-511s\n' "$2" >"$1"
    head -c "$3" /dev/zero >>"$1"
    printf 'checksum %s\n' "$(fnv1a "$1")" >>"$1"
}

# manifest_line FILE RANK: the manifest's line of a rank file
manifest_line() {
    printf 'rank %d rank%d.bin %d %s\n' "$2" "$2" "$(stat -c %s "$1")" "$(tail -c 17 "$1" | head -c 16)"
}

# make_ckpt ROOT BATCH LOSSES [SED]: a checkpoint of the fixture's run after batch BATCH holding
# LOSSES losses, every size and checksum right; SED, when given, edits rank 1's header first.
make_ckpt() {
    local dir r f head
    dir=$1/$(printf 'ckpt-%08d' "$2")
    mkdir -p "$dir"
    printf 'course-checkpoint-manifest 2\nbatch %d\n%s\n' "$2" "$(tr ' ' '\n' <<<"$FIXTURE_RUN" | paste -d' ' - -)" \
        >"$dir/manifest"
    for r in 0 1; do
        f=$dir/rank$r.bin
        head="course-checkpoint 2 rank $r batch $2 losses $3 $FIXTURE_RUN"
        if [ "$r" = 1 ] && [ -n "${4:-}" ]; then head=$(sed "$4" <<<"$head"); fi
        write_rank "$f" "$head" $((58 * 4 + $3 * 8))
        manifest_line "$f" "$r" >>"$dir/manifest"
    done
    echo end >>"$dir/manifest"
}

# ----------------------------------------------------------------------------
# course health: no GPU needed

@test "14 builds, and --help lists its options, one default each inside its range, and how to restart" {
    need_nccl
    check_help "$P"
    for option in --checkpoint-dir --checkpoint-every --checkpoint-mode --checkpoint-busy --write-delay-ms \
        --fingerprint-every --ring-slots --fault --fault-rank --fault-at-batch --rendezvous --timeout-s --bucket-mib \
        --json; do
        assert_output --partial -- "$option"
    done
    assert_output --partial "--restarts"
    assert_output --partial "tools/flight-report"
}

@test "14 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_rejects "$P" fault abc 1 crash
    check_rejects "$P" fault-rank abc -2 65536
    check_rejects "$P" fault-at-batch abc -2
    check_rejects "$P" checkpoint-every abc 0 -1
    check_rejects "$P" checkpoint-mode abc async 1
    check_rejects "$P" checkpoint-busy abc block 1
    check_rejects "$P" write-delay-ms abc -1 600001
    check_rejects "$P" fingerprint-every abc -1
    check_rejects "$P" ring-slots abc 15 65537
    check_rejects "$P" checkpoint-dir /nonexistent-folder
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
    check X=1 "$BIN/$P" $S14 --fault torn --fault-rank 0 --fault-at-batch 9
    [[ "$stderr" == *"--checkpoint-dir"* ]] || fail "torn without checkpoints: $stderr"
    check X=1 "$BIN/$P" $S14 --fault disk-full --fault-rank 0 --fault-at-batch 8 --checkpoint-dir "$BATS_TEST_TMPDIR" \
        --checkpoint-every 5
    [[ "$stderr" == *"no checkpoint is written after batch 8"* ]] || fail "no checkpoint there: $stderr"
    check X=1 "$BIN/$P" $S14 --fault torn --fault-rank 0 --fault-at-batch 29 --checkpoint-dir "$BATS_TEST_TMPDIR" \
        --checkpoint-every 5
    # kill-writing: a snapshot's writer, a checkpoint after that batch, the next one after the kill
    ck="--checkpoint-dir $BATS_TEST_TMPDIR --checkpoint-every 5"
    check X=1 "$BIN/$P" $S14 --fault kill-writing --fault-rank 0 --fault-at-batch 9
    [[ "$stderr" == *"--checkpoint-dir"* ]] || fail "kill-writing without checkpoints: $stderr"
    # shellcheck disable=SC2086
    check X=1 "$BIN/$P" $S14 $ck --checkpoint-mode blocking --fault kill-writing --fault-rank 0 --fault-at-batch 9
    [[ "$stderr" == *"needs --checkpoint-mode snapshot"* ]] || fail "kill-writing, blocking: $stderr"
    # shellcheck disable=SC2086
    check X=1 "$BIN/$P" $S14 $ck --batches 26 --fault kill-writing --fault-rank 0 --fault-at-batch 24
    [[ "$stderr" == *"two batches later, past the run's 26"* ]] || fail "kill-writing past the end: $stderr"
    check X=1 "$BIN/$P" $S14 --checkpoint-dir "$BATS_TEST_TMPDIR" --checkpoint-every 2 --fault kill-writing \
        --fault-rank 0 --fault-at-batch 9
    [[ "$stderr" == *"needs --checkpoint-every 3 or more"* ]] || fail "kill-writing every 2: $stderr"
    check RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" LAUNCH_ATTEMPT=x "$BIN/$P" $S14
    [[ "$stderr" == *"LAUNCH_ATTEMPT"* ]] || fail "got: $stderr"
}

# bats test_tags=claim:14-refuse-run,claim:14-refuse-past-end
@test "14 a checkpoint of another rank count, shape or seed, or past the run's end: one line, exit 2, before GPU work" {
    need_nccl
    # the fixture: ranks 2, shape 4,8,2 (--in 4 --hidden 8 --layers 1 --out 2), seed 1
    tiny="--in 4 --hidden 8 --layers 1 --out 2 --batch 64 --batches 40 --checkpoint-dir $CK"
    check() {
        run --separate-stderr env CUDA_VISIBLE_DEVICES= RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" "$@"
        [ "$status" -eq 2 ] || fail "$*: exit code $status, expected 2: $stderr"
        one_line
        [[ "$stderr" == *"a checkpoint of another run"* ]] || fail "got: $stderr"
    }
    # shellcheck disable=SC2086
    check RANK=0 WORLD_SIZE=4 "$BIN/$P" $tiny --seed 1
    [[ "$stderr" == *"holds 2 ranks, this run has 4"* ]] || fail "rank count: $stderr"
    # shellcheck disable=SC2086
    check RANK=1 WORLD_SIZE=2 "$BIN/$P" $tiny --seed 1 --hidden 16
    [[ "$stderr" == *"shape 4,8,2, this run's is 4,16,2"* ]] || fail "shape: $stderr"
    # shellcheck disable=SC2086
    check RANK=1 WORLD_SIZE=2 "$BIN/$P" $tiny --seed 7
    [[ "$stderr" == *"--seed 1, this run has --seed 7"* ]] || fail "seed: $stderr"
    # a run shorter than the checkpoint: its losses would not fit
    # shellcheck disable=SC2086
    check RANK=0 WORLD_SIZE=2 "$BIN/$P" $tiny --seed 1 --batches 10
    [[ "$stderr" == *"at or past this run's last batch (--batches 10"* ]] || fail "batches: $stderr"
    # the same run: it goes on to the GPU (none here: exit code 3, never 2)
    # shellcheck disable=SC2086
    run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" \
        "$ROOT/tests/timed" 60 "$BIN/$P" $tiny --seed 1 --lr 0.02 --prep-work 5 --bucket-mib 25
    assert_equal "$status" 3
}

# bats test_tags=claim:14-refuse-run
@test "14 a checkpoint of another --batch, --lr, --prep-work or bucket size: refused naming the option, exit 2, no GPU work" {
    need_nccl
    # the fixture's run, but for the option each line changes
    tiny="--in 4 --hidden 8 --layers 1 --out 2 --batch 64 --batches 40 --seed 1 --checkpoint-dir $CK"
    while IFS='|' read -r args want; do
        # shellcheck disable=SC2086
        run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" \
            "$ROOT/tests/timed" 60 "$BIN/$P" $tiny $args </dev/null
        [ "$status" -eq 2 ] || fail "$args: exit code $status, expected 2: $stderr"
        one_line
        [[ "$stderr" == *"its checkpoint of batch 19 $want (a checkpoint of another run)" ]] || fail "$args: $stderr"
    done <<'EOF'
--batch 128|was trained with --batch 64, this run has --batch 128
--batch 2|was trained with --batch 64, this run has --batch 2
--lr 0.9|was trained with --lr 0.02, this run has --lr 0.9
--lr 0.020000001|was trained with --lr 0.02, this run has --lr 0.020000001
--prep-work 50|was trained with --prep-work 5, this run has --prep-work 50
--bucket-mib 0.001|cut its gradients into buckets of 26214400 bytes (--bucket-mib), this run into buckets of 1048
EOF
}

# bats test_tags=claim:14-refuse-shape
@test "14 a checkpoint of another shape with as many weights (4,8,2 and 5,3,10: 58 each): refused before any GPU work" {
    need_nccl
    run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR" \
        "$ROOT/tests/timed" 60 "$BIN/$P" --in 5 --hidden 3 --layers 1 --out 10 --batch 64 --batches 40 --seed 1 \
        --checkpoint-dir "$CK"
    [ "$status" -eq 2 ] || fail "exit code $status, expected 2 (a GPU was asked for: 3): $stderr"
    one_line
    [[ "$stderr" == *"its checkpoint of batch 19 holds a model of shape 4,8,2, this run's is 5,3,10 (a checkpoint of another run)" ]] ||
        fail "$stderr"
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

@test "14 without a GPU says so and exits with code 3" {
    need_nccl
    check_no_gpu_exit "$P" $S14
}

# bats test_tags=claim:14-report-differ,claim:14-report-p2p,claim:14-report-noring,claim:14-report-waits
@test "14 flight-report names the first divergence of hand-made rings in one line, each fault by name" {
    fr=$TOOLS/flight-report
    check() {  # check CASE STATUS LINE
        run --separate-stderr "$fr" "$FL/$1"
        [ "$status" -eq "$2" ] || fail "$1: exit code $status, expected $2: $output $stderr"
        assert_equal "$output" "$3"
    }
    check order 4 "rank 1 issued all-reduce #15 (batch 5, bucket 2, 65.0 KiB) where rank 0 issued all-reduce #15 (batch 5, bucket 0, 265.0 KiB)"
    check skip 4 "rank 1 issued all-reduce #15 (batch 5, bucket 1, 257.0 KiB) where rank 0 issued all-reduce #15 (batch 5, bucket 0, 265.0 KiB)"
    check killed 4 "rank 1 left no ring (killed, or stopped before it could write one); rank 0 waits in all-reduce #16 (batch 5, bucket 1, 257.0 KiB), never completed"
    check stuck 4 "rank 0 waits in all-reduce #15 (batch 5, bucket 0, 265.0 KiB); rank 1 never issued #15 (its last: all-reduce #14 (batch 4, bucket 2, 65.0 KiB))"
    check pipeline_order 4 "rank 0 issued send #0 to rank 1 (batch 0, micro-batch 1, 32.0 KiB) where rank 1 issued recv #0 from rank 0 (batch 0, micro-batch 0, 32.0 KiB)"
    check pipeline_fewer 4 "rank 2 waits in recv #2 from rank 1 (batch 0, micro-batch 2, 32.0 KiB); rank 1 never sent #2 (its last: #1)"
    check clean 0 "no divergence: the 3 ranks' rings agree, every call completed (rank 0: 30 calls, the last all-reduce #29 (batch 9, bucket 2, 65.0 KiB))"
    # two runs in one folder: the newest by default, another by --run
    cp -r "$FL/two_runs" "$BATS_TEST_TMPDIR/two"
    touch -d '2020-01-01' "$BATS_TEST_TMPDIR"/two/flight.job6.*
    run "$fr" "$BATS_TEST_TMPDIR/two"
    assert_equal "$status" 4
    assert_output --partial "bucket 1, 257.0 KiB) where rank 0"
    run "$fr" "$BATS_TEST_TMPDIR/two" --run job6
    assert_equal "$status" 4
    # --ranks: a line per rank first
    run "$fr" "$FL/killed" --ranks
    assert_equal "${lines[0]}" "rank 0: 17 calls, the last 8 in its ring; stopped: NCCL reported remote process exited or there was a network error on the parent communicator while this rank was waiting for the GPU"
    assert_equal "${lines[1]}" "rank 1: no ring"
}

@test "14 flight-report refuses what is no ring: one line, exit code 2; no ring at all: exit code 1" {
    fr=$TOOLS/flight-report
    run --separate-stderr "$fr" "$FL/broken"
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == *"flight.job7.rank0:6:"* ]] || fail "the line that does not read: $stderr"
    run --separate-stderr "$fr" "$BATS_TEST_TMPDIR"
    assert_equal "$status" 1
    one_line
    run --separate-stderr "$fr" /nonexistent-folder
    assert_equal "$status" 2
    run --separate-stderr "$fr"
    assert_equal "$status" 2
    run "$fr" --help
    assert_success
    assert_output --partial "exit codes"
    # a ring cut short (the rank died while writing it is impossible: written whole, then
    # renamed; a hand-cut one is refused)
    mkdir "$BATS_TEST_TMPDIR/cut"
    head -n 2 "$FL/order/flight.job7.rank0" >"$BATS_TEST_TMPDIR/cut/flight.x.rank0"
    run --separate-stderr "$fr" "$BATS_TEST_TMPDIR/cut"
    assert_equal "$status" 2
    one_line
}

# bats test_tags=claim:14-report-part
@test "14 flight-report names two buckets of equal size issued in another order: the bucket differs, not the size" {
    run --separate-stderr "$TOOLS/flight-report" "$FL/swap"
    assert_equal "$status" 4
    assert_equal "$output" "rank 1 issued all-reduce #20 (batch 5, bucket 3, 257.0 KiB) where rank 0 issued all-reduce #20 (batch 5, bucket 0, 257.0 KiB)"
}

# Rings that look whole but are not: each once said "no divergence", exit code 0.
# bats test_tags=claim:14-report-gap
@test "14 flight-report refuses a ring with a call missing: one line naming it, exit code 2" {
    g=$BATS_TEST_TMPDIR/gap
    cp -r "$FL/clean" "$g"
    sed -i '/^25 25 /d' "$g/flight.job7.rank1"  # a call taken out of the middle
    run --separate-stderr "$TOOLS/flight-report" "$g"
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == *"flight.job7.rank1:"*"a call is missing"* ]] || fail "$stderr"
    # the calls renumbered around it: a receive's number skips one
    rm -rf "$g"
    cp -r "$FL/pipeline_fewer" "$g"
    sed -i 's/^2 1 recv 0 1/2 2 recv 0 1/' "$g/flight.job7.rank1"
    run --separate-stderr "$TOOLS/flight-report" "$g"
    assert_equal "$status" 2
    [[ "$stderr" == *"flight.job7.rank1: a call is missing: call #2 is recv #2, after #0"* ]] || fail "$stderr"
    # the oldest calls gone: fewer than the ring's slots where its header says more calls
    rm -rf "$g"
    cp -r "$FL/clean" "$g"
    sed -i '/^2[2-5] /d' "$g/flight.job7.rank2"
    run --separate-stderr "$TOOLS/flight-report" "$g"
    assert_equal "$status" 2
    [[ "$stderr" == *"flight.job7.rank2: it holds 4 calls, where its header says 30 calls and 8 slots"* ]] || fail "$stderr"
}

# bats test_tags=claim:14-report-world
@test "14 flight-report reads every ring of the run: one whose header says another world is refused, one line, exit code 2" {
    w=$BATS_TEST_TMPDIR/world
    cp -r "$FL/clean" "$w"
    sed -i 's/^rank 0 world 3 /rank 0 world 1 /' "$w/flight.job7.rank0"
    run --separate-stderr "$TOOLS/flight-report" "$w"
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == *"flight.job7.rank1: a ring of 3 ranks, where rank 0's says 1" ]] || fail "$stderr"
    # rank 0 left none (killed): the others still agree with each other on the world
    rm "$w/flight.job7.rank0"
    sed -i 's/^rank 2 world 3 /rank 2 world 4 /' "$w/flight.job7.rank2"
    run --separate-stderr "$TOOLS/flight-report" "$w"
    assert_equal "$status" 2
    [[ "$stderr" == *"flight.job7.rank2: a ring of 4 ranks, where rank 1's says 3" ]] || fail "$stderr"
}

# bats test_tags=claim:14-report-lengths
@test "14 flight-report: a ring of 8 calls against rings of 30, every call completed, is a divergence (exit code 4)" {
    l=$BATS_TEST_TMPDIR/len
    cp -r "$FL/clean" "$l"
    awk 'NR == 2 { sub(/calls 30/, "calls 8") } NR > 4 { $1 -= 22; $2 -= 22 } { print }' "$FL/clean/flight.job7.rank2" \
        >"$l/flight.job7.rank2"
    run --separate-stderr "$TOOLS/flight-report" "$l"
    assert_equal "$status" 4
    assert_equal "$output" "rank 2 stopped at all-reduce #7 (batch 9, bucket 2, 65.0 KiB) where rank 0 went on to all-reduce #29 (batch 9, bucket 2, 65.0 KiB), and no call waits: the ranks issued different calls"
}

# bats test_tags=claim:14-checksum,claim:14-manifest-match
@test "14 checkpoint-report: the newest complete checkpoint; torn, corrupt and unfinished ones passed over for the one before" {
    cr=$TOOLS/checkpoint-report
    run "$cr" "$CK"
    assert_success
    assert_equal "${lines[0]}" "ckpt-00000019: complete: batch 19, 2 ranks, shape 4,8,2"
    assert_equal "${lines[2]}" "resume: at batch 20 from ckpt-00000019"
    copy() { rm -rf "$BATS_TEST_TMPDIR/c"; cp -r "$CK" "$BATS_TEST_TMPDIR/c"; c=$BATS_TEST_TMPDIR/c; }
    # torn: a rank file cut short under its final name (what a write in place leaves)
    copy
    truncate -s 700 "$c/ckpt-00000019/rank1.bin"
    run "$cr" "$c"
    assert_success
    [[ "${lines[0]}" == "ckpt-00000019: skipped: "*"rank1.bin: torn: 700 bytes where its header says 930" ]] || fail "${lines[0]}"
    assert_equal "${lines[2]}" "resume: at batch 10 from ckpt-00000009"
    # corrupt: one byte of a weight changed (the header is 512 bytes)
    copy
    printf '\x55' | dd of="$c/ckpt-00000019/rank0.bin" bs=1 seek=600 conv=notrunc 2>/dev/null
    run "$cr" "$c"
    assert_success
    [[ "${lines[0]}" == *"rank0.bin: corrupt: its checksum is "* ]] || fail "${lines[0]}"
    assert_equal "${lines[2]}" "resume: at batch 10 from ckpt-00000009"
    # unfinished: no manifest (the ranks died before rank 0 wrote it); a manifest cut short
    copy
    rm "$c/ckpt-00000019/manifest"
    run "$cr" "$c"
    [[ "${lines[0]}" == *"no manifest: the checkpoint was never completed"* ]] || fail "${lines[0]}"
    assert_equal "${lines[2]}" "resume: at batch 10 from ckpt-00000009"
    head -n 4 "$CK/ckpt-00000009/manifest" >"$c/ckpt-00000009/manifest"
    run "$cr" "$c"
    assert_equal "$status" 1
    assert_equal "${lines[2]}" "resume: at batch 0, no complete checkpoint"
    # a rank file of another checkpoint put in its place: its checksum is not the manifest's
    copy
    cp "$CK/ckpt-00000009/rank1.bin" "$c/ckpt-00000019/rank1.bin"
    run "$cr" "$c"
    [[ "${lines[0]}" == "ckpt-00000019: skipped: "* ]] || fail "${lines[0]}"
    # a whole file of another write of checkpoint 19 (one weight changed, its own checksum right):
    # its header reads, its checksum holds, but it is not the file the manifest lists
    copy
    f=$c/ckpt-00000019/rank1.bin
    head -c -26 "$f" >"$BATS_TEST_TMPDIR/body"
    printf '\x55' | dd of="$BATS_TEST_TMPDIR/body" bs=1 seek=600 conv=notrunc 2>/dev/null
    { cat "$BATS_TEST_TMPDIR/body"; printf 'checksum %s\n' "$(fnv1a "$BATS_TEST_TMPDIR/body")"; } >"$f"
    run "$cr" "$c"
    [[ "${lines[0]}" == "ckpt-00000019: skipped: "*"rank1.bin: its size or checksum is not the manifest's" ]] || fail "${lines[0]}"
    assert_equal "${lines[2]}" "resume: at batch 10 from ckpt-00000009"
    # a temporary file left by a rank that died while writing: not read at all
    copy
    head -c 100 "$CK/ckpt-00000019/rank1.bin" >"$c/ckpt-00000019/rank1.bin.4242.tmp"
    run "$cr" "$c"
    assert_equal "${lines[0]}" "ckpt-00000019: complete: batch 19, 2 ranks, shape 4,8,2"
}

@test "14 checkpoint-report refuses a checkpoint of another rank count or shape: one line, exit code 2" {
    cr=$TOOLS/checkpoint-report
    run --separate-stderr "$cr" "$CK" --world 4
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == *"holds 2 ranks, this run has 4"* ]] || fail "got: $stderr"
    run --separate-stderr "$cr" "$CK" --shape 4,16,2
    assert_equal "$status" 2
    one_line
    run "$cr" "$CK" --world 2 --shape 4,8,2
    assert_success
    run --separate-stderr "$cr"
    assert_equal "$status" 2
    # no such folder; a --shape that is no shape: said before anything is read
    run --separate-stderr "$cr" /nonexistent-folder
    assert_equal "$status" 2
    one_line
    [[ "$stderr" == "checkpoint-report: /nonexistent-folder: no such folder"* ]] || fail "got: $stderr"
    for shape in abc 4 4, ,4 4,,2 4,0,2 4,-8,2 4,8,2x 99999999999,2; do
        run --separate-stderr "$cr" "$CK" --shape "$shape"
        [ "$status" -eq 2 ] || fail "--shape $shape: exit code $status"
        one_line
        [[ "$stderr" == *"--shape expects layer widths"*"got '$shape'" ]] || fail "--shape $shape: $stderr"
    done
}

# bats test_tags=claim:14-losses-bound
@test "14 checkpoint-report passes over a checkpoint holding more losses than batches, or a rank's header of another run" {
    cr=$TOOLS/checkpoint-report
    # the helpers first: the fixture's checksum is fnv1a's, and a checkpoint they make is complete
    head -c 904 "$CK/ckpt-00000019/rank0.bin" >"$BATS_TEST_TMPDIR/body"
    assert_equal "checksum $(fnv1a "$BATS_TEST_TMPDIR/body")" "$(tail -c 26 "$CK/ckpt-00000019/rank0.bin" | head -c 25)"
    make_ckpt "$BATS_TEST_TMPDIR/a" 5 6
    run "$cr" "$BATS_TEST_TMPDIR/a" --world 2 --shape 4,8,2
    assert_success
    assert_equal "${lines[*]}" "ckpt-00000005: complete: batch 5, 2 ranks, shape 4,8,2 resume: at batch 6 from ckpt-00000005"
    # 100 losses after batch 5: a restore would write them past the run's loss arrays
    make_ckpt "$BATS_TEST_TMPDIR/b" 5 100
    run "$cr" "$BATS_TEST_TMPDIR/b"
    assert_equal "$status" 1
    [[ "${lines[0]}" == "ckpt-00000005: skipped: "*"/rank0.bin: its header says 100 losses after batch 5, where a checkpoint holds batch + 1" ]] ||
        fail "${lines[0]}"
    # rank 1's file says another run (or rank) than the manifest
    for edit in 's/lr 0.02/lr 0.9/' 's/global-batch 64/global-batch 128/' 's/prep-work 5/prep-work 50/' \
        's/bucket-bytes 26214400/bucket-bytes 1048/' 's/seed 1/seed 7/' 's/rank 1 batch/rank 0 batch/'; do
        rm -rf "$BATS_TEST_TMPDIR/c"
        make_ckpt "$BATS_TEST_TMPDIR/c" 5 6 "$edit"
        run "$cr" "$BATS_TEST_TMPDIR/c"
        assert_equal "$status" 1
        [[ "${lines[0]}" == "ckpt-00000005: skipped: "*"/rank1.bin: not the manifest's: its header "* ]] || fail "$edit: ${lines[0]}"
    done
}

# bats test_tags=claim:14-size-first,claim:14-stream
@test "14 checkpoint-report lists every folder, streams one larger than memory, checks a header's sizes before allocating" {
    cr=$TOOLS/checkpoint-report
    c=$BATS_TEST_TMPDIR/c
    cp -r "$CK" "$c"
    (cd "$c" && mkdir ckpt-000{01000..02099})  # 1100 newer folders, unfinished
    run "$cr" "$c"
    assert_success
    assert_equal "${#lines[@]}" 1103  # a line per folder, then where to resume
    assert_equal "${lines[-1]}" "resume: at batch 20 from ckpt-00000019"
    # 64 MiB of weights, under a limit of 48 MiB on the process's memory
    local n=$((16 * 1048576)) run1="world 1 shape 4,8,2 params 16777216 seed 1 global-batch 64 rank-batch 64 lr 0.02 prep-work 5 bucket-bytes 1"
    b=$BATS_TEST_TMPDIR/big/ckpt-00000000
    mkdir -p "$b"
    printf '%-511s\n' "course-checkpoint 2 rank 0 batch 0 losses 1 $run1" >"$b/rank0.bin"
    truncate -s $((512 + n * 4 + 8)) "$b/rank0.bin"
    echo "checksum 0000000000000000" >>"$b/rank0.bin"
    big_manifest() {
        printf 'course-checkpoint-manifest 2\nbatch 0\n%s\n' "$(tr ' ' '\n' <<<"$run1" | paste -d' ' - -)" >"$b/manifest"
        manifest_line "$b/rank0.bin" 0 >>"$b/manifest"
        echo end >>"$b/manifest"
    }
    big_manifest
    run "$cr" "$BATS_TEST_TMPDIR/big"  # its checksum, as the tool sums it (fnv1a in bash would take minutes)
    sum=$(sed -n 's/.*its bytes sum to \([0-9a-f]\{16\}\)$/\1/p' <<<"${lines[0]}")
    [ -n "$sum" ] || fail "${lines[0]}"
    printf 'checksum %s' "$sum" | dd of="$b/rank0.bin" bs=1 seek=$((512 + n * 4 + 8)) conv=notrunc 2>/dev/null
    big_manifest
    run bash -c 'ulimit -v 49152 && exec "$0" "$1"' "$cr" "$BATS_TEST_TMPDIR/big"
    assert_success
    assert_equal "${lines[0]}" "ckpt-00000000: complete: batch 0, 1 rank, shape 4,8,2"
    # a header that says 2^33 weights in a file of 538 bytes: torn, said before any allocation
    s=$BATS_TEST_TMPDIR/small/ckpt-00000000
    mkdir -p "$s"
    write_rank "$s/rank0.bin" "course-checkpoint 2 rank 0 batch 0 losses 1 ${run1/params $n/params 8589934592}" 0
    printf 'course-checkpoint-manifest 2\nbatch 0\n%s\n' "$(tr ' ' '\n' <<<"${run1/params $n/params 8589934592}" | paste -d' ' - -)" \
        >"$s/manifest"
    manifest_line "$s/rank0.bin" 0 >>"$s/manifest"
    echo end >>"$s/manifest"
    run bash -c 'ulimit -v 49152 && exec "$0" "$1"' "$cr" "$BATS_TEST_TMPDIR/small"
    assert_equal "$status" 1
    [[ "${lines[0]}" == *"/rank0.bin: torn: 538 bytes where its header says 34359738914" ]] || fail "${lines[0]}"
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

# The writer thread and the main thread without a GPU: snapshot.cu, writer.cu and checkpoint.cu as they are, a
# copy landing as it is issued (the order on the device is the GPU checks' to prove), several ranks
# as threads sharing a rendezvous folder as processes would.
# bats test_tags=host-sanitizer,claim:14-busy,claim:14-writer-stop,claim:14-manifest-last
@test "14 checkpoint writer, host-only under TSan: blocking's bytes; busy waits, skips counted; manifest last; failures said" {
    need_nccl
    [ -d "$ROOT/solutions" ] || skip "the course's own snapshot.cu: not in a student's copy"
    bin=$(snapshot_host)
    for c in same busy-wait busy-skip ranks skip-one; do
        rm -rf "$BATS_TEST_TMPDIR/$c" && mkdir "$BATS_TEST_TMPDIR/$c"
        run "$ROOT/tests/timed" 120 "$bin" "$BATS_TEST_TMPDIR/$c" "$c"
        [ "$status" -eq 0 ] || fail "$c: exit code $status: $(head -n 20 <<<"$output")"
        assert_output --partial "$c: holds"
        refute_output --partial "ThreadSanitizer"
    done
    # three ranks: every checkpoint kept is whole, each rank's size and checksum in rank 0's manifest
    run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ranks/ck" --world 3
    assert_success
    assert_equal "${lines[*]}" "ckpt-00000029: complete: batch 29, 3 ranks, shape 10,90,10 ckpt-00000026: complete: batch 26, 3 ranks, shape 10,90,10 resume: at batch 30 from ckpt-00000029"
    # a full disk in the writer thread: the main thread stops the rank with the writer's message
    mkdir "$BATS_TEST_TMPDIR/full"
    run "$ROOT/tests/timed" 120 "$bin" "$BATS_TEST_TMPDIR/full" disk-full
    assert_equal "$status" 1
    assert_output --partial "rank 1 stopped: the checkpoint of batch 11 was not written: rank 1 could not write its file (No space left on device)"
    refute_output --partial "ThreadSanitizer"
    [ -z "$(find "$BATS_TEST_TMPDIR/full" -name '*.tmp')" ] || fail "left: $(find "$BATS_TEST_TMPDIR/full" -name '*.tmp')"
}

# bats test_tags=claim:14-prune
@test "14 checkpoint-report --prune removes what has no manifest or is older than the newest two that verify" {
    c=$BATS_TEST_TMPDIR/c
    for b in 4 9 14 19; do make_ckpt "$c" "$b" $((b + 1)); done
    mkdir "$c/ckpt-00000012" "$c/ckpt-00000024"  # no manifest: ranks that died; 24: an earlier attempt's
    touch "$c/ckpt-00000012/rank0.bin" "$c/ckpt-00000024/rank0.bin"
    run "$TOOLS/checkpoint-report" "$c" --prune 19
    assert_success
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000014 ckpt-00000019 ckpt-00000024"
    assert_equal "${lines[-1]}" "resume: at batch 20 from ckpt-00000019"
}

# Rank 0 prunes after every checkpoint: a manifest that does not verify now (a bad block, a file
# changed) must not cost the last checkpoint that does.
# bats test_tags=claim:14-prune-verify
@test "14 checkpoint-report --prune: newer checkpoints that do not verify cost none of the older ones that do" {
    c=$BATS_TEST_TMPDIR/c
    for b in 4 9 14 19; do make_ckpt "$c" "$b" $((b + 1)); done
    for b in 14 19; do  # one byte of a weight changed: their manifests stand, their checksums fail
        printf '\x55' | dd of="$c/$(printf 'ckpt-%08d' "$b")/rank1.bin" bs=1 seek=600 conv=notrunc 2>/dev/null
    done
    run "$TOOLS/checkpoint-report" "$c" --prune 19
    assert_success
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000004 ckpt-00000009 ckpt-00000014 ckpt-00000019"
    assert_equal "${lines[-1]}" "resume: at batch 10 from ckpt-00000009"
    # the newest does not verify, the two before it do: those two and the newest kept, no more
    rm -rf "$c"
    for b in 4 9 14 19; do make_ckpt "$c" "$b" $((b + 1)); done
    printf '\x55' | dd of="$c/ckpt-00000019/rank1.bin" bs=1 seek=600 conv=notrunc 2>/dev/null
    run "$TOOLS/checkpoint-report" "$c" --prune 19
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000009 ckpt-00000014 ckpt-00000019"
    assert_equal "${lines[-1]}" "resume: at batch 15 from ckpt-00000014"
}

# bats test_tags=claim:14-prune-link
@test "14 checkpoint-report --prune never follows a symbolic link, in the checkpoint folder or inside a checkpoint" {
    c=$BATS_TEST_TMPDIR/c o=$BATS_TEST_TMPDIR/outside
    for b in 9 14 19; do make_ckpt "$c" "$b" $((b + 1)); done
    mkdir -p "$o/folder"
    echo precious >"$o/folder/a"
    echo precious >"$o/folder/b"
    echo precious >"$o/file"
    ln -s "$o/folder" "$c/ckpt-00000004"  # a folder of someone else's, no manifest in it
    mkdir "$c/ckpt-00000002"              # an unfinished checkpoint holding a link to a file
    ln -s "$o/file" "$c/ckpt-00000002/rank0.bin"
    run "$TOOLS/checkpoint-report" "$c" --prune 19
    assert_success
    assert_equal "$(cat "$o/folder/a" "$o/folder/b" "$o/file" | tr '\n' ' ')" "precious precious precious "
    [ -L "$c/ckpt-00000004" ] || fail "the link itself was removed or replaced"
    [ ! -e "$c/ckpt-00000002" ] || fail "the unfinished folder was kept: $(ls -l "$c/ckpt-00000002")"
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000004 ckpt-00000014 ckpt-00000019"
}

# bats test_tags=claim:14-launch-restart,claim:14-attempt-id,claim:14-restart-usage
@test "14 tools/launch --restarts: every rank started again after a failure, a run id and LAUNCH_ATTEMPT each, rings kept" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
echo "$RANK $LAUNCH_ATTEMPT $RUN_ID" >>"$OUT/log"
case "${MODE:-}" in
once) [ "$LAUNCH_ATTEMPT" = 0 ] && [ "$RANK" = 1 ] && { echo ring >"$RENDEZVOUS_DIR/flight.$RUN_ID.rank1"; exit 7; } ;;
always) [ "$RANK" = 1 ] && exit 5 ;;
usage) exit 2 ;;
esac
exit 0
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    # fails once, restarted once: success, two attempts of both ranks
    run --separate-stderr env MODE=once "$LAUNCH" -n 2 --restarts 2 "$BATS_TEST_TMPDIR/rank"
    assert_success
    [[ "$stderr" == *"launch: a rank failed (exit code 7): restarting every rank, attempt 2 of 3"* ]] || fail "$stderr"
    assert_equal "$(wc -l <"$OUT/log")" 4
    assert_equal "$(awk '$2 == 1' "$OUT/log" | wc -l)" 2
    first=$(awk '$2 == 0 { print $3; exit }' "$OUT/log")
    assert_equal "$(awk '$2 == 1 { print $3; exit }' "$OUT/log")" "$first.a1"
    # the launcher's own folder held a ring of the failed attempt: kept, and said
    [[ "$stderr" != *"rings are kept"* ]] || fail "kept though the run succeeded: $stderr"
    # fails every time: R + 1 attempts, the last exit code
    : >"$OUT/log"
    run --separate-stderr env MODE=always "$LAUNCH" -n 2 --restarts 2 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 5
    assert_equal "$(wc -l <"$OUT/log")" 6
    # bad usage is not restarted
    : >"$OUT/log"
    run --separate-stderr env MODE=usage "$LAUNCH" -n 2 --restarts 2 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 2
    assert_equal "$(wc -l <"$OUT/log")" 2
    # no restarts: the first failure ends it, and the rings of the launcher's folder are kept
    run --separate-stderr env MODE=once "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 7
    [[ "$stderr" == *"rings are kept in "*": build/tools/flight-report "* ]] || fail "$stderr"
    kept=$(sed -n 's/.*rings are kept in \(.*\): build\/tools.*/\1/p' <<<"$stderr")
    [ -f "$(echo "$kept"/flight.*.rank1)" ] || fail "no ring in $kept"
    rm -rf "$kept"
    # bad usage of launch itself
    for args in "-n 2 --restarts x" "-n 2 --restarts -1" "-n 2 --nodes 2 --node-rank 0 --rendezvous $BATS_TEST_TMPDIR --run-id a --restarts 1"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$LAUNCH" $args "$BATS_TEST_TMPDIR/rank"
        [ "$status" -eq 2 ] || fail "launch $args: exit code $status"
        one_line
    done
}

# alive PID: the process runs (a zombie, dead but not yet reaped, does not)
alive() {
    [ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
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

# Without job control a script's & jobs start with SIGINT and SIGQUIT ignored, and a process keeps
# that through exec.
# bats test_tags=claim:14-launch-signals
@test "14 tools/launch: every rank starts with SIGINT and SIGQUIT at their defaults, even when the launcher did not" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
awk '/^SigIgn:/ { print $2 }' /proc/self/status >"$OUT/ignored$RANK"
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    check_defaults() {
        for r in 0 1; do
            mask=$((16#$(cat "$OUT/ignored$r")))
            [ $((mask & 6)) -eq 0 ] || fail "$1: rank $r starts with signals ignored (mask $(cat "$OUT/ignored$r"): 2 INT, 4 QUIT)"
        done
    }
    run "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank"
    assert_success
    check_defaults "launched from here"
    # the launcher itself started as a script's & job, INT and QUIT ignored: its ranks not
    if env --default-signal=INT true 2>/dev/null; then
        rm -f "$OUT"/ignored*
        run bash -c '"$0" -n 2 "$1" & wait $!' "$LAUNCH" "$BATS_TEST_TMPDIR/rank"
        assert_success
        check_defaults "launched as a & job"
    fi
}

# bats test_tags=claim:14-launch-groups,claim:14-launch-stop
@test "14 tools/launch stops what a rank started too: a wrapper's child that ignores TERM, on a signal or a failed rank" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
# a wrapper: its child ignores TERM (only KILL stops it); rank 1 fails once its child runs
bash -c 'trap "" TERM; echo $$ >"$OUT/child$RANK"; exec sleep 300' &
for ((k = 0; k < 100; k++)); do [ -s "$OUT/child$RANK" ] && break; sleep 0.05; done
[ "${MODE:-}" = fail ] && [ "$RANK" = 1 ] && exit 5
wait
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    gone() {
        for r in 0 1; do
            pid=$(cat "$OUT/child$r")
            if alive "$pid"; then
                kill -KILL "$pid"
                fail "$1: rank $r's child (pid $pid) still running after launch returned"
            fi
        done
    }
    "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank" 2>"$OUT/err" &
    lp=$!
    for ((k = 0; k < 100; k++)); do [ -s "$OUT/child0" ] && [ -s "$OUT/child1" ] && break; sleep 0.1; done
    kill -TERM "$lp"
    st=0
    wait "$lp" || st=$?
    assert_equal "$st" 143
    gone "SIGTERM"
    rm -f "$OUT"/child*
    run --separate-stderr env MODE=fail "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 --grace-s 0 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 5
    gone "rank 1 failed"
}

# bats test_tags=claim:14-launch-tmpdir
@test "14 tools/launch keeps the rings of a failed run in the folder it made, whatever TMPDIR's name holds ([1], *, a space)" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
echo ring >"$RENDEZVOUS_DIR/flight.$RUN_ID.rank$RANK"
exit 7
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    for name in 'a[1]b' 'a[b' 'a*b' 'a b'; do
        tmp=$BATS_TEST_TMPDIR/$name
        mkdir -p "$tmp"
        run --separate-stderr env TMPDIR="$tmp" "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank"
        assert_equal "$status" 7
        [[ "$stderr" == *"rings are kept in $tmp/launch."* ]] || fail "TMPDIR=$tmp: $stderr"
        [ -n "$(find "$tmp" -name 'flight.*.rank1')" ] || fail "TMPDIR=$tmp: no ring left: $(find "$tmp")"
    done
}

# bats test_tags=claim:14-launch-values
@test "14 tools/launch refuses an option given without its value, one line naming it, exit code 2" {
    printf '#!/bin/sh\nexit 0\n' >"$BATS_TEST_TMPDIR/rank"
    chmod +x "$BATS_TEST_TMPDIR/rank"
    r=$BATS_TEST_TMPDIR/rank
    while IFS='|' read -r args option; do
        # shellcheck disable=SC2086
        run --separate-stderr "$LAUNCH" $args
        [ "$status" -eq 2 ] || fail "launch $args: exit code $status, expected 2"
        one_line
        [[ "$stderr" == "launch: $option needs a value"* ]] || fail "launch $args: $stderr"
    done <<EOF
-n|-n
-n 2 --run-id --simulate-nodes $r|--run-id
-n 2 --rendezvous --simulate-nodes $r|--rendezvous
--nproc -n 2 $r|--nproc
-n 2 --restarts --grace-s 1 $r|--restarts
-n 2 --grace-s|--grace-s
-n 2 --nodes --node-rank 0 $r|--nodes
-n 2 --node-rank|--node-rank
EOF
}

# ----------------------------------------------------------------------------
# two ranks: two GPUs, or simulated nodes on one

# bats test_tags=ranks,gpu,ex:14-ring,ex:14-atomic,claim:14-ring-end,claim:14-prune-run
@test "14 two ranks: checkpoints every 5 batches, complete, the last two kept; every rank's ring written, agreeing" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    # the all-gather of where to resume, a fingerprint check before batches 0, 10 and 20 (its
    # default), 30 batches x 3 buckets, the losses' all-reduce, the checksums' all-gather; blocking:
    # an all-gather per checkpoint too (a snapshot's writers tell rank 0 through the rendezvous folder)
    for mode in snapshot blocking; do
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
        mkdir "$BATS_TEST_TMPDIR/ck"
        launch14 2 a -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 --checkpoint-mode $mode
        [ "$status" -eq 0 ] || fail "$mode: exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/a.txt")"
        f=$BATS_TEST_TMPDIR/a.json
        assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
        # after batches 4, 9, 14, 19, 24
        assert_equal "$(json_get "$f" checkpoint_mode) $(json_get "$f" checkpoints_due) $(json_get "$f" checkpoints_written)" \
            "$mode 5 5"
        assert_equal "$(json_get "$f" start_batch) $(json_get "$f" resumed_from)" "0 -1"
        calls=96
        [ $mode = blocking ] && calls=101
        assert_equal "$(json_get "$f" flight_calls)" $calls
        run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ck" --world 2 --shape 64,256,256,256,8
        assert_success
        assert_equal "${lines[*]}" "ckpt-00000024: complete: batch 24, 2 ranks, shape 64,256,256,256,8 ckpt-00000019: complete: batch 19, 2 ranks, shape 64,256,256,256,8 resume: at batch 25 from ckpt-00000024"
        [ -z "$(find "$BATS_TEST_TMPDIR/ck" -name '*.tmp')" ] || fail "$mode: temporary files left: $(find "$BATS_TEST_TMPDIR/ck")"
        # the writers' words are gone once rank 0 has read them
        [ -z "$(find "$BATS_TEST_TMPDIR/rv" -name 'checkpoint.*')" ] || fail "$mode: words left: $(ls "$BATS_TEST_TMPDIR/rv")"
        run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv" --ranks
        assert_success
        assert_equal "${lines[0]}" "rank 0: $calls calls, the last $calls in its ring; stopped: - (the run ended)"
        [[ "${lines[2]}" == "no divergence: the 2 ranks' rings agree, every call completed (rank 0: $calls calls, the last all-gather #$((calls - 1)) "* ]] ||
            fail "$mode: ${lines[2]}"
    done
}

# bats test_tags=ranks,gpu,ex:14-atomic,ex:14-resume
@test "14 two ranks: a run started again on its own finished checkpoints resumes after the last one, with the same bits" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    mkdir "$BATS_TEST_TMPDIR/ck"
    launch14 2 a -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5
    assert_success
    launch14 2 b -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5
    assert_success
    f=$BATS_TEST_TMPDIR/b.json
    assert_equal "$(json_get "$f" resumed_from) $(json_get "$f" start_batch)" "24 25"
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
    assert_same_bits a b
    # and without checkpoints at all: the same bits again
    launch14 2 c -- $S14
    assert_success
    assert_same_bits a c
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

# Each rank its own --checkpoint-dir (a node-local folder under srun or mpirun), rank 1's without
# the newest checkpoint: what a rank whose manifest read fails sees too.
# bats test_tags=ranks,gpu,claim:14-agree
@test "14 ranks that find different checkpoints resume from the newest all hold; none in common: every rank stops, saying why" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    launch14 2 clean -- $S14
    assert_success
    mkdir "$BATS_TEST_TMPDIR/ck0"
    launch14 2 a -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck0" --checkpoint-every 5
    assert_success
    cp -r "$BATS_TEST_TMPDIR/ck0" "$BATS_TEST_TMPDIR/ck1"
    rm -r "$BATS_TEST_TMPDIR/ck1/ckpt-00000024"
    cat >"$BATS_TEST_TMPDIR/each" <<'EOF'
#!/usr/bin/env bash
exec "$PROG" "$@" --checkpoint-dir "$CK_ROOT$RANK"
EOF
    chmod +x "$BATS_TEST_TMPDIR/each"
    export PROG=$BIN/$P CK_ROOT=$BATS_TEST_TMPDIR/ck
    PROGRAM14=$BATS_TEST_TMPDIR/each launch14 2 b -- $S14 --checkpoint-every 5
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/b.txt")"
    f=$BATS_TEST_TMPDIR/b.json
    assert_equal "$(json_get "$f" resumed_from) $(json_get "$f" start_batch)" "19 20"
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
    assert_same_bits clean b
    grep -q "^$P rank 0: every rank resumes from the checkpoint of batch 19, the newest they all hold complete (the newest each holds: rank 0: batch 24, rank 1: batch 19)" \
        "$BATS_TEST_TMPDIR/b.txt" || fail "$(cat "$BATS_TEST_TMPDIR/b.txt")"
    # rank 1 holds none: no checkpoint every rank holds
    rm -r "$BATS_TEST_TMPDIR/ck1"/ckpt-*
    SECONDS=0
    PROGRAM14=$BATS_TEST_TMPDIR/each launch14 2 c --grace-s 60 -- $S14 --checkpoint-every 5 --timeout-s 30
    assert_equal "$status" 1
    assert_num "$SECONDS" "<" 20 "seconds until every rank had stopped (the time limit is 30 s)"
    for r in 0 1; do
        grep -q "^$P rank $r: .*the ranks hold no complete checkpoint in common under --checkpoint-dir .* (the newest each holds: rank 0: batch 24, rank 1: none)" \
            "$BATS_TEST_TMPDIR/c.txt" || fail "rank $r: $(cat "$BATS_TEST_TMPDIR/c.txt")"
    done
}

# A kill waits until every checkpoint begun before it is complete (in snapshot mode the writer may
# still be at it): the resume point is the same however fast the disk.
# bats test_tags=ranks,gpu,ex:14-ring,ex:14-atomic,ex:14-resume,claim:14-fault-once
@test "14 a rank killed at batch 13 and every rank restarted: the bits of a run that never failed, at most 5 batches redone" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    launch14 2 clean -- $S14
    assert_success
    for mode in snapshot blocking; do
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
        mkdir "$BATS_TEST_TMPDIR/ck"
        launch14 2 r --restarts 1 --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
            --checkpoint-mode $mode --fault kill --fault-rank 1 --fault-at-batch 13 --timeout-s 10
        [ "$status" -eq 0 ] || fail "$mode: exit code $status: $(tail -n 8 "$BATS_TEST_TMPDIR/r.txt")"
        grep -q "launch: a rank failed .*restarting every rank, attempt 2 of 2" "$BATS_TEST_TMPDIR/r.txt" ||
            fail "$mode: no restart: $(cat "$BATS_TEST_TMPDIR/r.txt")"
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" attempt) $(json_get "$f" resumed_from) $(json_get "$f" start_batch)" "1 9 10"
        # the restart trained batches 10 to 29 and nothing else: the all-gather of where to resume,
        # the fingerprint checks before 10 and 20, 20 x 3 all-reduces, the losses' all-reduce and the
        # checksums' all-gather; blocking: the all-gathers of the checkpoints after 14, 19 and 24 too
        calls=65
        [ $mode = blocking ] && calls=68
        assert_equal "$(json_get "$f" flight_calls) $(json_get "$f" checkpoints_written)" "$calls 3"
        assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
        assert_same_bits clean r
        # the failed attempt's rings are there too: rank 1 left none, rank 0 waited in its all-reduce
        run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv" --run t
        assert_equal "$status" 4
        [[ "$output" == "rank 1 left no ring"*"rank 0 waits in all-reduce #"*"(batch 13, bucket 0, "* ]] || fail "$mode: $output"
    done
}

# In snapshot mode the torn write and the full disk strike in rank 1's writer thread: the first kills
# the process from there, the second is said by the main thread (a thread other than main never exits).
# bats test_tags=ranks,gpu,ex:14-atomic,ex:14-resume,claim:14-writer-stop
@test "14 a checkpoint torn half way, or a full disk: the one before it used, no temporary file left, the same bits" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    launch14 2 clean -- $S14
    assert_success
    for run in "torn snapshot" "disk-full snapshot" "torn blocking" "disk-full blocking"; do
        read -r fault mode <<<"$run"
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
        mkdir "$BATS_TEST_TMPDIR/ck"
        launch14 2 r --restarts 1 --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
            --checkpoint-mode $mode --fault $fault --fault-rank 1 --fault-at-batch 14 --timeout-s 10
        [ "$status" -eq 0 ] || fail "--fault $fault, $mode: exit code $status: $(tail -n 8 "$BATS_TEST_TMPDIR/r.txt")"
        t=$BATS_TEST_TMPDIR/r.txt
        if [ $fault = torn ]; then
            grep -q "$P rank 1: killed half way through its checkpoint of batch 14" "$t" || fail "$(cat "$t")"
        else
            for r in 0 1; do
                # its own line, or the note of the rank that said it first
                grep -q "^$P rank $r: .*the checkpoint of batch 14 was not written: rank 1 could not write its file (No space left on device)" "$t" ||
                    fail "rank $r: $(cat "$t")"
            done
        fi
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" attempt) $(json_get "$f" resumed_from) $(json_get "$f" start_batch)" "1 9 10"
        assert_same_bits clean r
        if [ $fault = disk-full ]; then  # the write that failed removed its temporary file
            [ -z "$(find "$BATS_TEST_TMPDIR/ck" -name '*.tmp')" ] || fail "left: $(find "$BATS_TEST_TMPDIR/ck" -name '*.tmp')"
        fi
        run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ck"
        assert_success
        assert_equal "${lines[-1]}" "resume: at batch 25 from ckpt-00000024"
    done
}

# The restarts above write the torn checkpoint again: here nothing does, so a write made in
# place under the file's own name (not atomic) is seen.
# bats test_tags=ranks,gpu,ex:14-atomic,claim:14-allgather-recorded
@test "14 a rank killed half way through its checkpoint, no restart: no half file under its name, the checkpoint before it used" {
    need_nccl_gpu
    for mode in blocking snapshot; do
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
        mkdir "$BATS_TEST_TMPDIR/ck"
        launch14 2 r --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
            --checkpoint-mode $mode --fault torn --fault-rank 1 --fault-at-batch 14 --timeout-s 10
        [ "$status" -ne 0 ] || fail "$mode: the run passed"
        grep -q "$P rank 1: killed half way through its checkpoint of batch 14" "$BATS_TEST_TMPDIR/r.txt" ||
            fail "$mode: $(cat "$BATS_TEST_TMPDIR/r.txt")"
        [ ! -e "$BATS_TEST_TMPDIR/ck/ckpt-00000014/rank1.bin" ] ||
            fail "$mode: rank 1's half-written file stands under its own name: the write was not atomic"
        run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ck"
        assert_equal "${lines[-1]}" "resume: at batch 10 from ckpt-00000009"
        run "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/rv"
        assert_equal "$status" 4
        if [ $mode = blocking ]; then  # rank 0 waited in the checkpoint's all-gather, in its ring before the wait
            [[ "$output" == "rank 1 left no ring"*"; rank 0 waits in all-gather #"*"(batch 14, "*"), never completed" ]] ||
                fail "$output"
        else  # rank 1's writer died behind its training: rank 0 waits in a later batch's all-reduce
            [[ "$output" == "rank 1 left no ring"*"; rank 0 waits in all-reduce #"*", never completed" ]] || fail "$output"
        fi
    done
}

# The writer stops half way through rank 1's file of the checkpoint after batch 14 (the snapshot
# copied before batch 15's update); rank 1 trains batches 15 and 16 meanwhile and is killed in
# batch 16's first all-reduce, its writer still in the file.
# bats test_tags=ranks,gpu,ex:14-atomic,ex:14-resume,claim:14-writer-behind
@test "14 a rank killed while its writer is half way through a checkpoint: that one passed over, the same bits after restart" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    launch14 2 clean -- $S14
    assert_success
    mkdir "$BATS_TEST_TMPDIR/ck"
    launch14 2 x --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
        --fault kill-writing --fault-rank 1 --fault-at-batch 14 --timeout-s 10
    [ "$status" -ne 0 ] || fail "the run passed"
    t=$BATS_TEST_TMPDIR/x.txt
    grep -q "$P rank 1: its checkpoint writer stops half way through the checkpoint of batch 14" "$t" || fail "$(cat "$t")"
    grep -q "$P rank 1: killed inside all-reduce #[0-9]* at batch 16 as asked (--fault kill-writing" "$t" || fail "$(cat "$t")"
    [ ! -e "$BATS_TEST_TMPDIR/ck/ckpt-00000014/rank1.bin" ] || fail "rank 1's half-written file stands under its own name"
    [ -n "$(find "$BATS_TEST_TMPDIR/ck/ckpt-00000014" -name 'rank1.bin.*.tmp' -size +0)" ] ||
        fail "no half-written temporary file: the writer was not in the file: $(ls -l "$BATS_TEST_TMPDIR/ck/ckpt-00000014")"
    run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ck"
    assert_equal "${lines[-1]}" "resume: at batch 10 from ckpt-00000009"
    # the same, restarted: every rank resumes from the checkpoint before, and ends with the clean run's bits
    rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
    mkdir "$BATS_TEST_TMPDIR/ck"
    launch14 2 r --restarts 1 --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
        --fault kill-writing --fault-rank 1 --fault-at-batch 14 --timeout-s 10
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 8 "$BATS_TEST_TMPDIR/r.txt")"
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" attempt) $(json_get "$f" resumed_from) $(json_get "$f" start_batch)" "1 9 10"
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" losses_once)" "true true"
    assert_same_bits clean r
}

# The manifest comes last, once every rank's file is written: rank 0 killed half way through its
# own file leaves a checkpoint without one (passed over), never a manifest naming a file not there.
# bats test_tags=ranks,gpu,claim:14-manifest-last
@test "14 rank 0 killed half way through its own checkpoint file: no manifest of that checkpoint, the one before it in use" {
    need_nccl_gpu
    for mode in snapshot blocking; do
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/rv"
        mkdir "$BATS_TEST_TMPDIR/ck"
        launch14 2 r --grace-s 60 -- $S14 --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-every 5 \
            --checkpoint-mode $mode --fault torn --fault-rank 0 --fault-at-batch 14 --timeout-s 10
        [ "$status" -ne 0 ] || fail "$mode: the run passed"
        grep -q "$P rank 0: killed half way through its checkpoint of batch 14" "$BATS_TEST_TMPDIR/r.txt" ||
            fail "$mode: $(cat "$BATS_TEST_TMPDIR/r.txt")"
        [ ! -e "$BATS_TEST_TMPDIR/ck/ckpt-00000014/manifest" ] ||
            fail "$mode: a manifest of checkpoint 14: $(ls "$BATS_TEST_TMPDIR/ck/ckpt-00000014")"
        run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/ck"
        [[ "${lines[0]}" == "ckpt-00000014: skipped: "*"no manifest: the checkpoint was never completed)" ]] ||
            fail "$mode: ${lines[0]}"
        assert_equal "${lines[-1]}" "resume: at batch 10 from ckpt-00000009"
    done
}

# A rename is atomic, but only what reached the disk survives a power cut: the file's bytes
# before its rename, the folder's entry after. Seen without strace: tests/fsync-log.c logs every
# fsync and rename of the ranks, in order.
# bats test_tags=ranks,gpu,ex:14-atomic,claim:14-manifest-last
@test "14 every checkpoint file is flushed to the disk before its rename, its folder after (fsync, logged by a shim)" {
    need_nccl_gpu
    shim=$(fsync_shim)
    for mode in snapshot blocking; do
        rm -rf "$BATS_TEST_TMPDIR/ck" "$BATS_TEST_TMPDIR/fsync.log"
        mkdir "$BATS_TEST_TMPDIR/ck"
        ck=$(cd "$BATS_TEST_TMPDIR/ck" && pwd -P)  # the log names what the kernel names
        export FSYNC_LOG=$BATS_TEST_TMPDIR/fsync.log LD_PRELOAD=$shim
        launch14 2 a -- $S14 --checkpoint-dir "$ck" --checkpoint-every 5 --checkpoint-mode $mode
        unset LD_PRELOAD
        [ "$status" -eq 0 ] || fail "$mode: exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/a.txt")"
        run awk -v ck="$ck/" '
            $2 == "fsync" || $2 == "fdatasync" { synced[$1 " " $3] = 1; delete waiting[$1 " " $3] }
            $2 == "rename" && index($4, ck) == 1 {
                renames++
                if (!(($1 " " $3) in synced)) { print "not flushed before its rename: " $3; bad = 1 }
                dir = $4; sub(/\/[^\/]*$/, "", dir); waiting[$1 " " dir] = $4
                if ($4 ~ /\/rank[0-9]+\.bin$/) ranks[dir]++
                if ($4 ~ /\/manifest$/ && ranks[dir] != 2) { print "the manifest renamed after " ranks[dir] + 0 " of 2 rank files: " $4; bad = 1 }
            }
            END {
                for (k in waiting) { print "its folder not flushed after the rename: " waiting[k]; bad = 1 }
                print renames + 0 " renames"; exit bad
            }' "$FSYNC_LOG"
        assert_success
        assert_output "15 renames"  # 5 checkpoints x (2 rank files + the manifest)
    done
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
# the snapshot: one copy beside the training, written behind it

# snap14 NAME MODE [ARGS...]: one rank of $S14 with a checkpoint every 5 batches into
# $BATS_TEST_TMPDIR/NAME (after batches 4 to 24: the last two kept), no fingerprint check (the host
# runs as far ahead of the GPU as it can), in checkpoint mode MODE; the JSON into NAME.json, the
# report into NAME.txt.
snap14() {
    local name=$1 mode=$2
    shift 2
    rm -rf "${BATS_TEST_TMPDIR:?}/$name" && mkdir "$BATS_TEST_TMPDIR/$name"
    # shellcheck disable=SC2086
    run --separate-stderr prog "$P" $S14 --fingerprint-every 0 --checkpoint-dir "$BATS_TEST_TMPDIR/$name" \
        --checkpoint-every 5 --checkpoint-mode "$mode" "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    printf '%s\n' "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
}

# assert_same_checkpoints A B: checkpoint folders A and B hold the same files, byte for byte
assert_same_checkpoints() {
    local a=$BATS_TEST_TMPDIR/$1 b=$BATS_TEST_TMPDIR/$2
    [ -n "$(ls "$a")" ] || fail "$1: no checkpoint"
    run diff -r "$a" "$b"
    [ "$status" -eq 0 ] || fail "the checkpoints of $2 are not those of $1: $output"
}

# The copy waits for the update's event: held back behind its copies (the spin before each), the
# training's update of batch i comes late, and a copy that does not wait for it reads the weights
# before it.
# bats test_tags=gpu,ex:14-snapshot
@test "14 snapshot, training held back behind its copies (--delay-on copy): the checkpoints hold the blocking ones' bytes" {
    need_nccl_gpu
    snap14 blocking blocking
    assert_success
    snap14 snap snapshot --delay-us "$DELAY_US" --delay-on copy
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/snap.txt")"
    assert_same_checkpoints blocking snap
    assert_same_bits blocking snap
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/snap.json" checkpoints_written)" 5
}

# The next update waits for the copy's event: the copies held back (the test delays) until the next
# step's backward pass is done and a spin more, an update that does not wait for them overwrites
# the weights first.
# bats test_tags=gpu,ex:14-snapshot
@test "14 snapshot, its copies held back past the next step's backward pass (--delay-on compute): the blocking ones' bytes" {
    need_nccl_gpu
    snap14 blocking blocking
    assert_success
    snap14 snap snapshot --delay-us "$DELAY_US" --delay-on compute
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/snap.txt")"
    assert_same_checkpoints blocking snap
    assert_same_bits blocking snap
}

# bats test_tags=gpu
@test "14 snapshot and blocking checkpoints: the same files, the same bits; the report says what each cost" {
    need_nccl_gpu
    snap14 blocking blocking
    assert_success
    snap14 snap snapshot
    assert_success
    assert_same_checkpoints blocking snap
    assert_same_bits blocking snap
    for name in blocking snap; do
        f=$BATS_TEST_TMPDIR/$name.json
        assert_equal "$(json_get "$f" checkpoints_due) $(json_get "$f" checkpoints_written)" "5 5"
        assert_num "$(json_get "$f" d2h_pinned_gbs)" ">" 0 "$name: the pinned rate, measured"
        assert_num "$(json_get "$f" checkpoint_write_mbs)" ">" 0 "$name: the writer's rate"
        grep -q "^checkpoint stall: .* ms each .*, against .* ms for the weights' copy alone at .* GB/s pinned" \
            "$BATS_TEST_TMPDIR/$name.txt" || fail "$name: $(cat "$BATS_TEST_TMPDIR/$name.txt")"
    done
    # how many come due while the one before is in flight is the host's lead over the GPU and the
    # disk's speed (4 of 5 on an H200, 2026-11-27): counted, each one waited for, never asserted
    grep -qE "^checkpoints \(snapshot\): 5 due, 5 written, .*; ([0-9]) came due while one was being written: \1 waited for the writer \(.* ms\), 0 skipped" \
        "$BATS_TEST_TMPDIR/snap.txt" || fail "$(cat "$BATS_TEST_TMPDIR/snap.txt")"
    assert_num "$(json_get "$BATS_TEST_TMPDIR/snap.json" checkpoint_copy_ms)" ">" 0 "the snapshot's copy, timed"
}

# A writer that sleeps 100 ms before each file (a test delay) is still busy when the next checkpoint,
# one batch later, comes due: the main thread waits for it every time, or skips those.
# bats test_tags=gpu,claim:14-busy
@test "14 one checkpoint in flight: one due while another is written waits for the writer or is skipped, each counted" {
    need_nccl_gpu
    b="--batches 12 --checkpoint-every 1"
    # shellcheck disable=SC2086
    snap14 blocking blocking $b
    assert_success
    # shellcheck disable=SC2086
    snap14 wait snapshot $b --write-delay-ms 100
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/wait.txt")"
    f=$BATS_TEST_TMPDIR/wait.json
    # after batches 0 to 10: each after the first finds the one before in the writer's hands
    assert_equal "$(json_get "$f" checkpoints_due) $(json_get "$f" checkpoints_written)" "11 11"
    assert_equal "$(json_get "$f" checkpoint_busy_waits) $(json_get "$f" checkpoint_busy_skips)" "10 0"
    assert_same_checkpoints blocking wait
    assert_same_bits blocking wait
    grep -q "^checkpoints (snapshot): 11 due, 11 written, .*; 10 came due while one was being written: 10 waited for the writer" \
        "$BATS_TEST_TMPDIR/wait.txt" || fail "$(cat "$BATS_TEST_TMPDIR/wait.txt")"
    # shellcheck disable=SC2086
    snap14 skip snapshot $b --write-delay-ms 100 --checkpoint-busy skip
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 "$BATS_TEST_TMPDIR/skip.txt")"
    f=$BATS_TEST_TMPDIR/skip.json
    due=$(json_get "$f" checkpoints_due) written=$(json_get "$f" checkpoints_written) skips=$(json_get "$f" checkpoint_busy_skips)
    assert_equal "$due $(json_get "$f" checkpoint_busy_waits)" "11 0"
    assert_num "$skips" ">=" 1 "checkpoints skipped"
    assert_num "$written" ">=" 1 "checkpoints written"
    assert_equal "$((written + skips))" "$due"
    assert_same_bits blocking skip
    run "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/skip"
    assert_success  # what was written is whole
}

# The trace of a GPU-bound run: the snapshot's copies on a stream of their own, kernels of the
# compute stream starting while they run (a count, not a time); blocking: no such stream.
# bats test_tags=gpu,claim:14-snapshot-stream
@test "14 the trace of a snapshot run draws its copies on a stream of their own, the compute kernels running beside them" {
    need_nccl_gpu
    need_overlap
    heavy="--batches 20 --batch 512 --hidden 2048 --layers 4 --prep-work 0 --checkpoint-every 5 --fingerprint-every 0"
    for mode in snapshot blocking; do
        rm -rf "$BATS_TEST_TMPDIR/ck" && mkdir "$BATS_TEST_TMPDIR/ck"
        # shellcheck disable=SC2086
        run --separate-stderr prog "$P" $heavy --checkpoint-dir "$BATS_TEST_TMPDIR/ck" --checkpoint-mode $mode \
            --trace "$BATS_TEST_TMPDIR/$mode.json"
        [ "$status" -eq 0 ] || fail "$mode: exit code $status: $stderr"
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/$mode.json" --check
        assert_success
        "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/$mode.json" --window run >"$BATS_TEST_TMPDIR/$mode.txt"
        assert_equal "$(kv_get "$BATS_TEST_TMPDIR/$mode.txt" dropped)" 0
    done
    tracks=$(kv_get "$BATS_TEST_TMPDIR/snapshot.txt" tracks)
    [[ ",$tracks," == *",snapshot,"* ]] || fail "no track named snapshot: $tracks"
    [[ ",$(kv_get "$BATS_TEST_TMPDIR/blocking.txt" tracks)," != *",snapshot,"* ]] || fail "blocking has a snapshot track"
    snap=$(trace_kernels "$BATS_TEST_TMPDIR/snapshot.json" run snapshot)
    compute=$(trace_kernels "$BATS_TEST_TMPDIR/snapshot.json" run compute)
    # the checkpoints after batches 4, 9 and 14: each copy of the weights sees the next step's kernels start
    assert_num "$(jq length <<<"$snap")" ">=" 3 "copies on the snapshot stream"
    assert_num "$(started_during "$snap" "$compute")" ">=" 3 "snapshot copies during which a compute kernel started"
}
