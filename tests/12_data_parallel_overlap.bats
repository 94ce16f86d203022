#!/usr/bin/env bats
# Lesson 12: data-parallel training with NCCL, each bucket's all-reduce under the
# backward pass. Built only where make finds NCCL (`make -s nccl-status` says why
# not); its checks skip with that reason. The one-rank checks run on any GPU; the
# two-rank ones (tools/launch -n 2) need two GPUs and skip with the count otherwise.
# Scored checks (ex:) run the student's step under the test delays first: a missing
# wait, or a missing all-reduce, diverges there every time, on one rank or two.

load helpers

P=12_data_parallel_overlap
LAUNCH=$ROOT/tools/launch
TOOLS=$(dirname "$REF_BIN")/tools  # the tools of the build under test (make BUILD=...)
EX=ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
# SMALL with three buckets: layers 4-3 | 2 | 1 (a quarter MiB closes a bucket)
SMALL12="$SMALL --bucket-mib 0.25"
# GPU-heavy, two ranks of 512 samples each: what the overlap hides shows in the step
HEAVY12="--batches 30 --batch 1024 --hidden 4096 --layers 4 --prep-work 0 --reps 3 --warmup 1"

# GPUs this process may use (CUDA_VISIBLE_DEVICES when set, else nvidia-smi's list)
count_gpus() {
    if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
        tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c . || true
    else
        { nvidia-smi -L 2>/dev/null || true; } | grep -c '^GPU' || true
    fi
}

setup_file() {
    if [ -x "$BIN/$P" ]; then
        HAVE_NCCL=1 NCCL_WHY=""
    else
        HAVE_NCCL=0
        NCCL_WHY="$(make -s -C "$ROOT" nccl-status 2>/dev/null | head -n 1)"
        [[ "$NCCL_WHY" == "NCCL not found"* ]] || NCCL_WHY="$BIN/$P is not built (run make)"
    fi
    export HAVE_NCCL NCCL_WHY
    detect_gpu
    GPUS=$(count_gpus)
    export GPUS
}

need_nccl() {
    [ "$HAVE_NCCL" = 1 ] || skip "$NCCL_WHY"
}

need_gpu12() {
    need_nccl
    need_gpu
}

need_two_gpus() {
    need_gpu12
    [ "${GPUS:-0}" -ge 2 ] || skip "two ranks need two GPUs; ${GPUS:-0} visible"
}

# run_json2 NAME ARGS...: two ranks of $BIN/$P under tools/launch with --json; rank 0's
# JSON (it carries every rank's checksums) into $BATS_TEST_TMPDIR/NAME.json, every
# rank's stderr into NAME.txt.
run_json2() {
    local name=$1
    shift
    run --separate-stderr "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" -n 2 "$BIN/$P" "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    printf '%s\n' "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
    if [ "$status" -ne 0 ]; then
        echo "two ranks of $P $* said:"
        grep -E "never|poisoned|diverge|differ|NOT|: NO|FAILED|failed|wrong|abort|timed out" <<<"$stderr" |
            head -n 6 | sed 's/^ */  /'
    fi
    jq -e . "$BATS_TEST_TMPDIR/$name.json" >/dev/null || fail "$name: rank 0's --json output is not valid JSON"
}

# rel A B: |A - B| / |B|
rel() {
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; print d / b }'
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

@test "12 builds, and --help lists its options" {
    need_nccl
    run prog "$P" --help
    assert_success
    for option in --overlap --bucket-mib --rendezvous --timeout-s --fail-rank --fail-at-batch --delay-on --trace --json; do
        assert_output --partial -- "$option"
    done
}

@test "12 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_training_options "$P"
    check_rejects "$P" overlap abc 1 both
    check_rejects "$P" bucket-mib abc 0 -1 4097 nan
    check_rejects "$P" timeout-s abc 0 3601
    check_rejects "$P" fail-rank abc -1 65536
    check_rejects "$P" fail-at-batch abc -1
    check_rejects "$P" rendezvous /nonexistent-folder
}

