#!/usr/bin/env bats
# Lesson 13: pipeline parallelism, the layers cut into stages (one rank and one GPU each),
# every batch into micro-batches, GPipe and 1F1B. Built only where make finds NCCL
# (`make -s nccl-status` says why not); its checks skip with that reason. The one-stage
# checks run on any GPU. Two and four stages run on as many GPUs where they are visible,
# else as simulated nodes on one (tools/launch --simulate-nodes). The schedules themselves
# are checked on paper, no GPU needed. Scored checks (ex:) run the student's loop under the
# test delays where a missing wait is what they look for: it then diverges every time.

load helpers

# every run of several ranks, simulated or not, pays for NCCL's start and its network:
# 16 batches a run (lessons 05-11 run 40), so that the checks fit the suite's time
NB=16
SMALL=${SMALL/--batches 40/--batches $NB}

P=13_pipeline_parallel
# SMALL's model has 4 weight layers (64-256-256-256-8) and 64 samples per batch: two stages
# of two layers each, or four of one; micro-batches of 64 / M samples
SMALL13="$SMALL --micro-batches 4"

setup_file() {
    detect_nccl "$P"
    detect_gpu
}

# one_stage NAME ARGS...: the course's own solution as one stage (the reference of every
# stage count), with --json into $BATS_TEST_TMPDIR/NAME.json.
one_stage() {
    local name=$1
    shift
    run --separate-stderr ref "$P" "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    [ "$status" -eq 0 ] || fail "the course's own one-stage run ($*) failed: $(tail -n 3 <<<"$stderr")"
}

# most_alive: for each line "stage S: F0 F1 B0 ...", the most micro-batches whose forward has
# been issued and whose backward has not, at any point: what the stage must hold at once.
most_alive() {
    awk '/^stage [0-9]+:/ { alive = 0; most = 0
        for (i = 3; i <= NF; i++) { alive += substr($i, 1, 1) == "F" ? 1 : -1; if (alive > most) most = alive }
        printf "%s%d", (n++ ? "," : ""), most } END { print "" }'
}

# schedule_bubble: for the lines "stage S: F0 F1 B0 ..." (--show-schedule), the idle share of the
# step when every stage runs its order, each forward and backward one unit long, a hand-over
# free: a forward of micro-batch i on stage s starts once stage s-1's is done, a backward once
# stage s+1's is (the last stage's once its own forward is). 1 - 2m / (the step's length), to 9
# digits as --json writes it; "deadlock" when the orders wait on each other for ever.
schedule_bubble() {
    awk '/^stage [0-9]+:/ { s = $2 + 0; n[s] = NF - 2; for (k = 3; k <= NF; k++) op[s, k - 3] = $k
                            if (s + 1 > p) p = s + 1; total += NF - 2 }
    END {
        for (s = 0; s < p; s++) { at[s] = 0; free[s] = 0 }
        while (finished < total) {
            moved = 0
            for (s = 0; s < p; s++) {
                if (at[s] >= n[s]) continue
                o = op[s, at[s]]; kind = substr(o, 1, 1); i = substr(o, 2) + 0
                if (kind == "F") after = s == 0 ? "" : "F" SUBSEP (s - 1) SUBSEP i
                else after = s == p - 1 ? "F" SUBSEP s SUBSEP i : "B" SUBSEP (s + 1) SUBSEP i
                if (after != "" && !(after in done)) continue
                t = (after != "" && done[after] > free[s] ? done[after] : free[s]) + 1
                done[kind SUBSEP s SUBSEP i] = t; free[s] = t; at[s]++; finished++; moved = 1
                if (t > step) step = t
            }
            if (!moved) { print "deadlock"; exit }
        }
        printf "%.9g\n", 1 - n[0] / step
    }'
}

# ----------------------------------------------------------------------------
# no GPU needed

# bats test_tags=ex:13-one-f-one-b
@test "13 the schedules printed take (p-1)/(m+p-1) of the step idle, one unit per pass: the bubble the report gives" {
    need_nccl
    for pm in "2 8" "4 2" "3 4" "4 16" "1 4" "4 4"; do
        read -r p m <<<"$pm"
        want=$(awk -v p="$p" -v m="$m" 'BEGIN { printf "%.9g\n", (p - 1) / (m + p - 1) }')
        for schedule in 1f1b gpipe; do
            run prog "$P" --show-schedule --stages "$p" --micro-batches "$m" --layers 4 --schedule $schedule
            assert_success
            assert_equal "$(schedule_bubble <<<"$output")" "$want"
        done
    done
    # the simulation itself: a stage that waits for an error before sending its forward; a last
    # stage that takes its backwards in the wrong order idles 3 of 7 units, not (p-1)/(m+p-1) = 1/3
    assert_equal "$(printf 'stage 0: B0 F0\nstage 1: F0 B0\n' | schedule_bubble)" deadlock
    assert_equal "$(printf 'stage 0: F0 F1 B0 B1\nstage 1: F0 F1 B1 B0\n' | schedule_bubble)" 0.428571429
}

