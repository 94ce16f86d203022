#!/usr/bin/env bats
# Lesson 12: data-parallel training with NCCL, each bucket's all-reduce under the
# backward pass. Built only where make finds NCCL (`make -s nccl-status` says why
# not); its checks skip with that reason. The one-rank checks run on any GPU. The
# checks of two and four ranks run on as many GPUs where they are visible, else as
# simulated nodes on one (tools/launch --simulate-nodes); only the checks of speed
# wait for separate GPUs. Scored checks (ex:) run the student's step under the test
# delays: a missing wait diverges there every time. A missing all-reduce does not: the
# program's own reference sums the gradients through the same exercise, and ranks that learn
# nothing from each other stay identical. So every scored check of bits also compares with a
# program the student's code cannot change: the course's 06 on one rank (an all-reduce of one
# rank is the identity, the rate lr / 1: 06's bits), the course's own 12 on several.

load helpers

# every run of several ranks, simulated or not, pays for NCCL's start and its network:
# 16 batches a run (lessons 05-11 run 40), so that the checks fit the suite's time
NB=16
SMALL=${SMALL/--batches 40/--batches $NB}

P=12_data_parallel_overlap
EX=ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
# SMALL with three buckets: layers 4-3 | 2 | 1 (a quarter MiB closes a bucket)
SMALL12="$SMALL --bucket-mib 0.25"
# GPU-heavy, two ranks of 512 samples each: what the overlap hides shows in the step
HEAVY12="--batches 30 --batch 1024 --hidden 4096 --layers 4 --prep-work 0 --reps 3 --warmup 1"

setup_file() {
    detect_nccl "$P"
    detect_gpu
}

# rel A B: |A - B| / |B|
rel() {
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; print d / b }'
}

# The runs of a check of bits: each test delay once, the variant run first changing from one run
# to the next. Both variants run in every run, round-robin, each run checked (--overlap only names
# the one run first): every variant under every delay.
RUNS12=("--overlap buckets" "--overlap none --delay-us $DELAY_US --delay-on copy"
    "--overlap buckets --delay-us $DELAY_US --delay-on compute")

# bits_of FILE [weights_checksums]: "LOSSES WEIGHTS", the checksums of a run's --json: its losses
# (with several ranks, averaged over them) and its final weights (rank 0's, or every rank's)
bits_of() {
    echo "$(json_get "$1" loss_checksum) $(json_get "$1" "${2:-weights_checksum}")"
}

# course_06 NAME ARGS...: the course's lesson 06 on one GPU, its --json in $BATS_TEST_TMPDIR/NAME.json
course_06() {
    local name=$1
    shift
    run --separate-stderr ref 06_per_batch_sync "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    [ "$status" -eq 0 ] || fail "the course's 06 ($*) failed: $(tail -n 3 <<<"$stderr")"
}

# course_ranks N NAME ARGS...: the course's own 12 on N ranks, rank 0's --json in NAME.json
course_ranks() {
    local n=$1 name=$2
    shift 2
    BIN=$REF_BIN run_ranks "$n" "$name" "$P" "$@"
    [ "$status" -eq 0 ] || fail "the course's own 12 on $n ranks ($*) failed (exit code $status)"
}

# ----------------------------------------------------------------------------
# course health: no GPU needed

@test "12 is built exactly where make finds NCCL, and make's first line says which NCCL or why not" {
    run make -s -C "$ROOT" BUILD="$BATS_TEST_TMPDIR/b" nccl-status
    assert_success
    [[ "$output" == "NCCL "[0-9]*"): "*" built" || "$output" == "NCCL not found ("*"not built" ]] ||
        fail "unexpected: $output"
    if [ -x "$ROOT/build/solutions/$P" ] && [ "$BIN" = "$ROOT/build/solutions" ]; then
        [[ "$output" != *"not built" ]] || fail "the binary exists, yet make says: $output"
    fi
    run make -s -C "$ROOT" BUILD="$BATS_TEST_TMPDIR/b" arch
    assert_success
    assert_output --partial "NCCL"
}