@test "12 refuses a launcher environment that does not add up, an uneven shard and an impossible fault, with one line" {
    need_nccl
    # each: the environment, the arguments, what the one line must say
    check() {
        run --separate-stderr env "$@"
        [ "$status" -eq 2 ] || fail "$*: exit code $status, expected 2: $stderr"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "$*: expected one line on stderr, got: $stderr"
    }
    d=$BATS_TEST_TMPDIR
    check RANK=2 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    assert_equal "$(grep -c "not below the world size" <<<"$stderr")" 1
    check RANK=0 WORLD_SIZE=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check RANK=0 WORLD_SIZE=two RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL
    check RANK=0 WORLD_SIZE=2 "$BIN/$P" $SMALL
    [[ "$stderr" == *"rendezvous"* ]] || fail "no folder: $stderr"
    check RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR=/nonexistent-folder "$BIN/$P" $SMALL
    [[ "$stderr" == *"RENDEZVOUS_DIR"* ]] || fail "missing folder: $stderr"
    check RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --batch 63
    [[ "$stderr" == *"--batch 63"* ]] || fail "uneven shard: $stderr"
    check RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --fail-rank 2 --fail-at-batch 3
    [[ "$stderr" == *"--fail-rank 2"* ]] || fail "fail-rank: $stderr"
    check X=1 "$BIN/$P" $SMALL --fail-rank 0
    check X=1 "$BIN/$P" $SMALL --fail-rank 0 --fail-at-batch 40
    # the messages name the rank that wrote them
    check RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --batch 63
    [[ "$stderr" == "$P rank 1: "* ]] || fail "the message does not name the rank: $stderr"
    # nothing left behind in the folder by a refused start
    [ -z "$(ls -A "$d" | grep -E '^(failed|nccl-id)\.')" ] || fail "files left in the folder: $(ls -A "$d")"
}

@test "12 without a GPU says so and exits with code 3, on one rank or two" {
    need_nccl
    check_no_gpu_exit "$P" $SMALL
    run --separate-stderr env CUDA_VISIBLE_DEVICES= "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 "$BIN/$P" $SMALL
    assert_equal "$status" 3
    assert_equal "$(grep -c "no usable GPU" <<<"$stderr")" 2
}