@test "13 builds, and --help lists its options, one default each inside its range, and how to run ranks on one GPU" {
    need_nccl
    check_help "$P"
    for option in --stages --micro-batches --schedule --show-schedule --rendezvous --timeout-s --fault --fault-rank \
        --fault-at-batch --delay-on --trace --json --post-recv --p2p-group --link-ctas --gemm-sms; do
        assert_output --partial -- "$option"
    done
    assert_output --partial "tools/launch -n 2 --simulate-nodes"
}

@test "13 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_training_options "$P"
    check_rejects "$P" stages abc -1 10 1.5
    check_rejects "$P" micro-batches abc 0 -1 65537 1.5
    check_rejects "$P" schedule abc 1 both 1F1B
    check_rejects "$P" p2p-group abc 1 both pair
    # and takes its two words (no GPU here: exit code 3, once the options are read)
    for g in none pairs; do
        run --separate-stderr env CUDA_VISIBLE_DEVICES= "$BIN/$P" $SMALL13 --p2p-group "$g"
        assert_equal "$status" 3
    done
    check_dist_rejects "$P"
}

@test "13 refuses more stages than ranks or layers, micro-batches not dividing the batch, an impossible fault: one line" {
    need_nccl
    # each (check_refused): the environment, the arguments; exit code 2 and one line on stderr
    d=$BATS_TEST_TMPDIR
    check_refused X=1 "$BIN/$P" $SMALL --stages 2  # one rank: one stage
    [[ "$stderr" == *"--stages 2"*"1 rank"* ]] || fail "two stages on one rank: $stderr"
    check_refused RANK=0 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --stages 1
    [[ "$stderr" == "$P rank 0: --stages 1"* ]] || fail "one stage on two ranks: $stderr"
    check_refused RANK=1 WORLD_SIZE=3 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --layers 1  # 3 stages, 2 layers
    [[ "$stderr" == *"--stages 3"*"2 weight layers"* ]] || fail "more stages than layers: $stderr"
    check_refused X=1 "$BIN/$P" $SMALL --layers 1 --stages 3 --show-schedule
    check_refused X=1 "$BIN/$P" $SMALL --micro-batches 3
    [[ "$stderr" == *"--batch 64"*"--micro-batches 3"* ]] || fail "uneven micro-batches: $stderr"
    check_refused X=1 "$BIN/$P" $SMALL --micro-batches 128
    check_refused RANK=1 WORLD_SIZE=2 RENDEZVOUS_DIR="$d" "$BIN/$P" $SMALL --fault error --fault-rank 2 --fault-at-batch 3
    [[ "$stderr" == *"--fault-rank 2"* ]] || fail "fault-rank: $stderr"
    check_refused X=1 "$BIN/$P" $SMALL --fault-rank 0 --fault-at-batch 3
    check_refused X=1 "$BIN/$P" $SMALL --fault hang
    check_refused X=1 "$BIN/$P" $SMALL --fault error --fault-rank 0 --fault-at-batch $NB
    check_refused RANK=0 WORLD_SIZE=2 "$BIN/$P" $SMALL
    [[ "$stderr" == *"rendezvous"* ]] || fail "no folder: $stderr"
    # nothing left behind in the folder by a refused start
    [ -z "$(ls -A "$d" | grep -E '^(failed|nccl-id)\.')" ] || fail "files left in the folder: $(ls -A "$d")"
}

@test "13 without a GPU says so and exits with code 3, on one rank or two" {
    need_nccl
    check_no_gpu_ranks "$P" $SMALL
}