# unprefixed DIR: the names lesson 12's library exports without ddp_ (DDP_): every function its
# LIBRARY files define outside `static`, every name its face (the Makefile's FACE) declares: the
# types, the enum constants, the macros and the functions. One a line, "FILE: NAME".
unprefixed() {
    local dir=$1 lib face f
    lib=$(sed -n 's/^LIBRARY\.12_data_parallel_overlap := //p' "$ROOT/Makefile")
    face=$(sed -n 's/^FACE\.12_data_parallel_overlap := //p' "$ROOT/Makefile")
    [ -n "$lib" ] && [ -n "$face" ] || { echo "Makefile: no LIBRARY or FACE of 12"; return; }
    for f in $lib; do
        grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *][A-Za-z_][A-Za-z0-9_]*\(' "$dir/$f" | grep -vE '^(static|typedef|return) ' |
            sed 's/^[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/' | sed "s|^|$f: |"
    done
    {
        # functions, then typedef names and struct tags, then macros, then enum constants
        grep -E '^[A-Za-z_][A-Za-z0-9_ *]*[ *][A-Za-z_][A-Za-z0-9_]*\(' "$dir/$face" | grep -v '^typedef' |
            sed 's/^[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/'
        sed -n 's/^} *\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p; s/^typedef struct \([A-Za-z_][A-Za-z0-9_]*\) \([A-Za-z_][A-Za-z0-9_]*\);.*/\1 \2/p; s/^struct \([A-Za-z_][A-Za-z0-9_]*\) {.*/\1/p' "$dir/$face" | tr ' ' '\n'
        sed -n 's/^#define \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$dir/$face"
        sed -n 's/^typedef enum { *\(.*\) *} *\([A-Za-z_][A-Za-z0-9_]*\);.*/\1,\2/p' "$dir/$face" | tr ',' '\n' |
            sed 's/ //g; s/=.*//'
    } | grep -v '^DDP_H$' | sed "s|^|$face: |"
} 2>/dev/null

@test "12 the library has one face: every name it exports begins with ddp_ (DDP_), its face declaring them all" {
    src=$ROOT/solutions/$P
    [ -d "$src" ] || skip "12's library sources (a handout's comes compiled, lib/): not in a student's copy"
    run unprefixed "$src"
    [ -n "$output" ] || fail "unprefixed found no names at all"
    bad=$(grep -vE ': (ddp_|DDP_)' <<<"$output") || true
    [ -z "$bad" ] || fail "names of 12's library without ddp_: $bad"
    # every function the library defines outside static is declared in the face
    face=$(sed -n 's/^FACE\.12_data_parallel_overlap := //p' "$ROOT/Makefile")
    for name in $(grep -v "^$face: " <<<"$output" | cut -d' ' -f2); do
        grep -qE "[ *]$name\(" "$src/$face" || fail "$name is defined by 12's library, not declared in $face"
    done
    # the check can fail: a copy whose library exports a name of its own
    copy=$BATS_TEST_TMPDIR/12
    cp -r "$src" "$copy"
    printf 'void plan_more(void) {}\n' >>"$copy/buckets.cu"
    run unprefixed "$copy"
    assert_output --partial "buckets.cu: plan_more"
}

@test "12 builds, and --help lists its options, one default each inside its range, and how to run ranks on one GPU" {
    need_nccl
    check_help "$P"
    for option in --overlap --bucket-mib --rendezvous --timeout-s --fault --fault-rank --fault-at-batch --delay-on --trace --json; do
        assert_output --partial -- "$option"
    done
    assert_output --partial "tools/launch -n 2 --simulate-nodes"
}

@test "12 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_training_options "$P"
    check_rejects "$P" overlap abc 1 both
    check_rejects "$P" bucket-mib abc 0 -1 4097 nan
    check_dist_rejects "$P"
}

@test "12 refuses a launcher environment that does not add up, an uneven shard and an impossible fault, with one line" {
    need_nccl
    # each (check_refused): the environment, the arguments, what the one line must say
    d=$BATS_TEST_TMPDIR
    check_refused RANK=2 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    assert_equal "$(grep -c "not below the world size" <<<"$stderr")" 1
    check_refused RANK=0 WORLD_SIZE=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check_refused RANK=0 WORLD_SIZE=two RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check_refused OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check_refused RANK=0 WORLD_SIZE=2 "$BIN/$P" $SMALL
    [[ "$stderr" == *"rendezvous"* ]] || fail "no folder: $stderr"
    check_refused RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR=/nonexistent-folder "$BIN/$P" $SMALL
    [[ "$stderr" == *"RENDEZVOUS_DIR"* ]] || fail "missing folder: $stderr"
    check_refused RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --batch 63
    [[ "$stderr" == *"--batch 63"* ]] || fail "uneven shard: $stderr"
    check_refused RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --fault error --fault-rank 2 --fault-at-batch 3
    [[ "$stderr" == *"--fault-rank 2"* ]] || fail "fault-rank: $stderr"
    check_refused X=1 "$BIN/$P" $SMALL --fault-rank 0 --fault-at-batch 3
    check_refused X=1 "$BIN/$P" $SMALL --fault hang
    check_refused X=1 "$BIN/$P" $SMALL --fault error --fault-rank 0 --fault-at-batch $NB
    # the messages name the rank that wrote them
    check_refused RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --batch 63
    [[ "$stderr" == "$P rank 1: "* ]] || fail "the message does not name the rank: $stderr"
    # nothing left behind in the folder by a refused start
    [ -z "$(ls -A "$d" | grep -E '^(failed|nccl-id)\.')" ] || fail "files left in the folder: $(ls -A "$d")"
}