@test "12 tools/launch: the environment of every rank, a fresh folder, exit codes, and ranks outliving a failed one stopped" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $RUN_ID $NCCL_NVLS_ENABLE $RENDEZVOUS_DIR" >"$OUT/rank$RANK"
[ -d "$RENDEZVOUS_DIR" ] || exit 9
case "${MODE:-}" in
fail) [ "$RANK" = 1 ] && exit 7; exit 0 ;;
hang) [ "$RANK" = 1 ] && exit 5; exec sleep 60 ;;
esac
exit 0
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    run env NCCL_NVLS_ENABLE=1 "$LAUNCH" -n 3 "$BATS_TEST_TMPDIR/rank"
    assert_success
    for k in 0 1 2; do
        read -r rank world local lworld run nvls dir <"$OUT/rank$k"
        assert_equal "$rank $world $local $lworld $run $nvls" "$k 3 $k 3 run 0"
    done
    [ ! -e "$dir" ] || fail "the fresh rendezvous folder $dir was not removed"
    # a folder given: used, kept, and cleared of what an earlier run of the same id left
    mkdir "$BATS_TEST_TMPDIR/rv"
    touch "$BATS_TEST_TMPDIR/rv/failed.job7.rank1" "$BATS_TEST_TMPDIR/rv/nccl-id.job7" "$BATS_TEST_TMPDIR/rv/other"
    run "$LAUNCH" -n 2 --rendezvous "$BATS_TEST_TMPDIR/rv" --run-id job7 "$BATS_TEST_TMPDIR/rank"
    assert_success
    read -r _ _ _ _ run _ dir <"$OUT/rank1"
    assert_equal "$run $dir" "job7 $BATS_TEST_TMPDIR/rv"
    run ls "$BATS_TEST_TMPDIR/rv"
    assert_output "other"
    # the first failure's exit code
    run env MODE=fail "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 7
    # a rank still running a grace period after another failed is stopped
    SECONDS=0
    run --separate-stderr env MODE=hang "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 --grace-s 1 "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 5
    assert_num "$SECONDS" "<" 15 "seconds until launch returned"
    [[ "$stderr" == *"stopping them"* ]] || fail "got: $stderr"
    # bad usage: exit code 2, one line
    for args in "" "-n 0 x" "-n 2" "-n 2 --rendezvous /nonexistent-folder x" "-n 2 --nodes 2 --node-rank 1 x" \
        "-n 2 --bogus x" "-n 2 --run-id a/b x"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$LAUNCH" $args
        [ "$status" -eq 2 ] || fail "launch $args: exit code $status, expected 2"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "launch $args: expected one line, got: $stderr"
    done
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

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 one rank: every run bit-identical to the reference under every test delay, in both overlap modes" {
    need_gpu12
    for mode in buckets none; do
        assert_verified_under_delays "$P" $SMALL12 --overlap $mode
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" losses_taken)" 40
        assert_equal "$(json_get "$f" runs_identical)" true
        assert_equal "$(json_get "$f" ranks_identical)" true
        assert_equal "$(json_get "$f" overlap)" "$mode"
        assert_equal "$(json_get "$f" buckets)" 3
        # both variants ran, round-robin, every run checked: (1 warm-up + 2 timed) x 2
        assert_equal "$(json_get "$f" runs_checked)" 6
        assert_num "$(json_get "$f" none_step_ms)" ">" 0 "the none variant's step"
        assert_num "$(json_get "$f" buckets_step_ms)" ">" 0 "the buckets variant's step"
        # lesson 08's interval: 4 reads of the losses, and one wait for their average over the ranks
        assert_equal "$(json_get "$f" syncs)" 5
    done
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 one rank gives the course's 06 losses and weights, bit for bit, for any bucket size, launched or not" {
    need_gpu12
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    want="$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum) $(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
    for args in "--bucket-mib 0.25" "--bucket-mib 0.001" "--bucket-mib 1000" "--bucket-mib 0.25 --overlap none"; do
        for on in compute copy; do  # each held back in turn: a missing wait diverges under one of them
            # shellcheck disable=SC2086
            run_json r "$P" $SMALL $args --delay-us "$DELAY_US" --delay-on $on
            assert_success
            f=$BATS_TEST_TMPDIR/r.json
            assert_equal "$(json_get "$f" loss_checksum) $(json_get "$f" weights_checksum)" "$want"
        done
    done
    # under tools/launch -n 1: the same
    run --separate-stderr "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" -n 1 "$BIN/$P" $SMALL12 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/l.json"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/l.json" launcher)" "tools/launch or torchrun"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/l.json" loss_checksum) $(json_get "$BATS_TEST_TMPDIR/l.json" weights_checksum)" "$want"
}