# bats test_tags=ex:13-one-f-one-b
@test "13 the schedules on paper: 1F1B is Megatron-LM's (p - s - 1 warm-up forwards), holding p - s; GPipe holds M" {
    need_nccl
    run prog "$P" --show-schedule --stages 4 --micro-batches 8
    assert_success
    assert_line "stage 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"
    assert_line "stage 1: F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7"
    assert_line "stage 2: F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7"
    assert_line "stage 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"
    assert_equal "$(most_alive <<<"$output")" "4,3,2,1"
    # fewer micro-batches than stages: the warm-up stops at M
    run prog "$P" --show-schedule --stages 4 --micro-batches 2
    assert_success
    assert_line "stage 0: F0 F1 B0 B1"
    assert_line "stage 3: F0 B0 F1 B1"
    # one stage: forward and backward in turn, one micro-batch held
    run prog "$P" --show-schedule --stages 1 --micro-batches 4
    assert_success
    assert_line "stage 0: F0 B0 F1 B1 F2 B2 F3 B3"
    for pm in "2 8" "3 4" "4 16" "4 4"; do
        read -r p m <<<"$pm"
        run prog "$P" --show-schedule --stages "$p" --micro-batches "$m" --layers 3
        assert_success
        want=$(for ((s = 0; s < p; s++)); do printf '%s%d' "$([ "$s" -gt 0 ] && echo ,)" $((p - s < m ? p - s : m)); done)
        assert_equal "$(most_alive <<<"$output")" "$want"
        run prog "$P" --show-schedule --stages "$p" --micro-batches "$m" --layers 3 --schedule gpipe
        assert_success
        assert_equal "$(most_alive <<<"$output")" "$(for ((s = 0; s < p; s++)); do printf '%s%d' "$([ "$s" -gt 0 ] && echo ,)" "$m"; done)"
    done
}

@test "13 --p2p-group pairs on paper: every order of 2-4 stages and 1-16 micro-batches ends; 1F1B ungrouped deadlocks" {
    need_nccl
    for schedule in 1f1b gpipe; do
        for p in 2 3 4; do
            for m in 1 2 4 8 16; do
                run prog "$P" $SMALL --layers 3 --show-schedule --schedule "$schedule" --stages "$p" --micro-batches "$m"
                assert_success
                assert_equal "$schedule $p $m: $(p2p_model pairs <<<"$output")" "$schedule $p $m: ends"
                # the model can fail: the cycle "Deadlock freedom" describes (notes/13), one call at a time
                if [ "$schedule" = 1f1b ] && [ "$m" -ge 2 ]; then
                    assert_equal "$schedule $p $m apart: $(p2p_model apart <<<"$output")" "$schedule $p $m apart: deadlock"
                fi
            done
        done
    done
}

@test "13 tracestat: compute_busy leaves NCCL's kernels out (a stage's bubble), per process in a merged trace" {
    # two hand-made stage traces; stage 1's clock starts 100 us after stage 0's
    for r in 0 1; do
        if [ "$r" = 0 ]; then a=100 ad=300 b=500 bd=100 base=1000000000000; else a=0 ad=200 b=600 bd=200 base=1000000100000; fi
        cat >"$BATS_TEST_TMPDIR/r$r.json" <<EOF
{"traceEvents":[
{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"$P rank $r"}},
{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main","kind":"main"}},
{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"compute","kind":"stream"}},
{"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"fwd","kind":"stream"}},
{"name":"run","cat":"phase","ph":"X","ts":0.000,"dur":1000.000,"pid":1,"tid":1,"args":{"batch":-1,"bytes":0,"pageable":0}},
{"name":"sgemm","cat":"kernel","ph":"X","ts":$a.000,"dur":$ad.000,"pid":1,"tid":2,"args":{"batch":-1,"bytes":0,"pageable":0}},
{"name":"ncclDevKernel_SendRecv","cat":"kernel","ph":"X","ts":350.000,"dur":350.000,"pid":1,"tid":3,"args":{"batch":-1,"bytes":0,"pageable":0}},
{"name":"bias_act_kernel","cat":"kernel","ph":"X","ts":$b.000,"dur":$bd.000,"pid":1,"tid":2,"args":{"batch":-1,"bytes":0,"pageable":0}}
],"displayTimeUnit":"ms","otherData":{"program":"$P rank $r","dropped":0,"base_ns":$base}}
EOF
    done
    # stage 0: 300 + 100 us of its own kernels in a 1000 us window; the NCCL kernel does not count
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/r0.json" --window run >"$BATS_TEST_TMPDIR/s0.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s0.txt" compute_busy)" 0.400000
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/r1.json" --window run >"$BATS_TEST_TMPDIR/s1.txt"
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s1.txt" compute_busy)" 0.400000
    m=$BATS_TEST_TMPDIR/m.json
    run "$TOOLS/tracestat" --merge "$m" "$BATS_TEST_TMPDIR/r0.json" "$BATS_TEST_TMPDIR/r1.json"
    assert_success
    # the merged window is stage 1's run (the later one): 100 to 1100 us on stage 0's clock
    "$TOOLS/tracestat" "$m" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_equal "$(kv_get "$s" "compute_busy\\[$P rank 0\\]")" 0.400000  # 100-400 and 500-600: all inside
    assert_equal "$(kv_get "$s" "compute_busy\\[$P rank 1\\]")" 0.400000  # 100-300 and 700-900
    assert_equal "$(kv_get "$s" compute_busy)" 0.600000  # the union: 100-400, 500-600, 700-900 of 1000
}