@test "12 without a GPU says so and exits with code 3, on one rank or two" {
    need_nccl
    check_no_gpu_ranks "$P" $SMALL
}

@test "12 a rendezvous folder open to every user, or of another user: one line, exit code 2, before any GPU work" {
    need_nccl
    mkdir "$BATS_TEST_TMPDIR/open" "$BATS_TEST_TMPDIR/theirs"
    chmod 777 "$BATS_TEST_TMPDIR/open"
    check_refused CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$BATS_TEST_TMPDIR/open" \
        "$ROOT/tests/timed" 60 "$BIN/$P" $SMALL12
    [[ "$stderr" == *"RENDEZVOUS_DIR $BATS_TEST_TMPDIR/open can be written by every user (mode 777)"* ]] || fail "$stderr"
    if [ "$(id -u)" = 0 ]; then  # only root can give a folder away
        chown 65534 "$BATS_TEST_TMPDIR/theirs"
        run --separate-stderr env CUDA_VISIBLE_DEVICES= RANK=0 WORLD_SIZE=2 "$ROOT/tests/timed" 60 "$BIN/$P" $SMALL12 \
            --rendezvous "$BATS_TEST_TMPDIR/theirs"
        assert_equal "$status" 2
        [[ "$stderr" == *"--rendezvous $BATS_TEST_TMPDIR/theirs belongs to user 65534"* ]] || fail "$stderr"
    fi
}

@test "12 tracestat --comm-groups: communication exposed kernel by kernel, each step's last bucket apart" {
    # two steps of three buckets; compute runs 0-300 and 600-900 us
    k() { printf '{"name":"%s","cat":"kernel","ph":"X","ts":%s.000,"dur":%s.000,"pid":1,"tid":%s,"args":{"batch":-1,"bytes":0,"pageable":0}}' "$@"; }
    ar=ncclDevKernel_AllReduce_Sum_f32_RING_LL
    {
        echo '{"traceEvents":['
        echo '{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"one rank"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main","kind":"main"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"compute","kind":"stream"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"comm","kind":"stream"}},'
        echo '{"name":"run","cat":"phase","ph":"X","ts":0.000,"dur":1000.000,"pid":1,"tid":1,"args":{"batch":-1,"bytes":0,"pageable":0}},'
        # one event a line, as the course writes them
        printf '%s,\n' "$(k sgemm 0 300 2)" "$(k $ar 100 100 3)" "$(k $ar 250 100 3)" "$(k $ar 400 100 3)" \
            "$(k sgemm 600 300 2)" "$(k $ar 620 80 3)" "$(k $ar 850 100 3)"
        echo "$(k $ar 950 50 3)"
        echo '],"displayTimeUnit":"ms","otherData":{"program":"one rank","dropped":0,"base_ns":1000000000000}}'
    } >"$BATS_TEST_TMPDIR/g.json"
    s=$BATS_TEST_TMPDIR/g.txt
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --comm-groups 3
    assert_success
    printf '%s\n' "$output" >"$s"
    assert_equal "$(kv_get "$s" comm_kernels)" 6
    assert_equal "$(kv_get "$s" comm_ms)" 0.530000
    assert_equal "$(kv_get "$s" comm_exposed_ms)" 0.250000      # 0 + 50 + 100, then 0 + 50 + 50 us
    assert_equal "$(kv_get "$s" comm_whole_groups)" 1
    assert_equal "$(kv_get "$s" comm_last_ms)" 0.150000         # the third of each step: 100 + 50 us
    assert_equal "$(kv_get "$s" comm_last_exposed_ms)" 0.150000
    assert_equal "$(kv_get "$s" comm_hideable_ms)" 0.380000
    assert_equal "$(kv_get "$s" comm_hideable_exposed_ms)" 0.100000
    assert_equal "$(kv_get "$s" comm_hidden_hideable)" 0.736842  # 1 - 0.10 / 0.38
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --comm-groups 4 >"$s"
    assert_equal "$(kv_get "$s" comm_whole_groups)" 0            # 6 kernels are not steps of 4
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" >"$s"
    assert_equal "$(kv_get "$s" comm_exposed_ms)" 0.250000
    [ -z "$(kv_get "$s" comm_last_ms)" ] || fail "comm_last_ms without --comm-groups"
}