# bats test_tags=gpu,ex:12-bucket-plan
@test "12 buckets follow the backward pass: last layer first, one per layer when small, one in all when large" {
    need_gpu12
    for pair in "0.25 4-3|2|1" "0.001 4|3|2|1" "1000 4-1"; do
        mib=${pair%% *} plan=${pair#* }
        run_json r "$P" $SMALL --bucket-mib "$mib" --reps 1 --warmup 0
        assert_success
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" bucket_plan)" "$plan"
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" grad_bytes)" $((4 * (64 * 256 + 256 + 2 * (256 * 256 + 256) + 8 * 256 + 8)))
    done
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 one rank, trace: one all-reduce per bucket and batch on the comm stream, every step's kernels there" {
    need_gpu12
    assert_verified_under_delays "$P" $SMALL12
    run --separate-stderr prog "$P" $SMALL12 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --check
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    [[ "$(kv_get "$s" tracks)" == *"comm"* ]] || fail "no comm track: $(kv_get "$s" tracks)"
    # 40 batches x 3 buckets. With one rank NCCL 2.28 does an out-of-place sum as a device-to-device
    # copy (no kernel), and the in-place sum of the run's losses as nothing; other versions may
    # launch a kernel instead: count both.
    assert_equal "$(($(kv_get "$s" comm_kernels) + $(kv_get "$s" other_copies)))" 120
    assert_equal "$(kv_get "$s" h2d)" 41  # the batches, and the run's losses on their way to the all-reduce
    assert_equal "$(kv_get "$s" 'kernel_count\[loss_kernel\]')" 40
    assert_equal "$(kv_get "$s" 'kernel_count\[bias_act_kernel\]')" $((40 * 4))
    assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" $((40 * 3))  # one update per bucket
    assert_equal "$(kv_get "$s" dropped)" 0
}

# ----------------------------------------------------------------------------
# two ranks: two GPUs

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 two ranks: bit-identical to the reference on every rank, the same weights everywhere, under every test delay" {
    need_two_gpus
    # with two ranks every average is one sum of two numbers, whatever NCCL's algorithm;
    # fixed anyway, so that nothing but the program varies between runs
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    for mode in buckets none; do
        for delay in "${DELAYS[@]}"; do
            # shellcheck disable=SC2086
            run_json2 v $SMALL12 --overlap $mode $delay
            [ "$status" -eq 0 ] || fail "two ranks, --overlap $mode $delay: not verified (exit code $status)"
            f=$BATS_TEST_TMPDIR/v.json
            assert_equal "$(json_get "$f" world_size)" 2
            assert_equal "$(json_get "$f" shard_batch)" 32
            assert_equal "$(json_get "$f" matches_reference)" true
            assert_equal "$(json_get "$f" runs_identical)" true
            assert_equal "$(json_get "$f" ranks_identical)" true
            assert_equal "$(json_get "$f" ranks_verified)" true
            assert_equal "$(json_get "$f" losses_once)" true
        done
    done
    # two runs of the same configuration: the same bits
    sums=$(json_get "$f" weights_checksums)
    run_json2 w $SMALL12 --overlap none
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/w.json" weights_checksums)" "$sums"
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce,ex:12-update-wait
@test "12 two ranks: the losses of the whole batch, within 1e-4 of one GPU training the same global batch" {
    need_two_gpus
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    for on in compute copy; do  # under each test delay: the delays change the timing, never the bits
        run_json2 r $SMALL12 --delay-us "$DELAY_US" --delay-on $on
        assert_success
        for key in loss_first loss_last; do
            d=$(rel "$(json_get "$BATS_TEST_TMPDIR/r.json" $key)" "$(json_get "$BATS_TEST_TMPDIR/a.json" $key)")
            assert_num "$d" "<=" 1e-4 "$key: two ranks against 06 on one GPU, relative (--delay-on $on)"
        done
    done
    # and against the CPU in double precision, trained on the whole batch
    run_json2 c $TINY --check-cpu
    assert_success
    assert_num "$(json_get "$BATS_TEST_TMPDIR/c.json" cpu_check_max_rel)" "<=" 1e-4 "relative difference from the CPU"
}

# Not tagged ex:12-update-wait: at this size every all-reduce but the last ends long before
# the updates are issued, so a missing wait there may go unseen (the checks above catch it).
# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce
@test "12 two ranks: the overlap pays: buckets faster than none, most of the all-reduce hidden (same run)" {
    need_two_gpus
    run_json2 r $HEAVY12
    assert_success
    f=$BATS_TEST_TMPDIR/r.json
    assert_num "$(json_get "$f" buckets_step_ms)" "<" "$(json_get "$f" none_step_ms)" "buckets step against none"
    # (t_none - t_buckets) / min(t_allreduce alone, t_backward alone)
    assert_num "$(json_get "$f" comm_hidden_share)" ">=" 0.3 "share of the all-reduce hidden"
    assert_num "$(json_get "$f" comm_busbw_gbs)" ">" 0 "bus bandwidth"
}

# bats test_tags=gpu,ex:12-bucket-plan,ex:12-ready,ex:12-allreduce
@test "12 two ranks, traces: one per rank, merged with a process row each; communication hidden with buckets, not without" {
    need_two_gpus
    run_json2 r $HEAVY12 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    for r in 0 1; do
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank$r.json" --check
        assert_success
    done
    run "$TOOLS/tracestat" --merge "$BATS_TEST_TMPDIR/m.json" "$BATS_TEST_TMPDIR/t.rank0.json" "$BATS_TEST_TMPDIR/t.rank1.json"
    assert_success
    assert_equal "$(grep -c '"name":"process_name"' "$BATS_TEST_TMPDIR/m.json")" 2
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/m.json" --check
    assert_success
    s=$BATS_TEST_TMPDIR/s.txt
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank0.json" --window run >"$s"
    buckets=$(kv_get "$s" comm_hidden)
    # 30 batches x the buckets, and the all-reduce of the run's losses
    assert_equal "$(kv_get "$s" comm_kernels)" $((30 * $(json_get "$BATS_TEST_TMPDIR/r.json" buckets) + 1))
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank0.json" --window none >"$s"
    none=$(kv_get "$s" comm_hidden)
    assert_num "$buckets" ">" "$(awk -v n="$none" 'BEGIN { print n + 0.2 }')" "comm hidden, buckets ($buckets) against none ($none)"
}

# bats test_tags=gpu
@test "12 two ranks: a rank that fails stops every rank within seconds, the failed rank named, nothing hangs" {
    need_two_gpus
    for failing in 1 0; do
        other=$((1 - failing))
        SECONDS=0
        # a grace period longer than the check allows: the ranks must stop by themselves
        run --separate-stderr "$ROOT/tests/timed" 90 "$LAUNCH" -n 2 --grace-s 60 "$BIN/$P" $SMALL12 \
            --fail-rank "$failing" --fail-at-batch 5 --timeout-s 10
        assert_equal "$status" 1
        assert_num "$SECONDS" "<" 45 "seconds until every rank had stopped (rank $failing failing)"
        [[ "$stderr" == *"$P rank $failing: stopping at batch 5"* ]] || fail "rank $failing's line: $stderr"
        [[ "$stderr" == *"$P rank $other: rank $failing failed"* ]] || fail "rank $other does not name it: $stderr"
        [[ "$stderr" != *"launch:"* ]] || fail "the launcher had to stop a rank: $stderr"
    done
}

# bats test_tags=gpu
@test "12 more ranks than GPUs: every rank says so with one line, exit code 3" {
    need_gpu12
    run --separate-stderr env CUDA_VISIBLE_DEVICES=0 "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 "$BIN/$P" $SMALL
    assert_equal "$status" 3
    assert_equal "$(grep -c "no usable GPU for this rank: 2 ranks on this machine" <<<"$stderr")" 2
}

# ----------------------------------------------------------------------------
# compute-sanitizer, one rank. memcheck without its leak check: NCCL keeps
# allocations of its own until the process ends; and without reporting API errors:
# NCCL asks cudaFuncGetAttributes about kernels built for other GPUs, and takes the
# error as the answer (the course checks every call of its own and would exit on one).

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer memcheck is clean" {
    need_sanitizer
    need_nccl
    run "$ROOT/tests/timed" 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
        "$BIN/$P" $TINY --bucket-mib 0.01
    assert_success
    assert_output --partial "ERROR SUMMARY: 0 errors"
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer racecheck is clean" {
    need_sanitizer
    need_nccl
    sanitize racecheck "$BIN/$P" $TINY --bucket-mib 0.01
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer synccheck is clean" {
    need_sanitizer
    need_nccl
    sanitize synccheck "$BIN/$P" $TINY --bucket-mib 0.01
}

# bats test_tags=gpu,sanitizer
@test "12 compute-sanitizer initcheck is clean" {
    need_sanitizer
    need_nccl
    sanitize initcheck "$BIN/$P" $TINY --bucket-mib 0.01
}