# ----------------------------------------------------------------------------
# one stage: any GPU

# assert_one_stage_run M: the run of $BATS_TEST_TMPDIR/v.json (f), one stage of M micro-batches, was
# verified: both schedules, round-robin, every run bit-identical to the reference, every loss taken once
assert_one_stage_run() {
    local m=$1
    f=$BATS_TEST_TMPDIR/v.json
    assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" losses_once)" "true true"
    assert_equal "$(json_get "$f" losses_taken)" "$NB"
    assert_equal "$(json_get "$f" runs_identical)" true
    assert_equal "$(json_get "$f" ranks_verified)" true
    assert_equal "$(json_get "$f" stages)" 1
    assert_equal "$(json_get "$f" micro_batch)" $((64 / m))
    # both schedules ran, round-robin, every run checked: (1 warm-up + 2 timed) x 2
    assert_equal "$(json_get "$f" runs_checked)" 6
    assert_num "$(json_get "$f" 1f1b_step_ms)" ">" 0 "the 1f1b schedule's step"
    assert_num "$(json_get "$f" gpipe_step_ms)" ">" 0 "the gpipe schedule's step"
}

# rel A B: |A - B| / B
rel() {
    awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; print d / b }'
}

# Not tagged ex:13-accumulate: with one micro-batch a backward pass replaces the gradients whatever
# the exercise says (nothing to add to), and the reference's too.
# bats test_tags=gpu,ex:13-one-f-one-b,ex:13-slot-return
@test "13 one stage, one micro-batch: both schedules bit-identical to the reference and to lesson 06 under every test delay" {
    need_nccl_gpu
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    a=$BATS_TEST_TMPDIR/a.json
    for delay in "${DELAYS[@]}"; do
        # shellcheck disable=SC2086
        run_json v "$P" $SMALL --micro-batches 1 $delay
        [ "$status" -eq 0 ] || fail "one micro-batch $delay: not verified (exit code $status)"
        assert_one_stage_run 1
        assert_equal "$(json_get "$f" loss_checksum) $(json_get "$f" weights_checksum)" \
            "$(json_get "$a" loss_checksum) $(json_get "$a" weights_checksum)"
    done
}

# bats test_tags=gpu,ex:13-one-f-one-b,ex:13-accumulate,ex:13-slot-return
@test "13 one stage, 4 micro-batches: both schedules bit-identical under every delay, 06's losses within 1e-4; 8, GPipe first" {
    need_nccl_gpu
    run --separate-stderr ref 06_per_batch_sync $SMALL --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    for delay in "${DELAYS[@]}"; do
        # shellcheck disable=SC2086
        run_json v "$P" $SMALL13 $delay
        [ "$status" -eq 0 ] || fail "four micro-batches $delay: not verified (exit code $status)"
        assert_one_stage_run 4
        # four micro-batches sum each gradient in four parts: other roundings, the same training
        for key in loss_first loss_last; do
            assert_num "$(rel "$(json_get "$f" $key)" "$(json_get "$BATS_TEST_TMPDIR/a.json" $key)")" "<=" 1e-4 \
                "$key: four micro-batches against 06, relative ($delay)"
        done
    done
    run_json v "$P" $SMALL --micro-batches 8 --schedule gpipe
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" matches_reference)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" schedule)" gpipe
}

# bats test_tags=gpu,ex:13-one-f-one-b,ex:13-slot-return
@test "13 one stage: nothing crosses; 1F1B holds one micro-batch's activations, GPipe all M" {
    need_nccl_gpu
    for m in 4 8; do
        run_json r "$P" $SMALL --micro-batches $m
        assert_success
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" act_crossings) $(json_get "$f" error_crossings)" "0 0"
        assert_equal "$(json_get "$f" crossings_once)" true
        assert_equal "$(json_get "$f" 1f1b_peak_slots)" 1
        assert_equal "$(json_get "$f" gpipe_peak_slots)" $m
        # the bytes, measured by the allocator, follow the slots counted by the pool: GPipe's are M times 1F1B's
        assert_equal "$(json_get "$f" gpipe_peak_act_bytes)" $(($(json_get "$f" 1f1b_peak_act_bytes) * m))
        assert_num "$(json_get "$f" 1f1b_peak_act_bytes)" ">" 0 "bytes of one slot"
    done
}