@test "12 tracestat --merge: one process row per rank, clocks lined up, communication hidden under compute per rank" {
    # two hand-made rank traces; rank 1's clock starts 50 us after rank 0's
    for r in 0 1; do
        if [ "$r" = 0 ]; then k0=100 kd=400 c0=300 base=1000000000000; else k0=50 kd=200 c0=150 base=1000000050000; fi
        cat >"$BATS_TEST_TMPDIR/r$r.json" <<EOF
{"traceEvents":[
{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"$P rank $r"}},
{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main","kind":"main"}},
{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"compute","kind":"stream"}},
{"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"comm","kind":"stream"}},
{"name":"run","cat":"phase","ph":"X","ts":0.000,"dur":950.000,"pid":1,"tid":1,"args":{"batch":-1,"bytes":0,"pageable":0}},
{"name":"sgemm","cat":"kernel","ph":"X","ts":$k0.000,"dur":$kd.000,"pid":1,"tid":2,"args":{"batch":-1,"bytes":0,"pageable":0}},
{"name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","cat":"kernel","ph":"X","ts":$c0.000,"dur":400.000,"pid":1,"tid":3,"args":{"batch":-1,"bytes":0,"pageable":0}}
],"displayTimeUnit":"ms","otherData":{"program":"$P rank $r","dropped":0,"base_ns":$base}}
EOF
    done
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/r0.json" >"$BATS_TEST_TMPDIR/s0.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s0.txt" comm_kernels)" 1
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s0.txt" comm_hidden)" 0.500000  # 200 of 400 us under the sgemm
    m=$BATS_TEST_TMPDIR/m.json
    run "$TOOLS/tracestat" --merge "$m" "$BATS_TEST_TMPDIR/r0.json" "$BATS_TEST_TMPDIR/r1.json"
    assert_success
    jq -e . "$m" >/dev/null || fail "the merged trace is not valid JSON"
    run "$TOOLS/tracestat" "$m" --check
    assert_success
    assert_equal "$(grep -c '"name":"process_name"' "$m")" 2
    grep -q '"pid":2,"tid":0,"args":{"name":"'"$P"' rank 1"}' "$m" || fail "no process row for rank 1"
    # rank 1's kernel starts at 50 + 50 us on the merged clock
    grep -q '"name":"sgemm","cat":"kernel","ph":"X","ts":100.000,"dur":200.000,"pid":2' "$m" || fail "rank 1 not shifted"
    "$TOOLS/tracestat" "$m" >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_equal "$(kv_get "$s" comm_kernels)" 2
    assert_equal "$(kv_get "$s" comm_ms)" 0.800000
    assert_equal "$(kv_get "$s" comm_hidden)" 0.375000  # rank 1's comm is not under rank 0's sgemm: 300 of 800
    assert_equal "$(kv_get "$s" "comm_hidden\\[$P rank 1\\]")" 0.250000
    assert_equal "$(kv_get "$s" tracks)" "r0 main,r0 compute,r0 comm,r1 main,r1 compute,r1 comm"
    # merged again, read back: the same figures
    "$TOOLS/tracestat" "$m" --rewrite "$BATS_TEST_TMPDIR/again.json"
    diff <("$TOOLS/tracestat" "$m") <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json")
    run --separate-stderr "$TOOLS/tracestat" --merge "$m"
    assert_equal "$status" 2
}

# ----------------------------------------------------------------------------
# one rank: any GPU

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait,ex:12-device-slot
@test "12 one rank: each run bit-identical to the reference and to the course's 06 under every test delay, either variant first" {
    need_nccl_gpu
    course_06 a $SMALL
    for args in "${RUNS12[@]}"; do
        # shellcheck disable=SC2086
        run_json v "$P" $SMALL12 $args
        [ "$status" -eq 0 ] || fail "one rank, $args: not verified (exit code $status)"
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" losses_once)" "true true"
        assert_equal "$(bits_of "$f")" "$(bits_of "$BATS_TEST_TMPDIR/a.json")"  # 06's losses and weights
        assert_equal "$(json_get "$f" losses_taken)" "$NB"
        assert_equal "$(json_get "$f" runs_identical)" true
        # one rank: what the ranks' all-gather of checksums holds is this rank's own final weights
        assert_equal "$(json_get "$f" world_size) $(json_get "$f" weights_checksums)" "1 $(json_get "$f" weights_checksum)"
        assert_equal "$(json_get "$f" overlap)" "$(awk '{ print $2 }' <<<"$args")"
        assert_equal "$(json_get "$f" buckets) $(json_get "$f" bucket_plan)" "3 4-3|2|1"
        # both variants ran, round-robin, every run checked: (1 warm-up + 2 timed) x 2
        assert_equal "$(json_get "$f" runs_checked)" 6
        assert_num "$(json_get "$f" none_step_ms)" ">" 0 "the none variant's step"
        assert_num "$(json_get "$f" buckets_step_ms)" ">" 0 "the buckets variant's step"
        # lesson 08's interval: a read of the losses every 10 batches and at the end, and one
        # wait for their average over the ranks
        assert_equal "$(json_get "$f" syncs)" $(((NB + 9) / 10 + 1))
    done
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 one rank: buckets last layer first, one per layer when small, one in all when large, each 06's bits, launched or not" {
    need_nccl_gpu
    # 10 batches a run, not SMALL's 16: a missing wait or a wrong sum shows in the first batches' bits
    local b=(--batches 10)
    course_06 a $SMALL "${b[@]}"
    want=$(bits_of "$BATS_TEST_TMPDIR/a.json")
    bytes=$((4 * (64 * 256 + 256 + 2 * (256 * 256 + 256) + 8 * 256 + 8)))
    # a bucket per layer, and one in all (a quarter MiB, 4-3|2|1: below, and the check above under every delay)
    for pair in "0.001 4|3|2|1" "1000 4-1"; do
        mib=${pair%% *} plan=${pair#* }
        for on in compute copy; do  # each held back in turn: a missing wait diverges under one of them
            run_json r "$P" $SMALL "${b[@]}" --bucket-mib "$mib" --delay-us "$DELAY_US" --delay-on $on
            assert_success
            f=$BATS_TEST_TMPDIR/r.json
            assert_equal "$(json_get "$f" bucket_plan) $(json_get "$f" grad_bytes)" "$plan $bytes"
            assert_equal "$(bits_of "$f")" "$want"
        done
    done
    # under tools/launch -n 1: the same
    run --separate-stderr "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" -n 1 "$BIN/$P" $SMALL12 "${b[@]}" --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/l.json"
    f=$BATS_TEST_TMPDIR/l.json
    assert_equal "$(json_get "$f" launcher)" "tools/launch or torchrun"
    assert_equal "$(json_get "$f" bucket_plan) $(json_get "$f" grad_bytes)" "4-3|2|1 $bytes"
    assert_equal "$(bits_of "$f")" "$want"
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 one rank, trace: one all-reduce per bucket and batch on the comm stream, every step's kernels there" {
    need_nccl_gpu
    # traced under each test delay in turn: a missing wait diverges under one of them (the run is
    # then not verified), a missing all-reduce leaves the comm stream empty
    for on in compute copy; do
        run_json r "$P" $SMALL12 --reps 1 --warmup 0 --delay-us "$DELAY_US" --delay-on $on --trace "$BATS_TEST_TMPDIR/t.json"
        [ "$status" -eq 0 ] || fail "one rank, traced, --delay-on $on: not verified (exit code $status)"
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" losses_once)" "true true"
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --check
        assert_success
        "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
        s=$BATS_TEST_TMPDIR/s.txt
        [[ "$(kv_get "$s" tracks)" == *"comm"* ]] || fail "no comm track: $(kv_get "$s" tracks)"
        # NB batches x 3 buckets. With one rank NCCL 2.28 does an out-of-place sum as a device-to-device
        # copy (no kernel), and the in-place sum of the run's losses as nothing; other versions may
        # launch a kernel instead: count both. (The test delays' spins are no NCCL kernel, no copy.)
        assert_equal "$(($(kv_get "$s" comm_kernels) + $(kv_get "$s" other_copies)))" $((NB * 3))
        assert_equal "$(kv_get "$s" h2d)" $((NB + 1))  # the batches, and the run's losses on their way to the all-reduce
        assert_equal "$(kv_get "$s" 'kernel_count\[loss_kernel\]')" "$NB"
        assert_equal "$(kv_get "$s" 'kernel_count\[bias_act_kernel\]')" $((NB * 4))
        assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" $((NB * 3))  # one update per bucket
        assert_equal "$(kv_get "$s" dropped)" 0
    done
}

# ----------------------------------------------------------------------------
# two and four ranks: as many GPUs, or simulated nodes on one

# assert_ranks_bits N WANT ARGS...: N ranks of the student's 12 verified (the reference, every
# run, every rank), and their losses and every rank's weights the bits WANT of the course's 12
assert_ranks_bits() {
    local n=$1 want=$2
    shift 2
    run_ranks "$n" v "$P" "$@"
    [ "$status" -eq 0 ] || fail "$n ranks, $*: not verified (exit code $status)"
    f=$BATS_TEST_TMPDIR/v.json
    assert_equal "$(json_get "$f" world_size) $(json_get "$f" shard_batch)" "$n $((64 / n))"
    assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" runs_identical)" "true true"
    assert_equal "$(json_get "$f" ranks_identical) $(json_get "$f" ranks_verified)" "true true"
    assert_equal "$(json_get "$f" losses_once)" true
    assert_equal "$(json_get "$f" weights_checksums | tr ',' '\n' | sort -u | wc -l)" 1  # one model on every rank
    assert_equal "$(bits_of "$f" weights_checksums)" "$want"  # the course's 12: its losses, every rank's weights
}

# bats test_tags=ranks,gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 two ranks: bit-identical to the reference and the course's 12 under every delay, within 1e-4 of 06 and of the CPU" {
    need_nccl_gpu
    # with two ranks every average is one sum of two numbers, whatever NCCL's algorithm;
    # fixed anyway, so that nothing but the program varies between runs
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    course_ranks 2 twelve $SMALL12
    want=$(bits_of "$BATS_TEST_TMPDIR/twelve.json" weights_checksums)
    # one GPU training the same global batch: the same mathematics, the sums in another order
    course_06 a $SMALL
    for args in "${RUNS12[@]}"; do
        # shellcheck disable=SC2086
        assert_ranks_bits 2 "$want" $SMALL12 $args
        for key in loss_first loss_last; do
            d=$(rel "$(json_get "$BATS_TEST_TMPDIR/v.json" $key)" "$(json_get "$BATS_TEST_TMPDIR/a.json" $key)")
            assert_num "$d" "<=" 1e-4 "$key: two ranks against 06 on one GPU, relative ($args)"
        done
    done
    # and against the CPU in double precision, trained on the whole batch
    run_ranks 2 c "$P" $TINY --check-cpu
    assert_success
    assert_num "$(json_get "$BATS_TEST_TMPDIR/c.json" cpu_check_max_rel)" "<=" 1e-4 "relative difference from the CPU"
}