# bats test_tags=gpu,ex:13-one-f-one-b
@test "13 one stage, trace: every micro-batch's kernels on the compute track, one update per step, no NCCL kernel" {
    need_nccl_gpu
    run --separate-stderr prog "$P" $SMALL13 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --check
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.json" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    n=$NB m=4 L=4
    assert_equal "$(kv_get "$s" 'kernel_count\[loss_kernel\]')" $((n * m))
    assert_equal "$(kv_get "$s" 'kernel_count\[bias_act_kernel\]')" $((n * m * L))
    assert_equal "$(kv_get "$s" 'kernel_count\[bias_grad_kernel\]')" $((n * m * L))
    assert_equal "$(kv_get "$s" 'kernel_count\[relu_back_kernel\]')" $((n * m * (L - 1)))
    assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" $n
    assert_equal "$(kv_get "$s" comm_kernels)" 0
    assert_equal "$(kv_get "$s" h2d)" $((n * m * 2))  # features and targets of every micro-batch
    assert_equal "$(kv_get "$s" dropped)" 0
}

# ----------------------------------------------------------------------------
# two and four stages: as many GPUs, or simulated nodes on one

# assert_stages_match P M DELAY ARGS...: P stages with M micro-batches (both schedules, round-robin),
# under DELAY ("" or a test delay), give the one-stage run's losses and every layer's weights, bit for
# bit, on every rank, every loss taken once; every activation and error crosses each of the P - 1
# boundaries once per micro-batch and batch; stage s holds at most the slots its schedule needs
# (1F1B: min(P - s, M); GPipe: M). The course's own one-stage run (ARGS, no delay: a delay changes
# no bit) is in $BATS_TEST_TMPDIR/a.json.
assert_stages_match() {
    local p=$1 m=$2 delay=$3 n
    shift 3
    one_stage a $SMALL --micro-batches "$m" --reps 1 --warmup 0 "$@"
    # shellcheck disable=SC2086
    run_ranks "$p" r "$P" $SMALL --micro-batches "$m" --reps 1 --warmup 0 "$@" $delay
    [ "$status" -eq 0 ] || fail "$p stages, $m micro-batches $* $delay: not verified (exit code $status)"
    f=$BATS_TEST_TMPDIR/r.json a=$BATS_TEST_TMPDIR/a.json
    assert_equal "$(json_get "$f" world_size) $(json_get "$f" stages)" "$p $p"
    assert_equal "$(json_get "$f" matches_reference)" true  # on rank 0, against its own one-stage reference
    assert_equal "$(json_get "$f" ranks_verified)" true     # ... and on every other rank
    assert_equal "$(json_get "$f" runs_identical)" true     # both schedules, every run
    assert_equal "$(json_get "$f" losses_once) $(json_get "$f" crossings_once)" "true true"
    assert_equal "$(json_get "$f" loss_checksum)" "$(json_get "$a" loss_checksum)"
    assert_equal "$(json_get "$f" layer_checksums)" "$(json_get "$a" layer_checksums)"
    # counted here, not by the program: each way, (P - 1) x M x batches
    n=$(((p - 1) * m * $(json_get "$f" batches)))
    assert_equal "$(json_get "$f" act_crossings) $(json_get "$f" error_crossings)" "$n $n"
    assert_equal "$(json_get "$f" 1f1b_peak_slots_per_stage)" "$(peak_slots 1f1b "$p" "$m")"
    assert_equal "$(json_get "$f" gpipe_peak_slots_per_stage)" "$(peak_slots gpipe "$p" "$m")"
}

# grouped_sends SCHEDULE P M BATCHES: "N0,N1,...", the sends stage s posts in one group with a receive
# under --p2p-group pairs in a run of BATCHES batches: in its order (--show-schedule), each operation
# that ends with a send (a forward but on the last stage, a backward but on the first) followed by one
# that begins with a receive (a forward but on the first stage, a backward but on the last)
grouped_sends() {
    run prog "$P" $SMALL --show-schedule --schedule "$1" --stages "$2" --micro-batches "$3"
    assert_success
    awk -v n="$4" '/^stage [0-9]+:/ { s = $2 + 0; line[s] = $0; if (s + 1 > p) p = s + 1 }
    END {
        for (s = 0; s < p; s++) {
            k = split(line[s], op, " "); c = 0
            for (i = 3; i < k; i++) {
                sends = substr(op[i], 1, 1) == "F" ? s < p - 1 : s > 0
                receives = substr(op[i + 1], 1, 1) == "F" ? s > 0 : s < p - 1
                c += sends && receives
            }
            printf "%s%d", (s ? "," : ""), c * n
        }
        print ""
    }' <<<"$output"
}