# bats test_tags=ranks,gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 four ranks: every rank bit-identical to the reference and to the course's 12, copies delayed, then compute" {
    need_nccl_gpu
    # 12 batches: every run of four simulated nodes pays for their loopback sockets. With four ranks
    # the order of each sum depends on NCCL's algorithm, and the bucket's place in the ring: fixed
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    course_ranks 4 twelve $SMALL12 --batches 12
    want=$(bits_of "$BATS_TEST_TMPDIR/twelve.json" weights_checksums)
    for args in "${RUNS12[@]:1}"; do
        # shellcheck disable=SC2086
        assert_ranks_bits 4 "$want" $SMALL12 --batches 12 $args
    done
}

# first_bucket_early TRACE: "k/n": of the n steps in the run window, in how many rank 0's first
# all-reduce started before the second relu_back_kernel after the step's loss_kernel ended (the
# error product of layer 3, the lowest layer of the first bucket of the default model, 4-3|2|1)
first_bucket_early() {
    local compute comm
    compute=$(trace_kernels "$1" run compute)
    comm=$(trace_kernels "$1" run comm)
    jq -rn --argjson c "$compute" --argjson n "$comm" '
        [$c[] | select(.name == "loss_kernel") | .ts as $t
            | ([$c[] | select(.name == "relu_back_kernel" and .ts > $t)][1]) as $r
            | ([$n[] | select((.name | startswith("nccl")) and .ts > $t)][0]) as $k
            | select($r != null and $k != null) | ($k.ts < $r.end)] as $v
        | "\([$v[] | select(.)] | length)/\($v | length)"'
}

# bats test_tags=ranks,gpu
@test "12 two ranks, trace: a bucket's all-reduce starts under its lowest layer's error product (weights), not after (layer)" {
    need_nccl_gpu
    for mode in weights layer; do
        run_ranks 2 $mode "$P" --batches 6 --reps 1 --warmup 0 --prep-work 0 --ready-after $mode \
            --trace "$BATS_TEST_TMPDIR/$mode.json"
        assert_success
    done
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/weights.json" bucket_plan)" "4-3|2|1"
    layer=$(first_bucket_early "$BATS_TEST_TMPDIR/layer.rank0.json")
    weights=$(first_bucket_early "$BATS_TEST_TMPDIR/weights.rank0.json")
    assert_equal "$layer" "0/6"  # it waits for an event recorded after that product: never before
    assert_num "${weights%/*}" ">=" 4 "steps (of ${weights#*/}) whose first all-reduce started under layer 3's error product"
}

# bats test_tags=ranks,gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce
@test "12 two ranks, traces: one per rank, merged with a process row each; one all-reduce per bucket and batch" {
    need_nccl_gpu
    # the compute stream held back: an all-reduce that does not wait for its bucket's gradients
    # (12-ready) reads them before they are written every time, and the run is not verified
    run_ranks 2 r "$P" $SMALL12 --reps 1 --warmup 0 --delay-us "$DELAY_US" --delay-on compute \
        --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    for r in 0 1; do
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank$r.json" --check
        assert_success
        s=$BATS_TEST_TMPDIR/s$r.txt
        "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank$r.json" --window run >"$s"
        # NB batches x 3 buckets, and the all-reduce of the run's losses
        assert_equal "$(kv_get "$s" comm_kernels)" $((NB * 3 + 1))
        assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" $((NB * 3))
        assert_equal "$(kv_get "$s" dropped)" 0
    done
    run "$TOOLS/tracestat" --merge "$BATS_TEST_TMPDIR/m.json" "$BATS_TEST_TMPDIR/t.rank0.json" "$BATS_TEST_TMPDIR/t.rank1.json"
    assert_success
    assert_equal "$(grep -c '"name":"process_name"' "$BATS_TEST_TMPDIR/m.json")" 2
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/m.json" --check
    assert_success
}

# The stop's timeline, without a GPU: tests/stop-timeline.c's two ranks stop through the course's
# own dist_stop.c and dist_notes.c (rank 1 fails, rank 0 notices its note and aborts for 0.2 s);
# what they say is read as a real run's, by the check below.
@test "12 every rank says its stop timeline from the failed rank's note, and the stop check reads it (no GPU)" {
    need_nccl  # dist.h includes nccl.h
    local flags cuda=${CUDA_HOME:-/usr/local/cuda}
    flags=$(make -s --no-print-directory -C "$ROOT" host-includes) || fail "make host-includes failed"
    # shellcheck disable=SC2086
    (cd "$ROOT" && gcc -std=c11 -Wall -Wextra -Werror $flags "$ROOT/tests/stop-timeline.c" common/dist/dist_stop.c \
        common/dist/dist_notes.c common/base/own_file.c common/base/stderr_line.c common/base/timing.c \
        common/base/check.c common/base/host_memory.c -L"$cuda/lib64" -Wl,-rpath="$cuda/lib64" -lcudart \
        -o "$BATS_TEST_TMPDIR/stop-timeline") || fail "tests/stop-timeline.c does not build"
    mkdir -m 700 "$BATS_TEST_TMPDIR/rv"
    run --separate-stderr "$ROOT/tests/timed" 60 "$BATS_TEST_TMPDIR/stop-timeline" "$BATS_TEST_TMPDIR/rv"
    ended=$(date +%s.%N)
    assert_success  # both ranks exited with code 1
    run stop_problems stop_timeline 2 1 "$ended" <<<"$stderr"
    assert_output ""
    # rank 0 noticed the note within the interval it looks at, and its abort took the stub's 0.2 s
    line=$(grep '^stop_timeline rank 0: stop timeline, ' <<<"$stderr")
    [[ "$line" =~ stopping\ \+([0-9.]+),\ aborting\ \+([0-9.]+),\ aborted\ \+([0-9.]+) ]] || fail "rank 0's timeline: $line"
    assert_num "${BASH_REMATCH[1]}" "<=" 0.5 "seconds from rank 1's note until rank 0 stopped (it looks every 0.05 s)"
    assert_num "$(awk -v a="${BASH_REMATCH[3]}" -v b="${BASH_REMATCH[2]}" 'BEGIN { print a - b }')" ">=" 0.2 \
        "seconds rank 0's abort took (the stub's 0.2 s)"
    # the check fails a stop that ended past the design's bound, a rank that said nothing, another note
    run stop_problems stop_timeline 2 1 "$(awk -v e="$ended" 'BEGIN { printf "%.3f", e + 10 }')" <<<"$stderr"
    assert_output --regexp "^the stop took 1[0-9]\.[0-9]+ s from rank 1's note to the end of the launch, over the design's 7\.67 s "
    run stop_problems stop_timeline 3 1 "$ended" <<<"$stderr"
    assert_output "rank 2 said no stop timeline"
    run stop_problems stop_timeline 2 0 "$ended" <<<"$stderr"
    assert_line --partial "rank 0's stop answers no note of rank 0: "
    assert_line --partial "rank 1's stop answers no note of rank 0: "
}

# bats test_tags=ranks,gpu,timed,deadline,claim:12-note-names
@test "12 a rank that fails stops every rank well under the time limit (its note), the failed one named, two and four ranks" {
    need_nccl_gpu
    assert_stops_by_note "$P" 2 $SMALL12
    assert_stops_by_note "$P" 4 $SMALL12
}

# bats test_tags=ranks,gpu,timed,deadline,claim:12-timeout
@test "12 a rank that hangs: every rank gives up by itself after --timeout-s, and says so" {
    need_nccl_gpu
    assert_stops_by_timeout "$P" 2 $SMALL12
}