# p2p_model MODE: for the lines "stage S: F0 F1 B0 ..." (--show-schedule), two batches of every
# stage's hand-overs on ONE communicator per rank, whose calls NCCL runs in one queue, group after
# group; a call ends once it meets its peer's matching call in the peer's current group (a send
# completes only with its receive). MODE pairs: each send in one group with the receive after it
# (--p2p-group pairs); apart: every call alone. "ends", or "deadlock" when no queue can move.
p2p_model() {
    awk -v mode="$1" '
        function add(s, kind, peer, tag) { k = ++n[s, G[s]]; K[s, G[s], k] = kind; P[s, G[s], k] = peer; T[s, G[s], k] = tag }
        function close_group(s) { if (open[s]) { G[s]++; open[s] = 0 } }
        /^stage [0-9]+:/ { s = $2 + 0; line[s] = $0; if (s + 1 > p) p = s + 1 }
        END {
            for (s = 0; s < p; s++) {
                G[s] = 0; open[s] = 0; m = split(line[s], op, " ")
                for (b = 0; b < 2; b++) {
                    for (i = 3; i <= m; i++) {
                        f = substr(op[i], 1, 1) == "F"; mb = substr(op[i], 2)
                        begins = f ? s > 0 : s < p - 1
                        if (!begins || mode == "apart") close_group(s)
                        if (begins) { add(s, "R", f ? s - 1 : s + 1, (f ? "a" : "e") b ":" mb); if (open[s]) close_group(s); else G[s]++ }
                        if (f ? s < p - 1 : s > 0) { close_group(s); add(s, "S", f ? s + 1 : s - 1, (f ? "a" : "e") b ":" mb); open[s] = 1 }
                    }
                    close_group(s)
                }
            }
            for (s = 0; s < p; s++) cur[s] = 0
            while (1) {
                moved = 0; finished = 1
                for (s = 0; s < p; s++) {
                    if (cur[s] >= G[s]) continue
                    finished = 0; g = cur[s]
                    for (i = 1; i <= n[s, g]; i++) {
                        if ((s, g, i) in done) continue
                        q = P[s, g, i]; h = cur[q]
                        if (h >= G[q]) continue
                        for (j = 1; j <= n[q, h]; j++)
                            if (!((q, h, j) in done) && P[q, h, j] == s && T[q, h, j] == T[s, g, i] && K[q, h, j] != K[s, g, i]) {
                                done[s, g, i] = 1; done[q, h, j] = 1; moved = 1; break
                            }
                    }
                }
                for (s = 0; s < p; s++) {
                    if (cur[s] >= G[s]) continue
                    all = 1
                    for (i = 1; i <= n[s, cur[s]]; i++) if (!((s, cur[s], i) in done)) all = 0
                    if (all) { cur[s]++; moved = 1 }
                }
                if (finished) { print "ends"; exit }
                if (!moved) { print "deadlock"; exit }
            }
        }
    '
}

# peak_slots SCHEDULE P M: "N0,N1,...", the micro-batches stage s of P holds at most: 1F1B min(P - s, M), GPipe M
peak_slots() {
    local s
    for ((s = 0; s < $2; s++)); do
        [ "$s" -eq 0 ] || printf ,
        if [ "$1" = 1f1b ]; then printf '%d' $(($2 - s < $3 ? $2 - s : $3)); else printf '%d' "$3"; fi
    done
}

# The checks of bits give each run one test delay: a delay changes no bit, and a missing wait
# diverges under its delay whatever M (13-recv-wait with the copies and hand-overs held back,
# 13-send-after-forward with the compute). The compute is held back where stage 0 reuses a slot
# within a batch under 1F1B (M > P): a slot refilled before its backward pass has read it diverges.
# Four stages: 4 batches a run (every run of four simulated nodes pays for their loopback
# sockets; a missing wait or a wrong schedule shows in the first batch's bits).

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-recv-wait,ex:13-send-after-forward,ex:13-accumulate,ex:13-slot-return
@test "13 two stages, 1, 2 and 4 micro-batches: the one-stage run's bits, without delay, copies held back, then compute" {
    need_nccl_gpu
    for mk in "1 0" "2 1" "4 2"; do
        read -r m k <<<"$mk"
        assert_stages_match 2 "$m" "${DELAYS[k]}"
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" stage_layers)" "1-2|3-4"
    done
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-accumulate,ex:13-slot-return
@test "13 two stages, 8 micro-batches, GPipe first: one stage's bits, each hand-over once, slots 2 and 1 (1F1B), 8" {
    need_nccl_gpu
    assert_stages_match 2 8 "" --schedule gpipe
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" schedule) $(json_get "$BATS_TEST_TMPDIR/r.json" stage_layers)" "gpipe 1-2|3-4"
}

# bats test_tags=gpu,ranks,claim:13-torchrun
@test "13 under torchrun --standalone --no-python, two stages: verified, the bits of tools/launch (losses, every layer)" {
    need_nccl_gpu
    assert_torchrun_like_launch "$P" "loss_checksum layer_checksums" $SMALL13
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" matches_reference)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" ranks_verified)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" stages)" 2
}