# bats test_tags=gpu,claim:12-other-notes,claim:12-stale-id
@test "12 a rendezvous folder with an earlier run's id and notes, or ones dated in the future: skipped, the run passes or waits" {
    need_nccl_gpu
    rv=$BATS_TEST_TMPDIR/rv
    mkdir "$rv"
    # a crashed run of the same id an hour ago, and another run's notes of today
    old=$(($(date +%s) - 3600))
    printf '%0256d %s.000 2\n' 7 "$old" >"$rv/nccl-id.job7"
    printf -- '- %s.000 an hour-old failure\n' "$old" >"$rv/failed.job7.rank1"
    printf '0123456789abcdef %s.000 another run, today\n' "$(date +%s)" >"$rv/failed.job7.rank0"
    # two machines of one rank each, as across hosts: launch leaves the shared folder alone
    for k in 0 1; do
        "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" -n 1 --simulate-nodes --nodes 2 --node-rank $k --rendezvous "$rv" \
            --run-id job7 "$BIN/$P" $SMALL12 --reps 1 --warmup 0 --timeout-s 30 >"$BATS_TEST_TMPDIR/out$k" 2>&1 &
        pids[k]=$!
    done
    wait "${pids[0]}" || fail "rank 0: exit code $?: $(tail -n 3 "$BATS_TEST_TMPDIR/out0")"
    wait "${pids[1]}" || fail "rank 1: exit code $?: $(tail -n 3 "$BATS_TEST_TMPDIR/out1")"
    grep -q "ranks: 2 on 1 GPU" "$BATS_TEST_TMPDIR/out0" || fail "rank 0's report: $(head -n 20 "$BATS_TEST_TMPDIR/out0")"
    # a fresh id of a run with another rank count: one line, exit code 2 (a rank alone on
    # its machine, as the second of two machines, so that it goes as far as the rendezvous)
    printf '%0256d %s.000 4\n' 7 "$(date +%s)" >"$rv/nccl-id.job8"
    run --separate-stderr env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 RUN_ID=job8 RENDEZVOUS_DIR="$rv" \
        "$ROOT/tests/timed" 60 "$BIN/$P" $SMALL12
    assert_equal "$status" 2
    [[ "$stderr" == *"has 4 ranks, this rank was started as one of 2"* ]] || fail "got: $stderr"
    # an id of 4 ranks and rank 0's failure note, both dated a day ahead: neither trusted (a date
    # in the future would make a stale file look fresh for ever): the rank waits for the real id
    # until its time limit, and says why, rather than taking the id (exit code 2) or the note
    tomorrow=$(($(date +%s) + 86400))
    printf '%0256d %s.000 4\n' 7 "$tomorrow" >"$rv/nccl-id.job9"
    printf -- '- %s.000 a note from tomorrow\n' "$tomorrow" >"$rv/failed.job9.rank0"
    run --separate-stderr env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 RUN_ID=job9 RENDEZVOUS_DIR="$rv" \
        "$ROOT/tests/timed" 60 "$BIN/$P" $SMALL12 --timeout-s 3
    assert_equal "$status" 1
    [[ "$stderr" == *"did not appear in $rv/nccl-id.job9 within 3 s (an id of an earlier run, or dated in the future, is there and was skipped)"* ]] ||
        fail "got: $stderr"
}

# bats test_tags=gpu,ranks,claim:12-torchrun
@test "12 under torchrun --standalone --no-python, two ranks: verified, the bits of tools/launch (losses, every rank's weights)" {
    need_nccl_gpu
    assert_torchrun_like_launch "$P" "loss_checksum weights_checksums" $SMALL12
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" matches_reference)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" ranks_identical)" true
}

# bats test_tags=ranks,gpu
@test "12 more ranks than GPUs, not simulated: every rank says so with one line, exit code 3" {
    need_nccl_gpu
    run --separate-stderr env CUDA_VISIBLE_DEVICES=0 "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 "$BIN/$P" $SMALL
    assert_equal "$status" 3
    assert_equal "$(grep -c "no usable GPU for this rank: 2 ranks on this machine.*--simulate-nodes" <<<"$stderr")" 2
}

# Checks of speed: separate GPUs only. Not tagged ex:12-update-wait: at this size every
# all-reduce but the last ends long before the updates are issued, so a missing wait there
# may go unseen (the checks above catch it).
# bats test_tags=ranks,gpu,timed,speed,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce
@test "12 two GPUs, speed: buckets faster than none in the same run" {
    need_separate_gpus 2
    run_ranks 2 r "$P" $HEAVY12
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_equal "$(json_get "$f" performance)" true
    # without its all-reduces a run has nothing to hide, its own reference untrained alike, and the
    # two variants take turns at being faster: the run must train as the course's 12 does (two
    # ranks: every sum one sum of two numbers, the same bits whatever NCCL's algorithm)
    course_ranks 2 twelve $HEAVY12 --reps 1 --warmup 0
    assert_equal "$(bits_of "$f" weights_checksums)" "$(bits_of "$BATS_TEST_TMPDIR/twelve.json" weights_checksums)"
    assert_num "$(json_get "$f" buckets_step_ms)" "<" "$(json_get "$f" none_step_ms)" "buckets step against none"
}

# bats test_tags=ranks,gpu,timed,speed,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce
@test "12 two GPUs, speed: the trace shows more of the communication hidden with buckets than without" {
    need_separate_gpus 2
    run_ranks 2 r "$P" $HEAVY12 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    s=$BATS_TEST_TMPDIR/s.txt
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank0.json" --window run >"$s"
    buckets=$(kv_get "$s" comm_hidden)
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank0.json" --window none >"$s"
    none=$(kv_get "$s" comm_hidden)
    assert_num "$buckets" ">" "$(awk -v n="$none" 'BEGIN { print n + 0.2 }')" "comm hidden, buckets ($buckets) against none ($none)"
}

# ----------------------------------------------------------------------------
# compute-sanitizer, one rank: the course's set (helpers.bash, sanitizer_check), with its run and
# the reason memcheck differs for a lesson on NCCL

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