# Four stages, each micro-batch count once, each under one test delay in turn, a check each (a
# run of four simulated stages takes up to 40 s on one H100: three in one check passed the suite's
# 120 s): 1 without a delay, 2 with the copies held back, 4 the compute, 8 the copies, 16 the compute.
# assert_four_stages M DELAY: that run
assert_four_stages() {
    need_nccl_gpu
    assert_stages_match 4 "$1" "$2" --batches 4
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" stage_layers)" "1|2|3|4"
}

# (one micro-batch: nothing to accumulate, so not a check of 13-accumulate)
# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-slot-return
@test "13 four stages, 1 micro-batch: the one-stage run's bits" {
    assert_four_stages 1 ""
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-recv-wait,ex:13-accumulate,ex:13-slot-return
@test "13 four stages, 2 micro-batches, copies held back: the one-stage run's bits" {
    assert_four_stages 2 "${DELAYS[1]}"
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-send-after-forward,ex:13-accumulate,ex:13-slot-return
@test "13 four stages, 4 micro-batches, compute held back: the one-stage run's bits" {
    assert_four_stages 4 "${DELAYS[2]}"
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-recv-wait,ex:13-accumulate,ex:13-slot-return
@test "13 four stages, 8 micro-batches, copies held back: the one-stage run's bits" {
    assert_four_stages 8 "${DELAYS[1]}"
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b,ex:13-send-after-forward,ex:13-accumulate,ex:13-slot-return
@test "13 four stages, 16 micro-batches, compute held back: the one-stage run's bits" {
    assert_four_stages 16 "${DELAYS[2]}"
}

# bats test_tags=ranks,gpu
@test "13 --p2p-group pairs: each send in one group with the receive after it, one communicator; the one-stage run's bits" {
    need_nccl_gpu
    # --warmup 1: the counts are the last run's, after the first has allocated every slot (an
    # allocation ends an open group: it may wait for the GPU)
    for pm in "2 4" "4 8"; do
        read -r p m <<<"$pm"
        b=""
        if [ "$p" -eq 4 ]; then b="--batches 4"; fi
        # shellcheck disable=SC2086
        assert_stages_match "$p" "$m" "" $b --warmup 1 --p2p-group pairs
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" p2p_group)" pairs
        n=$(json_get "$f" batches)
        assert_equal "$(json_get "$f" 1f1b_p2p_pairs_per_stage)" "$(grouped_sends 1f1b "$p" "$m" "$n")"
        assert_equal "$(json_get "$f" gpipe_p2p_pairs_per_stage)" "$(grouped_sends gpipe "$p" "$m" "$n")"
    done
    # the hand-overs held back, then the compute: a record before its group's end diverges here
    assert_stages_match 2 4 "${DELAYS[1]}" --warmup 1 --p2p-group pairs
    assert_stages_match 2 4 "${DELAYS[2]}" --warmup 1 --p2p-group pairs
    # apart, the default: nothing grouped
    run_ranks 2 d "$P" $SMALL13 --reps 1 --warmup 1
    assert_success
    f=$BATS_TEST_TMPDIR/d.json
    assert_equal "$(json_get "$f" p2p_group)" none
    assert_equal "$(json_get "$f" 1f1b_p2p_pairs_per_stage) $(json_get "$f" gpipe_p2p_pairs_per_stage)" "0,0 0,0"
}

# bats test_tags=ranks,gpu
@test "13 the bubble the report predicts is the idle share of the schedule it runs, its stages and micro-batches" {
    need_nccl_gpu
    for pm in "2 8" "4 2"; do
        read -r p m <<<"$pm"
        run prog "$P" $SMALL --show-schedule --stages "$p" --micro-batches "$m"
        assert_success
        want=$(schedule_bubble <<<"$output")
        run_ranks "$p" r "$P" $SMALL --micro-batches "$m" --reps 1 --warmup 0
        assert_success
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/r.json" bubble_model)" "$want"
    done
}

# bats test_tags=ranks,gpu
@test "13 two stages, trace: a receive posted late runs only while compute waits for it, one posted early beside it" {
    need_nccl_gpu
    for mode in late early; do
        run_ranks 2 $mode "$P" $SMALL13 --reps 1 --warmup 0 --post-recv $mode --trace "$BATS_TEST_TMPDIR/$mode.json"
        assert_success
        # stage 0 receives only errors, on its bwd track: during how many did a product start?
        bwd=$(trace_kernels "$BATS_TEST_TMPDIR/$mode.rank0.json" run bwd)
        compute=$(trace_kernels "$BATS_TEST_TMPDIR/$mode.rank0.json" run compute)
        assert_equal "$(jq length <<<"$bwd")" $((NB * 4))  # one receive per micro-batch and batch
        eval "$mode=$(started_during "$bwd" "$compute")"
    done
    assert_equal "$late" 0  # the compute stream waits for the receive it recorded `wanted` for
    assert_num "$early" ">=" "$NB" "early: receives with a compute kernel starting beside them (one a batch at least)"
}

# bats test_tags=ranks,gpu,ex:13-one-f-one-b
@test "13 two stages, traces: one per rank, merged with a process row each; every hand-over an NCCL kernel on fwd or bwd" {
    need_nccl_gpu
    run_ranks 2 r "$P" $SMALL13 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    for r in 0 1; do
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank$r.json" --check
        assert_success
        s=$BATS_TEST_TMPDIR/s$r.txt
        "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/t.rank$r.json" --window run >"$s"
        for track in fwd bwd; do
            [[ ",$(kv_get "$s" tracks)," == *",$track,"* ]] || fail "rank $r: no $track track: $(kv_get "$s" tracks)"
        done
        # NB batches x 4 micro-batches, one way and the other, and the broadcast of the run's losses
        assert_equal "$(kv_get "$s" comm_kernels)" $((NB * 4 * 2 + 1))
        assert_equal "$(kv_get "$s" 'kernel_count\[bias_act_kernel\]')" $((NB * 4 * 2))  # two layers per stage
        assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" "$NB"
        assert_equal "$(kv_get "$s" dropped)" 0
    done
    assert_equal "$(kv_get "$BATS_TEST_TMPDIR/s1.txt" 'kernel_count\[loss_kernel\]')" $((NB * 4))  # the last stage's
    run "$TOOLS/tracestat" --merge "$BATS_TEST_TMPDIR/m.json" "$BATS_TEST_TMPDIR/t.rank0.json" "$BATS_TEST_TMPDIR/t.rank1.json"
    assert_success
    assert_equal "$(grep -c '"name":"process_name"' "$BATS_TEST_TMPDIR/m.json")" 2
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/m.json" --check
    assert_success
}

# bats test_tags=ranks,gpu,timed,deadline,claim:13-note-names
@test "13 a stage that fails stops every stage well under the time limit (its note), the failed one named, two and four stages" {
    need_nccl_gpu
    assert_stops_by_note "$P" 2 $SMALL13
    assert_stops_by_note "$P" 4 $SMALL13
}

# bats test_tags=ranks,gpu,timed,deadline,claim:13-timeout
@test "13 a stage that hangs: every stage gives up by itself after --timeout-s, and says so" {
    need_nccl_gpu
    assert_stops_by_timeout "$P" 2 $SMALL13
}

# bats test_tags=ranks,gpu
@test "13 two stages on one visible GPU, not simulated: every rank says so with one line, exit code 3" {
    need_nccl_gpu
    run --separate-stderr env CUDA_VISIBLE_DEVICES=0 "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 "$BIN/$P" $SMALL
    assert_equal "$status" 3
    assert_equal "$(grep -c "no usable GPU for this rank: 2 ranks on this machine.*--simulate-nodes" <<<"$stderr")" 2
}

# Checks of speed: separate GPUs only (simulated nodes time loopback sockets). Two nearly
# equal halves (notes/13), no host work: one micro-batch leaves each stage idle half the
# step, eight about a ninth ((p-1)/(m+p-1)): 9/16 of one's step by the model; 0.8 allowed
# (an eighth of the batch makes slower matrix products); stages that do not overlap take 1 or more.
# bats test_tags=ranks,gpu,timed,speed
@test "13 two GPUs, speed: eight micro-batches take at most 0.8 of one's step, both schedules" {
    need_separate_gpus 2
    local h13="--hidden 8192 --layers 3 --batch 1024 --prep-work 0 --batches 12 --reps 3 --warmup 1"
    run_ranks 2 m1 "$P" $h13 --micro-batches 1
    assert_success
    run_ranks 2 m8 "$P" $h13 --micro-batches 8
    assert_success
    for f in m1 m8; do assert_equal "$(json_get "$BATS_TEST_TMPDIR/$f.json" performance)" true; done
    for s in 1f1b gpipe; do
        one=$(json_get "$BATS_TEST_TMPDIR/m1.json" "${s}_step_ms")
        assert_num "$(json_get "$BATS_TEST_TMPDIR/m8.json" "${s}_step_ms")" "<=" \
            "$(awk -v x="$one" 'BEGIN { print 0.8 * x }')" "$s: step with 8 micro-batches against 0.8 x one's"
    done
}

# ----------------------------------------------------------------------------
# compute-sanitizer, one stage: the course's set (helpers.bash, sanitizer_check), with its run and
# the reason memcheck differs for a lesson on NCCL

# bats test_tags=gpu,sanitizer
@test "13 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "13 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "13 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "13 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
