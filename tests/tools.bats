#!/usr/bin/env bats
# The tools of lessons 12 and 13's figures, without a GPU: tools/multi-gpu-figures' help and
# refusals, and tools/bench's tables of 12 and 13 made from stored runs (BENCH_REPORT_ONLY):
# the JSON of hand-made runs and hand-made rank traces (tests/fixtures/bench), which the
# bench measures with tracestat as it would a real run's. Then what every lesson of several
# ranks stands on, without a GPU: tools/launch's signals and refusals, the files of this user
# alone (common/own_file), the tests' fsync log (tests/fsync-log.c), and lessons 14 and
# 16's report tools fed mutated rings and checkpoints under the sanitizers.

load helpers

FIG=$ROOT/tools/multi-gpu-figures

# refused_without_gpu NAME DIR COMMAND...: COMMAND, no GPU visible, ends with exit code 3 and one
# line on stderr, "NAME: no usable GPU (why)", having written nothing into DIR
refused_without_gpu() {
    local name=$1 dir=$2
    shift 2
    run --separate-stderr env CUDA_VISIBLE_DEVICES= "$@"
    assert_equal "$status" 3
    assert_equal "$(grep -c . <<<"$stderr")" 1
    [[ "$stderr" == "$name: no usable GPU ("* ]] || fail "$stderr"
    [ ! -e "$dir" ] || fail "it wrote $(ls "$dir")"
}

# bench_table OUT: the bench's table from the fixtures copied into OUT (one round)
bench_table() {
    run env BENCH_OUT="$1" BENCH_REPORT_ONLY=1 BENCH_ROUNDS=1 BENCH_DEVICE="fixture GPU" BENCH_DRIVER=0 \
        BENCH_TRACESTAT="$TOOLS/tracestat" COURSE_BIN="$REF_BIN" "$ROOT/tools/bench"
    assert_success
}

# row LESSON TEXT: the one row of LESSON's tables (its ### section) that starts with "| TEXT |"
row() {
    local found
    found=$(awk -v s="### $1:" 'index($0, "### ") == 1 { on = index($0, s) == 1 } on' <<<"$output" |
        grep -F "| $2 |")
    [ "$(grep -c . <<<"$found")" -eq 1 ] || fail "expected one row '| $2 |' in $1's tables, got: $found"
    echo "$found"
}

@test "tools: multi-gpu-figures --help says what it runs, where it writes, its options and exit codes" {
    run "$FIG" --help
    assert_success
    for want in "tools/bench" "tools/timelines" "--filter-tags speed" "DATE-multi-gpu.md" "--simulate-nodes" \
        "--out DIR" "--img DIR" "--rounds N" "tools/pack-tools" "3 no usable GPU"; do
        assert_output --partial "$want"
    done
    [ "$(awk 'length($0) > 120' <<<"$output")" = "" ] || fail "help lines over 120 columns"
}

@test "tools: multi-gpu-figures refuses bad usage with exit code 2 and one line" {
    for args in "--rounds 0" "--rounds x" "--out" "--frobnicate"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$FIG" $args
        assert_equal "$status" 2
        assert_equal "$(grep -c . <<<"$stderr")" 1
        [[ "$stderr" == "multi-gpu-figures: "* ]] || fail "$args: $stderr"
    done
}

@test "tools: multi-gpu-figures without a GPU: exit code 3, one line saying why, nothing written" {
    [ -x "$TOOLS/gpu-probe" ] || skip "$TOOLS/gpu-probe is not built (run make)"
    refused_without_gpu multi-gpu-figures "$BATS_TEST_TMPDIR/out" env COURSE_BIN="$REF_BIN" "$FIG" \
        --out "$BATS_TEST_TMPDIR/out"
}

@test "tools: bench's tables of 12 and 13 from stored runs: the traces measured per rank, targets judged" {
    o=$BATS_TEST_TMPDIR/b
    cp -r "$FIXTURES/bench" "$o"
    bench_table "$o"
    refute_output --partial "simulated nodes"
    # the traces, measured now: every rank, both windows
    assert_equal "$(jq '.ranks | length' "$o/r1_12t2s.json")" 2
    assert_equal "$(jq '.ranks[1].run.comm_hideable_exposed_ms' "$o/r1_12t2s.json")" 0.06
    assert_equal "$(jq '.ranks[0].gpipe.compute_busy' "$o/r1_13t4s.json")" 0.5
    # 12: one rank, no hidden share; two: the worst rank's, from the trace (rank 0: 1 - 10/210, rank 1: 1 - 60/210)
    [[ "$(row 12 1)" == *"| - |" ]] || fail "one rank shows a hidden share: $(row 12 1)"
    [[ "$(row 12 2)" == *"| 0.71 [0.71 - 0.71] |" ]] || fail "two ranks: $(row 12 2)"
    [[ "$(row 12 "scaling, 2 ranks / 2 x one")" == *"| 0.98 [0.98 - 0.98] | >= 0.95 | yes |" ]] || fail
    [[ "$(row 12 "hidden of what can hide, worst rank (trace)")" == *"| >= 0.9 | NO |" ]] || fail
    b=$(row 12 buckets)
    [[ "$b" == *"| 0.95 [0.95 - 0.95] / 0.71 [0.71 - 0.71] |"* ]] || fail "hidden per rank: $b"
    [[ "$b" == *"| 0.045 [0.045 - 0.045] / 0.070 [0.070 - 0.070] |"* ]] || fail "exposed per step: $b"
    [[ "$b" == *"| 5 [5 - 5] / 5 [5 - 5] (4) |" ]] || fail "kernels: $b"
    [[ "$(row 12 none)" == *"| 0.00 [0.00 - 0.00] / 0.00 [0.00 - 0.00] |"* ]] || fail "none: $(row 12 none)"
    assert_output --partial "Every window holds one NCCL kernel more than batches x buckets"
    # 13: the bubble per stage from the trace (1 - compute_busy), targets at m >= 4 and m = 16 alone
    local bubbles="| 0.400 [0.400 - 0.400] / 0.300 [0.300 - 0.300] | 0.500 [0.500 - 0.500] / 0.600 [0.600 - 0.600] |"
    [[ "$(row 13 4)" == *"$bubbles"* ]] || fail "m = 4: $(row 13 4)"
    [[ "$(row 13 4)" == *"| steps within 5% of the model: yes |" ]] || fail "m = 4: $(row 13 4)"
    [[ "$(row 13 1)" != *within* ]] || fail "m = 1 has no target: $(row 13 1)"
    [[ "$(row 13 16)" == *"within 5% of the model: NO; 1F1B <= p/m of GPipe's activations: yes |" ]] ||
        fail "m = 16: $(row 13 16)"
}

@test "tools: bench's tables of 12 and 13 from simulated runs: every row marked, no target judged" {
    o=$BATS_TEST_TMPDIR/b
    cp -r "$FIXTURES/bench" "$o"
    for f in "$o"/r1_1[23][mrt]*[0-9].json; do
        [ "$(jq .world_size "$f")" = 2 ] || continue
        jq -c '.simulated_nodes = true | .performance = false' "$f" >"$f.new" && mv "$f.new" "$f"
    done
    bench_table "$o"
    assert_line --index 1 --partial "Simulated nodes: not performance"
    # every row of 12's and 13's tables, but 12's one rank (nothing simulated there), is marked
    rows=$(grep -E '^\| ' <<<"$output" | grep -vE '^\| (ranks|figure|variant|m) \|' | grep -vF '| 1 | 4.000')
    assert_equal "$(grep -c . <<<"$rows")" 11  # 12: 2 ranks, 5 figures, 2 windows; 13: m = 1, 4, 16
    unmarked=$(grep -vF "[simulated nodes: not performance]" <<<"$rows" || true)
    [ -z "$unmarked" ] || fail "rows not marked: $unmarked"
    refute_output --regexp '(\| yes \||\| NO \||: yes|: NO)'
    assert_output --partial "| >= 0.95 | not judged (simulated nodes: not performance) |"
    # a trace whose NCCL kernels are not a step's buckets (plus the losses' average) is said untrustworthy
    jq -c '.batches = 3' "$o/r1_12t2.json" >"$o/new" && mv "$o/new" "$o/r1_12t2.json"
    bench_table "$o"
    assert_output --partial "NCCL kernels beyond batches x buckets: -1 (expected 1, the losses' average)"
}

# Lesson 16's rows (tests/fixtures/bench16): a snapshot at auto's interval (10 batches) that stalls
# 0.05 ms against a copy of 8 ms, costs 2% of a 45 ms step, writes at 700 MB/s where dd wrote 824;
# every 10 batches where the disk allows less: 90 of 99 waited.
@test "tools: bench's table of 16 from stored runs: auto's interval, stall, steady cost, writer's rate, judged" {
    o=$BATS_TEST_TMPDIR/b
    cp -r "$FIXTURES/bench16" "$o"
    bench_table "$o"
    [[ "$(row 16 "snapshot, auto")" == "| snapshot, auto | 10 [10 - 10] | 46.200 [46.200 - 46.200] | 45.900 [45.900 - 45.900] | 99 / 99 / 0 / 0 | 0.050 [0.050 - 0.050] |"* ]] ||
        fail "$(row 16 "snapshot, auto")"
    [[ "$(row 16 "snapshot, every 10")" == "| snapshot, every 10 | 10 [10 - 10] | 61.000 [61.000 - 61.000] | 60.750 [60.750 - 60.750] | 99 / 99 / 90 / 0 |"* ]] ||
        fail "$(row 16 "snapshot, every 10")"
    # a stored run from before steady_step_ms: its loop's step stands for it
    [[ "$(row 16 "no checkpoint")" == *"| 45.000 [45.000 - 45.000] | 45.000 [45.000 - 45.000] | - |"* ]] || fail
    assert_output --partial "auto chose every 10 [10 - 10] batches from its first checkpoint: a write of 294.3 [294.3 - 294.3] ms"
    assert_output --partial "A failure loses at most 17 [17 - 17] batches."
    [[ "$(row 16 "snapshot at auto's interval: stall per checkpoint / the weights' copy alone at the pinned rate")" == *"| 0.006 [0.006 - 0.006] | <= 1.2 | yes |" ]] || fail
    [[ "$(row 16 "snapshot at auto's interval: steady cost, share of the step")" == *"| 0.020 [0.020 - 0.020] | <= 0.03 | yes |" ]] || fail
    [[ "$(row 16 "snapshot: the writer's rate / the disk's sequential write with fsync (dd)")" == *"| 0.85 [0.85 - 0.85] | >= 0.8 | yes |" ]] || fail
    [[ "$(row 16 "snapshot every 10 batches (what this disk allows): stall / the copy alone")" == *"| 20.0 [20.0 - 20.0] | | |" ]] || fail
    [[ "$(row 16 "snapshot every 10 batches: steady cost")" == *"| 0.350 [0.350 - 0.350] | | |" ]] || fail
    [[ "$(row 16 "blocking every 10 batches: stall / the copy alone")" == *"| 37.5 [37.5 - 37.5] | | |" ]] || fail
    [[ "$(row 16 "blocking every 10 batches: steady cost")" == *"| 0.600 [0.600 - 0.600] | | |" ]] || fail
    # a disk twice as fast: the writer's rate falls short; a steady step 4% over: the cost does
    jq -c '.disk_write_mbs = 1648' "$o/r1_16d.json" >"$o/new" && mv "$o/new" "$o/r1_16d.json"
    jq -c '.steady_step_ms = 46.8' "$o/r1_16c1.json" >"$o/new" && mv "$o/new" "$o/r1_16c1.json"
    bench_table "$o"
    [[ "$(row 16 "snapshot: the writer's rate / the disk's sequential write with fsync (dd)")" == *"| 0.42 [0.42 - 0.42] | >= 0.8 | NO |" ]] || fail
    [[ "$(row 16 "snapshot at auto's interval: steady cost, share of the step")" == *"| 0.040 [0.040 - 0.040] | <= 0.03 | NO |" ]] || fail
}

# Lesson 14's rows (tests/fixtures/bench14): the fingerprint check every 10 batches 1.1% of a 45 ms
# step, every batch a third.
@test "tools: bench's table of 14 from stored runs: the fingerprint check's cost, judged" {
    o=$BATS_TEST_TMPDIR/b
    cp -r "$FIXTURES/bench14" "$o"
    bench_table "$o"
    [[ "$(row 14 "no fingerprint check")" == "| no fingerprint check | 45.000 [45.000 - 45.000] |" ]] || fail "$(row 14 "no fingerprint check")"
    [[ "$(row 14 "fingerprint check every 10 batches (default): cost, share of the step")" == *"| 0.011 [0.011 - 0.011] | <= 0.03 | yes |" ]] || fail
    [[ "$(row 14 "fingerprint check every batch: cost")" == *"| 0.333 [0.333 - 0.333] | | |" ]] || fail
    # a check that costs 4% of the step: not met
    jq -c '.loop_step_ms = 46.8' "$o/r1_14f1.json" >"$o/new" && mv "$o/new" "$o/r1_14f1.json"
    bench_table "$o"
    [[ "$(row 14 "fingerprint check every 10 batches (default): cost, share of the step")" == *"| 0.040 [0.040 - 0.040] | <= 0.03 | NO |" ]] || fail
}

# stand_in DIR: a build folder whose 05, 12 and 13 are tests/fixtures/bench/stand-in/program
# (the stored runs and traces), whose gpu-probe counts one GPU, whose tracestat is the course's
stand_in() {
    mkdir -p "$1/solutions" "$1/tools"
    for p in 05_stream_overlap 12_data_parallel_overlap 13_pipeline_parallel; do
        ln -s "$FIXTURES/bench/stand-in/program" "$1/solutions/$p"
    done
    printf '#!/bin/sh\n[ "${1:-}" = --count ] && { echo 1; exit 0; }\necho gpus=1\n' >"$1/tools/gpu-probe"
    chmod +x "$1/tools/gpu-probe"
    ln -s "$TOOLS/tracestat" "$1/tools/tracestat"
}

@test "tools: multi-gpu-figures on one (stand-in) GPU: simulated nodes, said at the top and in every table" {
    [ -x "$TOOLS/tracestat" ] || skip "$TOOLS/tracestat is not built (run make)"
    b=$BATS_TEST_TMPDIR/build o=$BATS_TEST_TMPDIR/out
    stand_in "$b"
    touch "$BATS_TEST_TMPDIR/before"
    run --separate-stderr env COURSE_BIN="$b/solutions" COURSE_REF_BIN="$b/solutions" \
        STAND_IN_FIXTURES="$FIXTURES/bench" FIGURES_WORK="$BATS_TEST_TMPDIR/work" \
        "$ROOT/tests/timed" 300 "$FIG" --out "$o"
    assert_success
    r=$o/$(date -u +%Y-%m-%d)-multi-gpu.md
    took=$(sed -n 's/^- command: .*, \([0-9]*\) s$/\1/p' "$r")
    assert_output "multi-gpu-figures: $r (0 passed, 0 failed, 3 skipped; $took s); simulated nodes: not performance"
    run cat "$r"
    assert_line --index 1 --partial "**Simulated nodes: not performance.** 1 GPU visible"  # after the title
    assert_output --partial "- command: \`tools/multi-gpu-figures --rounds 1\`"
    assert_output --partial "- NCCL: 0.0.0-stand-in"
    assert_output --partial "- commit: $(git -C "$ROOT" rev-parse --short HEAD)"
    assert_output --partial "0 passed, 0 failed, 3 skipped"
    # every section and every row of 12's and 13's tables (but one rank's) says so; no target judged
    unmarked=$(grep -E '^##' "$r" | grep -vF "[simulated nodes: not performance]" || true)
    [ -z "$unmarked" ] || fail "sections not marked: $unmarked"
    rows=$(grep -E '^\| ' "$r" | grep -vE '^\| (ranks|figure|variant|m) \|' | grep -vF '| 1 | 4.000')
    assert_equal "$(grep -c . <<<"$rows")" 12  # 12: 2 ranks, 5 figures, 2 windows; 13: m = 1, 4, 8, 16
    unmarked=$(grep -vF "[simulated nodes: not performance]" <<<"$rows" || true)
    [ -z "$unmarked" ] || fail "rows not marked: $unmarked"
    refute_output --regexp '(\| yes \||\| NO \||: yes|: NO)'
    for f in 12_timeline 12_timeline_before 13_timeline_1f1b 13_timeline_gpipe 13_timeline_1f1b_early; do
        [ -s "$o/img/$f.svg" ] && [ -s "$o/img/$f.txt" ] || fail "no picture $f in $o/img"
        assert_output --partial "[$f](img/$f.svg)"
    done
    [ -z "$(find "$ROOT/notes" -newer "$BATS_TEST_TMPDIR/before")" ] || fail "it wrote into notes/"
}

@test "tools: levers' parts of issue 37 on stand-in programs: every variant run with its options and environment, reported" {
    b=$BATS_TEST_TMPDIR/build o=$BATS_TEST_TMPDIR/levers
    mkdir -p "$b/solutions" "$b/tools"
    # a stand-in for 12, 13 and 15 (and sm-share): rank 0 prints its arguments and NCCL_* environment
    # as its JSON, with a figure or two
    cat >"$b/solutions/stand-in" <<'EOF'
#!/usr/bin/env bash
[ "${RANK:-0}" = 0 ] || exit 0
env | grep '^NCCL_' | sort | paste -sd ' ' - | jq -R --arg a "$*" '{args: $a, nccl_env: ., nccl_version: "0.0.0-stand-in",
    graph_step_ms: 2, eager_step_ms: 3, speedup: 1.5, prioritized_step_ms: 2.2, graph_alloc_nodes: 0,
    "1f1b_step_ms": 4, gpipe_step_ms: 5, predicted_step_ms: 4, "1f1b_step_over_predicted": 1,
    gpipe_step_over_predicted: 1.25, "1f1b_p2p_pairs_per_stage": "7,7", buckets_step_ms: 1}'
EOF
    chmod +x "$b/solutions/stand-in"
    for p in 12_data_parallel_overlap 13_pipeline_parallel 15_graph_data_parallel; do
        ln -s stand-in "$b/solutions/$p"
    done
    ln -s ../solutions/stand-in "$b/tools/sm-share"
    ln -s "$TOOLS/tracestat" "$b/tools/tracestat"
    printf '#!/bin/sh\n[ "${1:-}" = --count ] && { echo 1; exit 0; }\necho gpus=1\n' >"$b/tools/gpu-probe"
    chmod +x "$b/tools/gpu-probe"
    run --separate-stderr env COURSE_BIN="$b/solutions" LEVERS_ONLY="peer 15 13p2p" "$ROOT/tests/timed" 120 \
        "$ROOT/tools/levers" --rounds 1 --out "$o"
    assert_success
    # each variant once, its options given, its NAME=VALUE words in its ranks' environment alone
    assert_equal "$(jq -r .args "$o/r1_15library.json")" \
        "--hidden 512 --layers 4 --prep-work 0 --batch 1024 --batches 8 --reps 3 --warmup 1 --capture-workspace library --json --timeout-s 60"
    [[ "$(jq -r .nccl_env "$o/r1_15nomix.json")" == *NCCL_GRAPH_MIXING_SUPPORT=0* ]] || fail "nomix: $(cat "$o/r1_15nomix.json")"
    [[ "$(jq -r .nccl_env "$o/r1_15default.json")" != *NCCL_GRAPH* ]] || fail "default: $(cat "$o/r1_15default.json")"
    [[ "$(jq -r .args "$o/r1_15noupload0.json")" == *"--warmup 0 --no-upload --json"* ]] || fail "noupload0"
    [[ "$(jq -r .nccl_env "$o/r1_13pmax2.json")" == *NCCL_MAX_P2P_NCHANNELS=2* ]] || fail "max2: $(cat "$o/r1_13pmax2.json")"
    [[ "$(jq -r .args "$o/r1_13ppairs.json")" == *"--micro-batches 4 --post-recv late --p2p-group pairs --json"* ]] ||
        fail "pairs: $(jq -r .args "$o/r1_13ppairs.json")"
    # the peer: 12's runs of the round made for it, DDP itself not on one GPU, and the report says why
    [ -s "$o/r1_12one.json" ] && [ -s "$o/r1_12default.json" ] || fail "12's runs for the peer: $(ls "$o")"
    [ ! -e "$o/r1_ddp.json" ] || fail "the peer ran on one GPU"
    run cat "$o/levers.md"
    assert_output --partial "The peer was not run: one GPU: the peer's two ranks would share it, which NCCL refuses."
    for v in default library nomix noreg upload0 noupload0 snomix; do
        assert_output --partial "| ${v} (\`"
    done
    assert_output --partial "| small | sdefault (its shape's defaults) |"
    assert_output --partial "| nomix (\`NCCL_GRAPH_MIXING_SUPPORT=0\`) | 2.000 [2.000 - 2.000] | 3.000 [3.000 - 3.000] | 1.500 [1.500 - 1.500] |"
    assert_output --partial "| pairs (\`--post-recv late --p2p-group pairs\`) | 4.000 [4.000 - 4.000] | 5.000 [5.000 - 5.000] |"
    refute_output --partial "## 1."  # the parts not asked for are not reported
}

# default OPTION: the default a --help text (on stdin) gives OPTION
default() {
    sed -n "s/^  --$1 .*default \([^)]*\))\$/\1/p"
}

@test "tools: ddp-peer.py, 12's peer, compiles, has 12's defaults, says what matches, refuses a bad value with one line" {
    detect_nccl 12_data_parallel_overlap
    need_nccl
    P=12_data_parallel_overlap
    command -v python3 >/dev/null || skip "python3 is not installed (the peer alone needs it)"
    run env PYTHONPYCACHEPREFIX="$BATS_TEST_TMPDIR/pyc" python3 -m py_compile "$ROOT/tools/ddp-peer.py"
    assert_success
    run prog "$P" --help
    assert_success
    twelve=$output
    run python3 "$ROOT/tools/ddp-peer.py" --help
    assert_success
    assert_output --partial "What matches lesson 12"
    assert_output --partial "What cannot match"
    # 12's model, rate and buckets; its batch of one rank is the peer's shard (the hidden layers follow
    # tools/bench's GPU-bound shape, --layers 4)
    for o in in hidden out lr bucket-mib; do
        assert_equal "$(default "$o" <<<"$output")" "$(default "$o" <<<"$twelve")"
    done
    assert_equal "$(default shard <<<"$output")" "$(default batch <<<"$twelve")"
    assert_equal "$(default layers <<<"$output")" 4
    for args in "--batches 0" "--rounds 51" "--warmup -1" "--bucket-mib 0" "--lr nan" "--layers 9" "--hidden x" "--bogus"; do
        # shellcheck disable=SC2086
        run --separate-stderr python3 "$ROOT/tools/ddp-peer.py" $args
        [ "$status" -eq 2 ] || fail "ddp-peer.py $args: exit code $status, expected 2: $stderr"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "ddp-peer.py $args: expected one line, got: $stderr"
        [[ "$stderr" == "ddp-peer.py: "* ]] || fail "ddp-peer.py $args: $stderr"
    done
    if ! python3 -c 'import torch' 2>/dev/null; then  # here: it says so, one line, exit code 1
        run --separate-stderr python3 "$ROOT/tools/ddp-peer.py" --batches 1
        assert_equal "$status" 1
        [[ "$stderr" == "ddp-peer.py: PyTorch is not installed"* ]] || fail "$stderr"
    fi
}

# ----------------------------------------------------------------------------
# tools/launch: signals, and what it refuses

# alive PID: the process runs (a zombie, dead but not yet reaped, does not)
alive() {
    [ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

@test "tools: launch stopped by HUP, INT, QUIT or TERM stops every rank (KILL if TERM is ignored), exits 128 + the signal" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
[ "$RANK" = 1 ] && trap '' TERM  # rank 1 ignores TERM: only KILL stops it
echo $$ >"$OUT/pid$RANK"
while :; do sleep 0.1; done
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    for pair in HUP:129 INT:130 QUIT:131 TERM:143; do
        sig=${pair%:*} want=${pair#*:}
        rm -f "$OUT"/pid*
        # a job started with & by a script ignores INT and QUIT, and one under nohup (a detached test
        # run) HUP: a shell cannot trap a signal ignored when it started, so env gives the launcher
        # every default back
        env --default-signal=HUP,INT,QUIT,TERM "$LAUNCH" -n 2 "$BATS_TEST_TMPDIR/rank" 2>"$OUT/err" &
        lp=$!
        for ((k = 0; k < 100; k++)); do [ -s "$OUT/pid0" ] && [ -s "$OUT/pid1" ] && break; sleep 0.1; done
        [ -s "$OUT/pid0" ] && [ -s "$OUT/pid1" ] || fail "SIG$sig: the ranks did not start"
        kill -"$sig" "$lp"
        st=0
        wait "$lp" || st=$?
        for r in 0 1; do
            pid=$(cat "$OUT/pid$r")
            if alive "$pid"; then
                kill -KILL "$pid"
                fail "SIG$sig: rank $r (pid $pid) still running after launch returned"
            fi
        done
        [ "$st" -eq "$want" ] || fail "SIG$sig: launch's exit code $st, expected $want"
        grep -q "^launch: SIG$sig: stopping every rank" "$OUT/err" || fail "SIG$sig: $(cat "$OUT/err")"
    done
}

@test "tools: launch takes a relative --rendezvous here, not in CDPATH; a program or folder it cannot use: one line, exit 2" {
    cat >"$BATS_TEST_TMPDIR/rank" <<'EOF'
#!/usr/bin/env bash
echo "$RENDEZVOUS_DIR" >"$OUT/rv$RANK"
EOF
    chmod +x "$BATS_TEST_TMPDIR/rank"
    export OUT=$BATS_TEST_TMPDIR
    mkdir -p "$BATS_TEST_TMPDIR/here/rv" "$BATS_TEST_TMPDIR/elsewhere/rv"
    cd "$BATS_TEST_TMPDIR/here"
    run --separate-stderr env CDPATH="$BATS_TEST_TMPDIR/elsewhere" "$LAUNCH" -n 2 --rendezvous rv "$BATS_TEST_TMPDIR/rank"
    assert_success
    assert_equal "$(cat "$OUT/rv0")|$(cat "$OUT/rv1")" "$BATS_TEST_TMPDIR/here/rv|$BATS_TEST_TMPDIR/here/rv"
    echo 'echo ran' >"$BATS_TEST_TMPDIR/not-executable"
    chmod 644 "$BATS_TEST_TMPDIR/not-executable"
    for prog in "$BATS_TEST_TMPDIR/no-such-program" no-such-program-on-the-path "$BATS_TEST_TMPDIR/here" \
        "$BATS_TEST_TMPDIR/not-executable"; do
        run --separate-stderr "$LAUNCH" -n 2 "$prog"
        [ "$status" -eq 2 ] || fail "launch $prog: exit code $status, expected 2"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "launch $prog: expected one line, got: $stderr"
        [[ "$stderr" == "launch: $prog: no such program"* ]] || fail "launch $prog: $stderr"
    done
    mkdir "$BATS_TEST_TMPDIR/open" "$BATS_TEST_TMPDIR/theirs"
    chmod 777 "$BATS_TEST_TMPDIR/open"
    run --separate-stderr "$LAUNCH" -n 2 --rendezvous "$BATS_TEST_TMPDIR/open" "$BATS_TEST_TMPDIR/rank"
    assert_equal "$status" 2
    assert_equal "$(grep -c . <<<"$stderr")" 1
    [[ "$stderr" == *"every user can write to it"* ]] || fail "$stderr"
    if [ "$(id -u)" = 0 ]; then  # only root can give a folder away
        chown 65534 "$BATS_TEST_TMPDIR/theirs"
        run --separate-stderr "$LAUNCH" -n 2 --rendezvous "$BATS_TEST_TMPDIR/theirs" "$BATS_TEST_TMPDIR/rank"
        assert_equal "$status" 2
        [[ "$stderr" == *"the folder belongs to another user"* ]] || fail "$stderr"
    fi
}

# ----------------------------------------------------------------------------
# files of this user alone, and the tests' log of fsync

@test "tools: own_file makes a temporary file new, 0600, never through a planted link, in a folder of this user's alone" {
    cat >"$BATS_TEST_TMPDIR/t.c" <<'EOF'
#include <stdio.h>
#include "common/base/own_file.h"
int main(int argc, char **argv)  // t create PATH | t folder PATH
{
    char why[1024];
    if (argc == 3 && argv[1][0] == 'c') {
        FILE *f = own_file_create(argv[2]);
        if (!f) return perror(argv[2]), 1;
        fputs("new\n", f);
        return fclose(f) != 0;
    }
    if (argc == 3 && own_folder_check(argv[2], why, sizeof why) != 0) return puts(why), 1;
    return 0;
}
EOF
    gcc -std=c11 -Wall -Wextra -Werror -I"$ROOT" "$BATS_TEST_TMPDIR/t.c" "$ROOT/common/base/own_file.c" -o "$BATS_TEST_TMPDIR/t"
    t=$BATS_TEST_TMPDIR/t d=$BATS_TEST_TMPDIR/d
    mkdir "$d"
    echo victim >"$d/victim"
    ln -s "$d/victim" "$d/x.tmp"  # planted where a writer's temporary file will be
    run "$t" create "$d/x.tmp"
    assert_success
    assert_equal "$(cat "$d/victim")" victim
    [ ! -L "$d/x.tmp" ] || fail "the link is still there"
    assert_equal "$(cat "$d/x.tmp") $(stat -c %a "$d/x.tmp")" "new 600"
    echo old >"$d/y.tmp" && chmod 644 "$d/y.tmp"  # a crashed writer's: replaced by a new file
    run "$t" create "$d/y.tmp"
    assert_success
    assert_equal "$(cat "$d/y.tmp") $(stat -c %a "$d/y.tmp")" "new 600"
    run "$t" folder "$d"
    assert_success
    chmod 777 "$d"
    run "$t" folder "$d"
    assert_failure
    assert_output --partial "can be written by every user (mode 777)"
    chmod 755 "$d"
    if [ "$(id -u)" = 0 ]; then
        chown 65534 "$d"
        run "$t" folder "$d"
        assert_failure
        assert_output --partial "belongs to user 65534, not to this one (0)"
    fi
}

@test "tools: the tests' fsync log names every fsync, fdatasync and rename of a program, in order, and nothing else" {
    shim=$(fsync_shim)
    d=$BATS_TEST_TMPDIR/d
    mkdir "$d"
    d=$(cd "$d" && pwd -P)  # the log names what the kernel names
    FSYNC_LOG=$BATS_TEST_TMPDIR/log LD_PRELOAD=$shim bash -c '
        dd if=/dev/zero of="$0/a" bs=1 count=3 conv=fsync 2>/dev/null
        sync -d "$0/a"
        cp "$0/a" "$0/c"
        mv "$0/a" "$0/b"
        sync "$0"' "$d"
    run awk '{ $1 = ""; print substr($0, 2) }' "$BATS_TEST_TMPDIR/log"
    assert_output "fsync $d/a
fdatasync $d/a
rename $d/a $d/b
fsync $d"
}

# ----------------------------------------------------------------------------
# lessons 14 and 16's report tools on inputs that break them

# Numbers put in place of others: bounds, the edges of int and long long, past them.
EDGES=(0 -1 -2 1 2 255 4095 4096 4097 65535 65536 65537 100000 2147483647 2147483648 -2147483649 4294967296
    1099511627776 1125899906842624 9223372036854775807 9223372036854775808 -9223372036854775809 99999999999999999999999)

# flip FILE OFFSET BIT: one bit of one byte of FILE changed in place
flip() {
    local byte
    byte=$(od -An -tu1 -j "$2" -N 1 "$1" | tr -d ' ')
    [ -n "$byte" ] || return 0
    # shellcheck disable=SC2059
    printf "\\$(printf '%03o' $((byte ^ (1 << $3))))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# renumber FILE K VALUE: FILE's K-th whole number becomes VALUE (in a rank file, one of its
# 512-byte header's, the header kept at its length where it fits)
renumber() {
    local program='{ for (i = 1; i <= NF; i++) if ($i ~ /^-?[0-9]+$/ && --k == 0) $i = v; print }' header
    if [[ "$1" == *.bin ]]; then
        header=$(head -c 511 "$1" | tr -d '\000' | awk -v k="$2" -v v="$3" "$program")
        { printf '%-511.511s\n' "$header"; tail -c +513 "$1"; } >"$1.new"
    else
        awk -v k="$2" -v v="$3" "$program" "$1" >"$1.new"
    fi
    mv "$1.new" "$1"
}

# mutate DIR: one change, chosen by $RANDOM, to one file under DIR, or to every file alike (the
# ranks' rings agree on what they share: a world of 100000 in one ring alone is refused before
# it is used); what it did is appended to $MUTATIONS (no subshell: $RANDOM's sequence, seeded
# once, makes every input again). Numbers near the top (headers) are changed most.
mutate() {
    local files f size k v
    mapfile -t files < <(find "$1" -type f | sort)
    f=${files[RANDOM % ${#files[@]}]}
    size=$(stat -c %s "$f")
    k=$((1 + RANDOM % (RANDOM % 2 ? 8 : 40))) v=${EDGES[RANDOM % ${#EDGES[@]}]}
    case $((RANDOM % 7)) in
    0) k=$((RANDOM % (size + 1))) && flip "$f" "$k" $((RANDOM % 8)) && MUTATIONS+="; $f: a bit of byte $k" ;;
    1) k=$((RANDOM % (size + 1))) && truncate -s "$k" "$f" && MUTATIONS+="; $f: cut at $k bytes" ;;
    2) renumber "$f" "$k" "$v" && MUTATIONS+="; $f: number $k made $v" ;;
    3) for f in "${files[@]}"; do renumber "$f" "$k" "$v"; done && MUTATIONS+="; every file: number $k made $v" ;;
    4) sed -i "${k}d" "$f" && MUTATIONS+="; $f: line $k removed" ;;
    5) sed -i "${k}p" "$f" && MUTATIONS+="; $f: line $k twice" ;;
    6) sed -i "${k}s/ [a-z-]* / x /" "$f" && MUTATIONS+="; $f: a word of line $k changed" ;;
    esac
}

# probe WHAT TOOL ARGS...: TOOL (built with the sanitizers) on one input, WHAT: within a second
# (a timeout is tried once more: a busy machine passes the second time, a loop does not), no
# sanitizer's report, an exit code of its contract (no signal), at most one line on stderr. A
# failing input is kept in build/fuzz-failed/ to be run again.
probe() {
    local what=$1 try codes=" 0 1 2 " keep
    shift
    [[ "$1" == */flight-report ]] && codes=" 0 1 2 4 "
    for try in 1 2; do
        run --separate-stderr timeout 1 "$@"
        [ "$status" -ne 124 ] && break
    done
    if [[ "$codes" != *" $status "* ]] || [[ "$stderr" == *Sanitizer* ]] || [[ "$stderr" == *"runtime error"* ]] ||
        [ "$(grep -c . <<<"$stderr")" -gt 1 ]; then
        keep=$ROOT/build/fuzz-failed/$(basename "$1")-$(date +%s)-$RANDOM
        mkdir -p "$keep" && cp -r "$INPUT" "$keep/"
        fail "$(basename "$1") ${*:2}: exit code $status on ${what#; } (kept in $keep): $(head -c 3000 <<<"$stderr")"
    fi
}

@test "tools: flight-report and checkpoint-report under the sanitizers, on mutated rings and checkpoints: no report, fast" {
    b=build/san-address-undefined  # host-only C (make's libcourse-host.a): seconds to build
    make -C "$ROOT" -s SAN=address,undefined BUILD=$b "$b/tools/flight-report" "$b/tools/checkpoint-report" \
        >"$BATS_TEST_TMPDIR/make.log" 2>&1 || fail "the tools do not build with the sanitizers: $(tail -n 5 "$BATS_TEST_TMPDIR/make.log")"
    fr=$ROOT/$b/tools/flight-report cr=$ROOT/$b/tools/checkpoint-report
    export ASAN_OPTIONS=exitcode=86:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:exitcode=87:print_stacktrace=1
    INPUT=$BATS_TEST_TMPDIR/in
    # issue 26's two rings first: a world of 100000 in every header; calls #0 to #7 in one ring,
    # #2^40 - 7 to #2^40 in the others (a ring holds its last calls one after another, issue 35):
    # looked up, never walked
    rm -rf "$INPUT" && cp -r "$FIXTURES/14_flight/clean" "$INPUT"
    sed -i 's/^rank \([0-9]*\) world 3 /rank \1 world 100000 /' "$INPUT"/flight.*
    probe "world 100000" "$fr" "$INPUT"
    rm -rf "$INPUT" && cp -r "$FIXTURES/14_flight/clean" "$INPUT"
    awk 'NR == 2 { sub(/ calls 30 /, " calls 8 ") } NR > 4 { $1 -= 22; $2 -= 22 } { print }' \
        "$FIXTURES/14_flight/clean/flight.job7.rank0" >"$INPUT/flight.job7.rank0"
    for k in 22 23 24 25 26 27 28 29; do
        big=$((1099511627776 - 29 + k))
        sed -i "s/ calls 30 / calls 1099511627777 /; s/^$k $k /$big $big /" "$INPUT/flight.job7.rank1" "$INPUT/flight.job7.rank2"
    done
    probe "calls #0 to #7, and #2^40" "$fr" "$INPUT"
    # the rings read, and one rank stopped at #7 where the others went on: said so
    [ "$status" -eq 4 ] || fail "calls #0 and #2^40: $output $stderr"
    [[ "$output" == "rank 0 stopped at all-reduce #7 "*" where rank 1 went on to all-reduce #1099511627776 "* ]] || fail "$output"
    RANDOM=${FUZZ_SEED:-26}
    rounds=${FUZZ_ROUNDS:-10}
    for dir in "$FIXTURES"/14_flight/*/; do
        for ((k = 0; k < rounds; k++)); do
            rm -rf "$INPUT" && cp -r "$dir" "$INPUT"
            MUTATIONS=""
            for ((j = RANDOM % 3; j >= 0; j--)); do mutate "$INPUT"; done
            probe "$MUTATIONS" "$fr" "$INPUT" --ranks
        done
    done
    for ((k = 0; k < 10 * rounds; k++)); do
        rm -rf "$INPUT" && cp -r "$FIXTURES/16_checkpoints" "$INPUT"
        MUTATIONS=""
        for ((j = RANDOM % 3; j >= 0; j--)); do mutate "$INPUT"; done
        probe "$MUTATIONS" "$cr" "$INPUT" --world 2 --shape 4,8,2
    done
}

# scripts: every tool of tools/ that is a script (not the C sources the build compiles)
scripts() {
    local t
    for t in "$ROOT"/tools/*; do
        [ -f "$t" ] && [ -x "$t" ] && head -n 1 "$t" | grep -q '^#!' && echo "$t"
    done
}

@test "tools: every tool answers --help with its usage and exit status on stdout, exit code 0, and does nothing else" {
    mkdir "$BATS_TEST_TMPDIR/cwd"
    cd "$BATS_TEST_TMPDIR/cwd"
    touch "$BATS_TEST_TMPDIR/before"
    sleep 1
    while read -r t; do
        name=$(basename "$t")
        for h in --help -h; do
            run --separate-stderr "$t" "$h"
            [ "$status" -eq 0 ] || fail "$name $h: exit code $status: $stderr"
            [[ "${lines[0]}" == "$name: "* ]] || fail "$name $h: the first line does not name the tool: ${lines[0]}"
            grep -qiE 'exit (status|codes?)' <<<"$output" || fail "$name $h: no exit status in its help"
            grep -qiE '(^|[^a-z])usage|tools/'"$name"'|make ' <<<"$output" || fail "$name $h: no usage in its help"
            [ -z "$stderr" ] || fail "$name $h: wrote on stderr: $stderr"
        done
    done < <(scripts)
    # nothing written: no lesson regenerated, no folder named --help, nothing installed or packed
    changed=$(find "$ROOT" -path "$ROOT/build" -prune -o -path "$ROOT/.git" -prune -o -newer "$BATS_TEST_TMPDIR/before" -print)
    [ -z "$changed" ] || fail "--help changed files: $changed"
    [ -z "$(ls -A "$BATS_TEST_TMPDIR/cwd")" ] || fail "--help wrote here: $(ls -A "$BATS_TEST_TMPDIR/cwd")"
}

@test "tools: a tool that takes no argument, or one folder, refuses more with exit code 2 and one line" {
    for cmd in "bench x" "timelines x" "make-lessons x" "setup-bats x" "pack-tools a b" "make-class-fixture" \
        "make-class-fixture a b" "gen-lesson" "gen-lesson --only" "gen-lesson /nonexistent.cu" "run-tests /nonexistent.bats"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$ROOT"/tools/$cmd
        [ "$status" -eq 2 ] || fail "$cmd: exit code $status, expected 2"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "$cmd: expected one line on stderr, got: $stderr"
        [[ "$stderr" == "${cmd%% *}: "* ]] || fail "$cmd: $stderr"
    done
}

@test "tools: an empty name for a file or folder is refused with one line and exit code 2, or quoted in the line" {
    mkdir "$BATS_TEST_TMPDIR/cwd"
    cd "$BATS_TEST_TMPDIR/cwd"
    cmds=("$ROOT/tools/pack-tools" "$ROOT/tools/make-class-fixture")
    command -v python3 >/dev/null && cmds+=("python3 $ROOT/tools/ddp-peer.py --json-out")
    for cmd in "${cmds[@]}"; do
        # shellcheck disable=SC2086
        run --separate-stderr timeout 10 $cmd ''
        name=$(basename "$(awk '{ print ($1 == "python3" ? $2 : $1) }' <<<"$cmd")")
        [ "$status" -eq 2 ] || fail "$name '': exit code $status, expected 2: $stderr"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "$name '': expected one line on stderr, got: $stderr"
        [[ "$stderr" == "$name: "* ]] || fail "$name '': $stderr"
    done
    for t in tracestat fatbin-archs; do
        run --separate-stderr "$TOOLS/$t" ''
        assert_equal "$status" 1
        assert_equal "$stderr" "$t: cannot open ''"
    done
    [ -z "$(ls -A)" ] || fail "an empty name wrote here: $(ls -A)"
}

# plant DIR: DIR/planted.bats, whose checks leave processes behind (their ids in $PIDS): one holding
# bats's output (its fd 3) as every background process of a check does, one holding it as its
# stdout, one holding nothing, and one that empties BATS_TEST_TIMEOUT inside the check: bats 1.8.2
# then never ends its countdown (a subshell and its sleep, holding bats's output: what held the
# suite 14 minutes on four H200, 2026-11-27, from tests/handout.bats). One check fails. Each
# check writes when it ended into $PIDS.ends.
plant() {
    # (@test written as TEST: bats would read an @test line of this file as one of its own)
    sed 's/^TEST /@test /' >"$1/planted.bats" <<'EOF'
teardown() {
    date +%s >>"$PIDS.ends"
}
TEST "planted: leaves a sleep behind" {
    sleep 300 &
    echo $! >>"$PIDS"
}
TEST "planted: leaves a child holding its stdout" {
    sleep 300 >&3 3>&- &
    echo $! >>"$PIDS"
}
TEST "planted: leaves a sleep that holds nothing" {
    sleep 300 >/dev/null 2>&1 3>&- 4>&- &
    echo $! >>"$PIDS"
}
TEST "planted: empties its BATS_TEST_TIMEOUT, leaving bats's countdown behind" {
    if [ -n "${BATS_killer_pid:-}" ]; then  # bats's countdown (a local of its caller): it and its sleep
        echo "$BATS_killer_pid" >>"$PIDS"
        pgrep -P "$BATS_killer_pid" >>"$PIDS"
    fi
    export BATS_TEST_TIMEOUT=
}
TEST "planted: fails, saying its BATS_TEST_TIMEOUT" {
    echo "[${BATS_TEST_TIMEOUT-unset}]" >"$PIDS.timeout"
    false
}
TEST "planted: passes" {
    true
}
EOF
}

# assert_ended_soon: the run ended (now) within 15 s of the end of its last check ($PIDS.ends),
# and every process its checks left behind ($PIDS) is gone within seconds
assert_ended_soon() {
    local last p k
    last=$(sort -n "$PIDS.ends" | tail -n 1)
    assert_num "$(($(date +%s) - last))" "<" 15 "seconds from the last check's end to the run's (the leftovers sleep 300)"
    for p in $(cat "$PIDS"); do
        for ((k = 0; k < 50; k++)); do
            case $(ps -o stat= -p "$p" 2>/dev/null) in "" | Z*) break ;; esac
            sleep 0.1
        done
        [ "$k" -lt 50 ] || fail "a process a check left behind is still there: $(ps -o pid=,cmd= -p "$p")"
    done
}

@test "tools: checks that leave processes behind keep neither bats-pool nor run-tests waiting, and none of them is left" {
    plant "$BATS_TEST_TMPDIR"
    export PIDS=$BATS_TEST_TMPDIR/pids
    # a run of its own (not inside a check), each check with a BATS_TEST_TIMEOUT
    run --separate-stderr env -u BATS_TEST_NAME BATS_TEST_TIMEOUT=300 timeout 60 "$ROOT/tools/bats-pool" \
        --out "$BATS_TEST_TMPDIR/pool" "$BATS_TEST_TMPDIR/planted.bats"
    assert_equal "$status" 1  # the failing check, not a time limit (124)
    assert_ended_soon
    assert_equal "$(grep -c '^ok ' "$BATS_TEST_TMPDIR/pool/planted.tap")" 5
    assert_equal "$(grep -c '^not ok 5 planted: fails' "$BATS_TEST_TMPDIR/pool/planted.tap")" 1
    assert_equal "$(cat "$PIDS.timeout")" "[300]"
    assert_equal "$(grep -c . "$PIDS")" 5  # the countdown and its sleep among them
    # inside a check (this one), run-tests: its checks have no BATS_TEST_TIMEOUT of their own
    rm -f "$PIDS" "$PIDS.ends"
    run --separate-stderr env TAP_OUT="$BATS_TEST_TMPDIR/t.tap" timeout 60 "$ROOT/tools/run-tests" "$BATS_TEST_TMPDIR/planted.bats"
    assert_equal "$status" 1
    assert_ended_soon
    assert_equal "${lines[-1]}" "5 passed, 1 failed, 0 skipped"
    assert_equal "$(cat "$PIDS.timeout")" "[]"
}

@test "tools: run-tests shows each file's TAP as soon as that file is done, and within 30 s what still runs; the summary last" {
    d=$BATS_TEST_TMPDIR
    printf '@test "quick passes" { true; }\n' >"$d/quick.bats"
    # slow waits (60 s at most) for its go, given once quick's line is on run-tests' stdout
    printf '@test "slow waits for its go" { for ((k = 0; k < 600; k++)); do [ -e "$GO" ] && return 0; sleep 0.1; done; false; }\n' \
        >"$d/slow.bats"
    export GO=$d/go
    env TAP_OUT="$d/t.tap" RUN_TESTS_JOBS=2 timeout 90 "$ROOT/tools/run-tests" "$d/slow.bats" "$d/quick.bats" >"$d/out" 2>"$d/err" &
    pid=$!
    for ((k = 0; k < 300; k++)); do grep -q '^ok [0-9]* quick passes' "$d/out" && break; sleep 0.1; done
    seen=$(grep -c '^ok [0-9]* quick passes' "$d/out" || true)
    # then, well before 30 s without a word (26 s: its 20, and room for a busy machine), what still runs
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 26 ]; do grep -q '^run-tests: still running: slow (' "$d/err" && break; sleep 0.1; done
    still=$(grep -c '^run-tests: still running: slow (' "$d/err" || true)
    touch "$GO"
    wait "$pid"
    st=$?
    [ "$seen" -eq 1 ] || fail "quick's line was not shown while slow still ran: $(cat "$d/out" "$d/err")"
    [ "$still" -ge 1 ] || fail "26 s after quick's line, no word of what still runs: $(cat "$d/err")"
    assert_equal "$(head -n 1 "$d/err")" "run-tests: 2 files to run"  # a word as it starts
    assert_equal "$st" 0
    run cat "$d/out"
    assert_equal "${#lines[@]}" 4
    [[ "${lines[0]}" == "ok 1 quick passes"* ]] || fail "${lines[0]}"
    [[ "${lines[1]}" == "ok 2 slow waits for its go"* ]] || fail "${lines[1]}"
    assert_equal "${lines[2]}" "1..2"
    assert_equal "${lines[3]}" "2 passed, 0 failed, 0 skipped"
    # the TAP file: the files in the order given
    run cat "$d/t.tap"
    assert_equal "${lines[0]}" "1..2"
    [[ "${lines[1]}" == "ok 1 slow waits for its go"* ]] || fail "${lines[1]}"
    [[ "${lines[2]}" == "ok 2 quick passes"* ]] || fail "${lines[2]}"
}

@test "tools: bats-pool runs the deadline checks side by side after the others, then the other timed ones alone, in turn" {
    # each check notes when it starts and ends (date +%s.%N): the order is what is checked, never a time
    {
        echo 'note() { echo "$1 $(date +%s.%N)" >>"$LOG"; }'
        for n in a b; do
            printf '# bats test_tags=timed,deadline\n@test "deadline %s" { note start-%s; sleep 2; note end-%s; }\n' "$n" "$n" "$n"
        done
        printf '# bats test_tags=timed\n@test "timed c" { note start-c; sleep 1; note end-c; }\n'
        printf '@test "untimed d" { note start-d; sleep 1; note end-d; }\n'
    } >"$BATS_TEST_TMPDIR/order.bats"
    export LOG=$BATS_TEST_TMPDIR/log
    run --separate-stderr env -u BATS_TEST_NAME timeout 60 "$ROOT/tools/bats-pool" --out "$BATS_TEST_TMPDIR/pool" \
        "$BATS_TEST_TMPDIR/order.bats"
    assert_success
    at() { awk -v k="$1" '$1 == k { print $2 }' "$LOG"; }
    # the two deadline checks overlap; both start after the untimed one ended; the timed one after both
    assert_num "$(at start-b)" "<" "$(at end-a)" "deadline b started before deadline a ended"
    assert_num "$(at start-a)" "<" "$(at end-b)" "deadline a started before deadline b ended"
    assert_num "$(at start-a)" ">=" "$(at end-d)" "deadline a started after the untimed check"
    assert_num "$(at start-c)" ">=" "$(at end-a)" "the timed check started after deadline a"
    assert_num "$(at start-c)" ">=" "$(at end-b)" "the timed check started after deadline b"
    assert_equal "$(grep -c '^ok ' "$BATS_TEST_TMPDIR/pool/order.tap")" 4
}

# fake_build DIR GPUS: a build folder whose gpu-probe counts GPUS (and has nothing else)
fake_build() {
    mkdir -p "$1/tools"
    printf '#!/bin/sh\n[ "${1:-}" = --count ] && { echo %s; exit 0; }\necho gpus=%s\n[ %s -gt 0 ] || { echo why=a stand-in; exit 3; }\n' \
        "$2" "$2" "$2" >"$1/tools/gpu-probe"
    chmod +x "$1/tools/gpu-probe"
}

@test "tools: dev-check --lanes --plan: a lane per GPU gpu-probe counts, every lesson once, then speed; nothing run" {
    b=$BATS_TEST_TMPDIR/b
    lessons=$(cd "$ROOT/tests" && ls [0-9][0-9]_*.bats | cut -c1-2 | grep -v 00 | tr '\n' ' ')
    speed=$(grep -l '^# bats test_tags=.*\bspeed\b' "$ROOT"/tests/[0-9][0-9]_*.bats | xargs -n 1 basename | cut -c1-2 | tr '\n' ' ')
    [ -n "$speed" ] || fail "no lesson has a check of speed"
    fake_build "$b" 4
    run --separate-stderr env -u CUDA_VISIBLE_DEVICES "$ROOT/tools/dev-check" --lanes --plan --build "$b"
    assert_success
    assert_equal "${#lines[@]}" 4
    assert_line --index 0 "lanes: 4 GPUs (counted by $b/tools/gpu-probe), a lane each: CUDA_VISIBLE_DEVICES=0, 1, 2, 3"
    # the CPUs shared: each lane's builds within its share, never the machine's CPUs each
    cpus=$(nproc) share=$(($(nproc) / 5))
    assert_line --index 3 "lanes: each lane builds $((share >= 1 ? share : 1)) at once (DEV_CHECK_JOBS: $cpus CPUs, 4 lanes and the rest)"
    [[ "${lines[1]}" == "lanes: side by side, the heaviest first, each on the next free GPU: "* ]] || fail "${lines[1]}"
    assert_equal "$(tr ' ' '\n' <<<"${lines[1]##*: }" | sort | tr '\n' ' ')" "$lessons"
    assert_line --index 2 "lanes: then, with all 4 GPUs visible, the checks of speed of ${speed% }"
    # the heaviest first: lesson 13 (the most checks of ranks) before 07 (the fewest checks)
    order=" ${lines[1]##*: } " before13=${order%% 13 *} before07=${order%% 07 *}
    [ ${#before13} -lt ${#before07} ] || fail "13 does not start before 07: $order"
    # beside the suite (tools/gpu-check): the checks of speed later, on their own
    run --separate-stderr env -u CUDA_VISIBLE_DEVICES DEV_CHECK_LANES_SPEED=later "$ROOT/tools/dev-check" --lanes --plan \
        --build "$b"
    assert_line --index 2 "lanes: the checks of speed of ${speed% } later, with every GPU visible (DEV_CHECK_LANES_SPEED=later)"
    run --separate-stderr env DEV_CHECK_LANES_SPEED=soon "$ROOT/tools/dev-check" --lanes --plan --build "$b"
    assert_equal "$status" 2
    [[ "$stderr" == "dev-check: DEV_CHECK_LANES_SPEED must be now, later or only (try --help)" ]] || fail "$stderr"
    # two GPUs of those CUDA_VISIBLE_DEVICES names: a lane each, named as the user named them
    fake_build "$b" 2
    run --separate-stderr env CUDA_VISIBLE_DEVICES=3,5 "$ROOT/tools/dev-check" --lanes --plan --build "$b"
    assert_line --index 0 "lanes: 2 GPUs (counted by $b/tools/gpu-probe), a lane each: CUDA_VISIBLE_DEVICES=3, 5"
    # one GPU: the lessons in turn, in their order; the checks of speed are not run
    fake_build "$b" 1
    run --separate-stderr env -u CUDA_VISIBLE_DEVICES "$ROOT/tools/dev-check" --lanes --plan --build "$b"
    assert_success
    assert_line --index 0 "lanes: 1 GPU (counted by $b/tools/gpu-probe), a lane each: CUDA_VISIBLE_DEVICES=0"
    assert_line --index 1 "lanes: one GPU: the lessons in turn: ${lessons% }"
    assert_line --index 2 "lanes: the checks of speed of ${speed% } need two GPUs: not run here"
    # none: exit code 3, one line
    fake_build "$b" 0
    run --separate-stderr "$ROOT/tools/dev-check" --lanes --plan --build "$b"
    assert_equal "$status" 3
    assert_equal "$(grep -c . <<<"$stderr")" 1
    [[ "$stderr" == "dev-check: no usable GPU (a stand-in)" ]] || fail "$stderr"
    assert_equal "$(ls "$b")" tools  # nothing written
    # what --lanes cannot take
    for args in "--plan" "--lanes --lesson 07" "--lanes --tags speed"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$ROOT/tools/dev-check" $args --build "$b"
        assert_equal "$status" 2
        assert_equal "$(grep -c . <<<"$stderr")" 1
        [[ "$stderr" == "dev-check: "* ]] || fail "$args: $stderr"
    done
}

# stored_lanes DIR: what a run of dev-check --lanes on two GPUs leaves in DIR/dev-check/lanes:
# 05 passed, 12 had two problems, its checks of speed passed, 13 found no GPU
stored_lanes() {
    local l=$1/dev-check/lanes
    mkdir -p "$l"
    printf 'lanes: 2 GPUs (counted by x/tools/gpu-probe), a lane each: CUDA_VISIBLE_DEVICES=0, 1\n' >"$l/plan.txt"
    printf '12\tlesson\t0\t280\t1\n05\tlesson\t1\t95\t0\n13\tlesson\t1\t20\t3\n12\tspeed\tall\t40\t0\n' >"$l/parts.tsv"
    echo 455 >"$l/seconds"
    printf '== build\n\ndev-check: passed (solutions unsolved mutants, lesson 05)\n' >"$l/05.txt"
    printf '== mutants\n\ndev-check: 2 problems (solutions unsolved mutants, lesson 12):\n  12-allreduce: 6 of 10 tagged checks do not fail without it\n  solution 12 fails: 12 two ranks\n' >"$l/12.txt"
    printf 'dev-check: passed (solutions unsolved mutants, lesson 12)\n' >"$l/12.speed.txt"
    printf '== build\n' >"$l/13.txt"
}

@test "tools: dev-check --lanes' summary of a stored run: a line per part, each problem with its lesson, dev-check's last line" {
    b=$BATS_TEST_TMPDIR/b
    stored_lanes "$b"
    run --separate-stderr env DEV_CHECK_REPORT_ONLY=1 "$ROOT/tools/dev-check" --lanes --build "$b"
    assert_equal "$status" 1
    assert_line --index 0 "dev-check --lanes: 4 parts in 455 s ($b/dev-check/lanes)"
    assert_line --index 1 "  lanes: 2 GPUs (counted by x/tools/gpu-probe), a lane each: CUDA_VISIBLE_DEVICES=0, 1"
    assert_line --index 2 "  05 on GPU 1: passed (solutions unsolved mutants, lesson 05) (95 s)"
    assert_line --index 3 "  12 on GPU 0: 2 problems (solutions unsolved mutants, lesson 12) (280 s)"
    assert_line --index 4 "  12's checks of speed, every GPU: passed (solutions unsolved mutants, lesson 12) (40 s)"
    assert_line --index 5 "  13 on GPU 1: exit status 3: == build (20 s)"
    assert_line --index 6 "dev-check: 3 problems (lanes: solutions unsolved mutants):"
    assert_line --index 7 "  12: 12-allreduce: 6 of 10 tagged checks do not fail without it"
    assert_line --index 8 "  12: solution 12 fails: 12 two ranks"
    assert_line --index 9 "  13: exit status 3: == build"
    assert_equal "${#lines[@]}" 10
    assert_equal "$(cat "$b/dev-check/lanes/summary.txt")" "$output"
    # every part passed: exit code 0, the plain dev-check's last line
    printf 'dev-check: passed (solutions unsolved mutants, lesson 12)\n' >"$b/dev-check/lanes/12.txt"
    printf 'dev-check: passed (solutions unsolved mutants, lesson 13)\n' >"$b/dev-check/lanes/13.txt"
    printf '12\tlesson\t0\t280\t0\n05\tlesson\t1\t95\t0\n13\tlesson\t1\t20\t0\n12\tspeed\tall\t40\t0\n' >"$b/dev-check/lanes/parts.tsv"
    run --separate-stderr env DEV_CHECK_REPORT_ONLY=1 "$ROOT/tools/dev-check" --lanes --build "$b"
    assert_success
    assert_equal "${lines[-1]}" "dev-check: passed (lanes: solutions unsolved mutants)"
}

@test "tools: gpu-check without a GPU: exit code 3 and one line, nothing run or written" {
    [ -x "$TOOLS/gpu-probe" ] || fail "$TOOLS/gpu-probe is not built (run make)"
    refused_without_gpu gpu-check "$BATS_TEST_TMPDIR/g" "$ROOT/tools/gpu-check" --build "$(dirname "$TOOLS")" \
        --out "$BATS_TEST_TMPDIR/g"
}

# pool_plan FILE LINE...: a gpu-pool plan of LINEs ("ID CLASS WEIGHT EST COMMAND", words apart by
# one space, the command the rest); each unit notes its start and end, with its GPUs, in $LOG
pool_plan() {
    local f=$1 line id cl w e c
    shift
    for line in "$@"; do
        read -r id cl w e c <<<"$line"
        printf '%s\t%s\t%s\t%s\techo "%s start $(date +%%s.%%N) $CUDA_VISIBLE_DEVICES" >>"$LOG"; %s; st=$?; echo "%s end $(date +%%s.%%N)" >>"$LOG"; exit $st\n' \
            "$id" "$cl" "$w" "$e" "$id" "$c" "$id"
    done >"$f"
}

# at UNIT start|end: when it happened ($LOG); gpus_of UNIT: its CUDA_VISIBLE_DEVICES
at() { awk -v u="$1" -v k="$2" '$1 == u && $2 == k { print $3 }' "$LOG" | tail -n 1; }
gpus_of() { awk -v u="$1" '$1 == u && $2 == "start" { print $4 }' "$LOG" | tail -n 1; }

@test "tools: gpu-pool keeps each GPU within its slots, the longest first, then deadline, timed and speed units in turn" {
    export LOG=$BATS_TEST_TMPDIR/log
    p=$BATS_TEST_TMPDIR/plan
    # long and long2 take a slot of each GPU: wide (two slots) must wait for one of them
    pool_plan "$p" "short one 1 1 sleep 1" "long one 1 9 sleep 2" "long2 one 1 8 sleep 2" "wide one 2 5 sleep 1" \
        "mid one 1 4 sleep 1" "d1 deadline 1 1 sleep 1" "d2 deadline 1 1 sleep 1" "t1 timed 1 1 sleep 0.5" \
        "t2 timed 1 1 sleep 0.5" "sp speed 1 1 sleep 0.5" "failing one 1 1 false"
    run --separate-stderr timeout 60 "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o" --gpus "3 5" --slots 2 \
        --deadline-jobs 2 "$p"
    assert_equal "$status" 1  # the failing unit
    [[ "$stderr" == *"gpu-pool: failing failed (exit status 1,"* ]] || fail "$stderr"
    assert_equal "$(cut -f1 "$BATS_TEST_TMPDIR/o/done.tsv" | sort | tr '\n' ' ')" \
        "d1 d2 failing long long2 mid short sp t1 t2 wide "
    # never more than two slots busy on one GPU: at each unit's start, the weights running there
    awk '$2 == "start" { s[$1] = $3; g[$1] = $4 } $2 == "end" { e[$1] = $3 }
         END { w["wide"] = 2
               for (u in s) if (g[u] !~ /,/) { busy = 0
                   for (v in s) if (g[v] == g[u] && s[v] <= s[u] && e[v] > s[u]) busy += (v in w) ? w[v] : 1
                   if (busy > 2) { print u " started with " busy " slots busy on GPU " g[u]; bad = 1 } }
               exit bad }' "$LOG" || fail "a GPU ran more than its slots"
    first=$(printf '%s\n' "$(at long end)" "$(at long2 end)" | sort -n | head -n 1)
    assert_num "$(at wide start)" ">=" "$first" "wide waited for two free slots"
    # deadline units after every `one` unit, side by side; timed after them, one at a time, on the first GPU
    for u in short long long2 wide mid; do assert_num "$(at d1 start)" ">=" "$(at $u end)" "d1 after $u"; done
    assert_num "$(at d2 start)" "<" "$(at d1 end)" "the two deadline units side by side"
    assert_num "$(at t1 start)" ">=" "$(at d2 end)" "timed after the deadline units"
    assert_num "$(at t2 start)" ">=" "$(at t1 end)" "one timed unit at a time"
    assert_equal "$(gpus_of t1) $(gpus_of t2)" "3 3"
    # speed last, every GPU visible; the others one GPU each
    assert_num "$(at sp start)" ">=" "$(at t2 end)" "speed after the timed units"
    assert_equal "$(gpus_of sp)" "3,5"
    for u in short long long2 wide mid d1 d2; do [[ "$(gpus_of $u)" =~ ^[35]$ ]] || fail "$u ran on '$(gpus_of $u)'"; done
    # the longest first: one slot, so one at a time, in the order of their estimates
    : >"$LOG"
    pool_plan "$p" "a one 1 1 true" "b one 1 9 true" "c one 1 5 true"
    run --separate-stderr timeout 60 "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o2" --slots 1 "$p"
    assert_success
    assert_equal "$(awk '$2 == "start" { print $1 }' "$LOG" | tr '\n' ' ')" "b c a "
}

@test "tools: gpu-pool stopped ends every unit and all it started; run again, it runs only what had not ended" {
    export LOG=$BATS_TEST_TMPDIR/log PIDS=$BATS_TEST_TMPDIR/pids
    p=$BATS_TEST_TMPDIR/plan
    pool_plan "$p" "quick one 1 9 true" "slow one 1 1 sleep 300 & echo \$! >>\"\$PIDS\"; wait" "later timed 1 1 true"
    st=0
    timeout -s TERM 3 "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o" --gpus 0 --slots 2 "$p" 2>"$BATS_TEST_TMPDIR/err" || st=$?
    assert_equal "$st" 124
    grep -q 'gpu-pool: stopped' "$BATS_TEST_TMPDIR/err" || fail "$(cat "$BATS_TEST_TMPDIR/err")"
    sleep 1
    for pid in $(cat "$PIDS"); do
        case $(ps -o stat= -p "$pid" 2>/dev/null) in "" | Z*) ;; *) fail "a process the stopped unit started is still there" ;; esac
    done
    assert_equal "$(cut -f1 "$BATS_TEST_TMPDIR/o/done.tsv")" quick
    # again: quick is not run again, slow is (now quick), later runs
    sed -i 's/sleep 300 &/sleep 0 \&/' "$p"
    run --separate-stderr timeout 60 "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o" --gpus 0 --slots 2 "$p"
    assert_success
    assert_equal "$(grep -c '^quick start' "$LOG") $(grep -c '^slow start' "$LOG") $(grep -c '^later start' "$LOG")" "1 2 1"
    assert_equal "$(cut -f1 "$BATS_TEST_TMPDIR/o/done.tsv" | tr '\n' ' ')" "quick slow later "
}

@test "tools: gpu-pool refuses a bad plan or option with exit code 2 and one line, running nothing" {
    p=$BATS_TEST_TMPDIR/plan
    for bad in $'a\tone\t1\t1\ttrue\na\tone\t1\t1\ttrue' $'a b\tone\t1\t1\ttrue' $'a\tsome\t1\t1\ttrue' \
        $'a\tone\t0\t1\ttrue' $'a\tone\t1\tsoon\ttrue' $'a\tone\t1\t1\t'; do
        printf '%s\n' "$bad" >"$p"
        run --separate-stderr "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o" "$p"
        assert_equal "$status" 2
        assert_equal "$(grep -c . <<<"$stderr")" 1
        [[ "$stderr" == "gpu-pool: the plan"* ]] || fail "$bad: $stderr"
    done
    printf 'a\tone\t1\t1\ttrue\n' >"$p"
    for args in "--slots 0" "--limit x" "--gpus" "--frobnicate" "" "$p $p"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$ROOT/tools/gpu-pool" --out "$BATS_TEST_TMPDIR/o" $args
        assert_equal "$status" 2
        assert_equal "$(grep -c . <<<"$stderr")" 1
        [[ "$stderr" == "gpu-pool: "* ]] || fail "$args: $stderr"
    done
    [ ! -s "$BATS_TEST_TMPDIR/o/done.tsv" ] || fail "it ran $(cat "$BATS_TEST_TMPDIR/o/done.tsv")"
}

@test "tools: bats-pool's plan keeps only the checks its tag filter keeps: no group of none, which bats 1.8.2 fails" {
    f=$BATS_TEST_TMPDIR/t.bats
    {
        printf '# bats test_tags=sanitizer\n@test "a" { true; }\n# bats test_tags=sanitizer\n@test "b" { true; }\n'
        printf '@test "c" { true; }\n@test "d" { true; }\n# bats test_tags=ranks\n@test "e" { true; }\n'
        printf '# bats test_tags=timed,speed\n@test "f" { true; }\n'
    } >"$f"
    # the pool as run-tests runs it: a filter that leaves a group empty must not fail the file
    run --separate-stderr env -u BATS_TEST_NAME timeout 60 "$ROOT/tools/bats-pool" --out "$BATS_TEST_TMPDIR/p1" --jobs 2 \
        --filter-tags '!sanitizer' "$f"
    assert_success
    assert_equal "$(grep -c '^ok ' "$BATS_TEST_TMPDIR/p1/t.tap")" 4
    # --plan: two checks a unit, each kind apart; --unit runs one; the last merges the file's TAP
    run --separate-stderr "$ROOT/tools/bats-pool" --out "$BATS_TEST_TMPDIR/p2" --timing --filter-tags '!sanitizer' \
        --plan "$BATS_TEST_TMPDIR/plan" "$f"
    assert_success
    assert_equal "$(cut -f1,4,5 "$BATS_TEST_TMPDIR/plan" | tr '\t' ' ')" $'1 untimed ^(c|d)$\n1001 ranks ^(e)$\n4001 speed '
    while IFS=$'\t' read -r k n file kind re; do
        [ ! -f "$BATS_TEST_TMPDIR/p2/t.done" ] || fail "merged before its last unit ran"
        env -u BATS_TEST_NAME "$ROOT/tools/bats-pool" --out "$BATS_TEST_TMPDIR/p2" --timing --filter-tags '!sanitizer' \
            --unit "$k" "$n" "$file" "$kind" "$re" || fail "unit $k failed"
    done <"$BATS_TEST_TMPDIR/plan"
    [ -f "$BATS_TEST_TMPDIR/p2/t.done" ] || fail "not merged"
    assert_equal "$(sed 's/ in [0-9]*ms$//' "$BATS_TEST_TMPDIR/p2/t.tap" | tr '\n' ' ')" "1..4 ok 1 c ok 2 d ok 3 e ok 4 f "
}

# fake_gpu_build DIR GPUS: a build folder with the course's built tools but a gpu-probe counting GPUS
fake_gpu_build() {
    fake_build "$1" "$2"
    ln -s "$REF_BIN" "$1/solutions"
}

@test "tools: gpu-check --plan, lessons 12: 12's checks that need a GPU, its mutants, 12 graded in the handouts holding it" {
    b=$BATS_TEST_TMPDIR/b g=$BATS_TEST_TMPDIR/g
    fake_gpu_build "$b" 2
    for id in 12-allreduce 12-ready; do  # two mutants "built" (the others did not build: said in the verdict)
        mkdir -p "$b/mutants/$id" && ln -s "$REF_BIN/12_data_parallel_overlap" "$b/mutants/$id/12_data_parallel_overlap"
    done
    # two handouts "built" (a tree with 12's checks and a binary of 12): their units run 12's checks there
    for t in course-05-16.unsolved course-05-12.solved course-05-12.unsolved course-05-16.solved; do
        h=$b/gpu-check-handouts/$t
        mkdir -p "$h/tests" "$h/build/lessons"
        cp "$ROOT/tests/12_data_parallel_overlap.bats" "$h/tests/"
        ln -s "$REF_BIN/12_data_parallel_overlap" "$h/build/lessons/12_data_parallel_overlap"
    done
    run --separate-stderr "$ROOT/tools/gpu-check" --build "$b" --out "$g" --lessons 12 --plan
    assert_success
    plan=$g/plan.tsv
    # the suite: lesson 12's file alone, its checks tagged gpu, every unit's filter 'gpu,!compiles'
    assert_equal "$(awk -F'\t' '$1 ~ /^s\./ { split($1, a, "."); print a[2] }' "$plan" | sort -u)" 12_data_parallel_overlap
    assert_equal "$(grep '^s\.' "$plan" | grep -vc -- "--filter-tags gpu\\\\,\\\\\!compiles ")" 0
    want=$("$ROOT/tools/grade" --list-tags "$ROOT/tests/12_data_parallel_overlap.bats" | awk -F'\t' '("," $2 ",") ~ /,gpu,/' | wc -l)
    have=$(cat "$g"/suite/*/plan.txt "$g"/suite/plan.txt 2>/dev/null | awk -F'\t' '$4 == "timed" || $4 == "speed" { next }
        { n += split($5, x, "|") } END { print n }')
    timedspeed=$("$ROOT/tools/grade" --list-tags "$ROOT/tests/12_data_parallel_overlap.bats" |
        awk -F'\t' '("," $2 ",") ~ /,gpu,/ && ("," $2 ",") ~ /,timed,/ && ("," $2 ",") !~ /,deadline,/' | wc -l)
    assert_equal "$((have + timedspeed))" "$want"
    # classes: its deadline checks after the others, speed with every GPU; ranks weigh 2
    assert_equal "$(awk -F'\t' '$1 ~ /^s\./ { print $2 }' "$plan" | sort -u | tr '\n' ' ')" "deadline one speed "
    grep -q $'^s\\.12_data_parallel_overlap\\.10[0-9][0-9]\tone\t2\t' "$plan" || fail "no unit of ranks weighing 2"
    # the mutants built: their units run in the pool (their unit ends with 0: the verdict reads the TAP)
    assert_equal "$(awk -F'\t' '$1 ~ /^m\./ { split($1, a, "."); print a[2] }' "$plan" | sort -u | tr '\n' ' ')" "12-allreduce 12-ready "
    assert_equal "$(awk -F'\t' '$1 ~ /^m\./ && $5 !~ /; exit 0$/' "$plan" | wc -l)" 0
    grep -q "COURSE_BIN=$b/mutants/12-allreduce " "$plan" || fail "the mutant's units do not run the mutant"
    # 12 graded as handed out in the widest handout holding it, with the solutions in in the narrowest:
    # its checks (no sanitizer, none timed) in that handout, against its binary and its reference
    handouts() { awk -F'\t' '$1 ~ /^h\./ { split($1, a, "."); print a[2] "." a[3] }' "$plan" | sort -u | tr '\n' ' '; }
    assert_equal "$(handouts)" "05-12.solved 05-16.unsolved "
    h=$b/gpu-check-handouts/course-05-12.solved
    grep '^h\.05-12\.solved\.' "$plan" | grep -v "COURSE_BIN=$h/build/lessons COURSE_REF_BIN=$h/reference/solutions " &&
        fail "a unit of the handout runs other programs"
    grep '^h\.05-12\.solved\.' "$plan" | grep -vqF -- '--filter-tags \!sanitizer\,\!host-sanitizer\,\!timed ' &&
        fail "a unit of the handout runs the sanitizers or the timed checks"
    assert_equal "$(awk -F'\t' '$1 ~ /^h\.05-16\.unsolved\./ && $5 !~ /; exit 0$/' "$plan" | wc -l)" 0
    # ... or in every handout holding it, both ways
    run --separate-stderr env GPU_CHECK_HANDOUT_GRADES=every "$ROOT/tools/gpu-check" --build "$b" --out "$g" --lessons 12 --plan
    assert_success
    assert_equal "$(handouts)" "05-12.solved 05-12.unsolved 05-16.solved 05-16.unsolved "
    # one GPU: the mutants' checks of speed are left out (they need two), the suite's stay (they skip, saying why)
    fake_build "$b" 1
    run --separate-stderr "$ROOT/tools/gpu-check" --build "$b" --out "$g" --lessons 12 --plan
    assert_success
    assert_equal "$(awk -F'\t' '$1 ~ /^m\./ && $2 == "speed"' "$plan" | wc -l)" 0
    grep -q -- "--filter-tags ex:12-ready\\\\,\\\\\!speed " "$plan" || fail "the mutants' filter keeps the checks of speed"
    # refused: a lesson the course does not have, a bad resume
    run --separate-stderr "$ROOT/tools/gpu-check" --build "$b" --out "$g" --lessons 99 --plan
    assert_equal "$status" 2
    [[ "$stderr" == "gpu-check: --lessons: the course has no lesson '99' (try --help)" ]] || fail "$stderr"
}

@test "tools: a handout's lesson graded from its checks' TAP with their times: scored as grade scores, a build failed named" {
    # shellcheck source=tools/proof.bash
    . "$ROOT/tools/proof.bash"
    t=$BATS_TEST_TMPDIR/course-05-08.solved taps=$BATS_TEST_TMPDIR/taps g=$BATS_TEST_TMPDIR/grade
    mkdir -p "$t/tests" "$t/build/lessons" "$taps"
    printf '# bats test_tags=gpu,ex:06-copy-sync\n@test "06 a scored one" { true; }\n' >"$t/tests/06_per_batch_sync.bats"
    printf '# bats test_tags=gpu,ex:06-step-sync\n@test "06 another" { true; }\n@test "06 health" { true; }\n' \
        >>"$t/tests/06_per_batch_sync.bats"
    printf '@test "07 x" { true; }\n' >"$t/tests/07_event_sync.bats"
    printf '@test "08 y" { true; }\n' >"$t/tests/08_interval_sync.bats"
    ln -s /bin/true "$t/build/lessons/06_per_batch_sync"
    ln -s /bin/true "$t/build/lessons/08_interval_sync"
    printf 'x.cu:3: error: expected a ";"\n' >"$t.build.log"
    printf '1..3\nok 1 06 a scored one in 1234ms\nnot ok 2 06 another in 56 ms\nok 3 06 health in 7ms\n' >"$taps/06_per_batch_sync.tap"
    touch "$taps/06_per_batch_sync.done"
    for n in 06 07 08; do handout_lesson_grade "$ROOT" "$t" "$n" "$taps" "$g"; done
    assert_equal "$(cut -f1,2 "$g/lessons.tsv" | tr '\t\n' ': ')" "06:ran 07:build failed 08:not graded "
    grep -q $'^07\tbuild failed\t0\tx.cu:3: error: expected a ";"$' "$g/lessons.tsv" || fail "$(cat "$g/lessons.tsv")"
    # the times off the names: each check found among the tags, the scored ones with their exercise
    assert_equal "$(cut -f2,3 "$g/checks.tsv" | tr '\t\n' ': ')" "pass:06-copy-sync fail:06-step-sync pass:- "
    run handout_verdict 05-08 solved "$g"
    assert_failure
    assert_line "handout 05-08 solved: lesson 06 scores 1/2"
    assert_line "PROBLEM: handout 05-08 solved lesson 06: 1 scored checks fail: 06 another; "
    assert_line --partial "PROBLEM: handout 05-08 solved lesson 07: build failed: x.cu:3: error"
    assert_line --partial "PROBLEM: handout 05-08 solved lesson 08: not graded: its checks did not finish"
}

@test "tools: gpu-check's summary from a stored run: each phase with its time, each part's verdict, every problem named" {
    g=$BATS_TEST_TMPDIR/g
    mkdir -p "$g"
    echo "2026-11-28 10:00 UTC, 2 GPUs (x/tools/gpu-probe), 32 CPUs, commit abc1234" >"$g/when"
    printf 'build\t95\tthe course, 45 mutants, 3 handouts\nchecks\t610\t300 units, 0 failed\n' >"$g/phases.tsv"
    printf '2 passed, 1 failed, 1 skipped (the checks that need a GPU)\nfailed\n' >"$g/suite.verdict"
    printf 'PROBLEM: fails: 12 b\n' >"$g/suite.problems"
    printf '1..4\nok 1 12 a in 5ms\nok 2 13 two GPUs, speed: x in 12ms # skip a check of speed: it needs 2\nnot ok 3 12 b in 1ms\nok 4 c\n' \
        >"$g/suite.tap"
    printf '45 exercises'"'"' mutants; 0 problems\npassed\n' >"$g/mutants.verdict"
    : >"$g/mutants.problems"
    printf '05-08 graded; 1 problems\nfailed\n' >"$g/handouts.verdict"
    printf 'PROBLEM: handout 05-08 solved lesson 06: 1 scored checks fail: x; \n' >"$g/handouts.problems"
    run --separate-stderr env GPU_CHECK_REPORT_ONLY=1 "$ROOT/tools/gpu-check" --out "$g"
    assert_equal "$status" 1
    assert_line --index 0 "gpu-check: 2026-11-28 10:00 UTC, 2 GPUs (x/tools/gpu-probe), 32 CPUs, commit abc1234 ($g)"
    assert_line --index 1 "  build: the course, 45 mutants, 3 handouts (95 s)"
    assert_line --index 2 "  checks: 300 units, 0 failed (610 s)"
    assert_line --index 3 "  suite: 2 passed, 1 failed, 1 skipped (the checks that need a GPU)"
    assert_line --index 4 "  mutants: 45 exercises' mutants; 0 problems"
    assert_line --index 5 "  handouts: 05-08 graded; 1 problems"
    assert_line --index 6 "  suite skipped: 13 two GPUs, speed: x: a check of speed: it needs 2"
    assert_line --index 7 "  problem (suite): fails: 12 b"
    assert_line --index 8 "  problem (handouts): handout 05-08 solved lesson 06: 1 scored checks fail: x; "
    assert_line --index 9 "gpu-check: 2 of 3 parts failed: suite handouts (705 s)"
    assert_equal "${#lines[@]}" 10
    assert_equal "$(cat "$g/summary.txt")" "$output"
    # a part with no verdict (the run was stopped) is named as not run; all passed: exit code 0
    rm "$g/handouts.verdict"
    run --separate-stderr env GPU_CHECK_REPORT_ONLY=1 "$ROOT/tools/gpu-check" --out "$g"
    assert_line --index 5 "  handouts: not run"
    printf 'a\npassed\n' >"$g/suite.verdict"
    printf 'b\npassed\n' >"$g/handouts.verdict"
    : >"$g/suite.problems"
    : >"$g/handouts.problems"
    run --separate-stderr env GPU_CHECK_REPORT_ONLY=1 "$ROOT/tools/gpu-check" --out "$g"
    assert_success
    assert_equal "${lines[-1]}" "gpu-check: passed (705 s)"
}

# The options of the scripts of tools/ that take a value: a tool's name, then its options (two names
# of one option joined by |: its message may give either). A check below holds this table to the
# scripts (every option whose branch shifts two arguments is here); the C tools' options are read
# from their --help (those shown with a value, e.g. --window PHASE).
VALUE_OPTIONS='
bats-pool --out --jobs --filter-tags --plan
dev-check --build --lesson --lessons --tags --claim
gen-lesson --only
grade --student --lesson --lessons --build --ref-build --out --name --from-tap --tags --timeouts
grade-class --time-limit --out --build --lessons
gpu-check --out --build --lessons
gpu-pool --out --gpus --slots --deadline-jobs --limit
launch -n|--nproc --rendezvous --run-id --nodes --node-rank --restarts --grace-s
levers --rounds --out --budget-s
make-handout --lessons --out --name --arch --ref-build
multi-gpu-figures --out --img --rounds
'

# shifted_options SCRIPT: the options of SCRIPT's case branches that shift two arguments
shifted_options() {
    awk '/^[ \t]+-[-A-Za-z0-9]+( \| -[-A-Za-z0-9]+)*\)/ { label = $0; sub(/^[ \t]+/, "", label); sub(/\).*$/, "", label)
                                                         gsub(/ \| /, " ", label) }
         /shift 2/ && label != "" { print label; label = "" }
         /;;/ { label = "" }' "$1" | tr ' ' '\n'
}

@test "tools: every option that takes a value, given last without it: exit code 2 and one line naming it, within 10 s" {
    mkdir "$BATS_TEST_TMPDIR/cwd"
    cd "$BATS_TEST_TMPDIR/cwd"
    cases=()
    while read -r name options; do
        [ -n "$name" ] || continue
        for o in $options; do
            for alias in ${o//|/ }; do cases+=("$ROOT/tools/$name $alias $o"); done
        done
    done <<<"$VALUE_OPTIONS"
    for src in "$ROOT"/tools/*.c "$ROOT"/tools/*.cu; do
        t=$TOOLS/$(basename "${src%.*}")
        [ -x "$t" ] || fail "$t is not built (run make)"
        for o in $("$t" --help | sed -n 's/^  \(--[a-z-]*\) [A-Z].*/\1/p'); do cases+=("$t $o $o"); done
    done
    [ "${#cases[@]}" -gt 40 ] || fail "only ${#cases[@]} options found"
    for c in "${cases[@]}"; do
        read -r t o names <<<"$c"
        run --separate-stderr timeout 10 "$t" "$o"
        [ "$status" -eq 2 ] || fail "${t##*/} $o: exit code $status, expected 2 (124: it ran until killed)"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "${t##*/} $o: expected one line on stderr, got: $stderr"
        [[ "$stderr" == "${t##*/}: "* ]] || fail "${t##*/} $o: the line does not name the tool: $stderr"
        named=0
        for n in ${names//|/ }; do [[ "$stderr" =~ (^|[^-a-z])$n([^-a-z]|$) ]] && named=1; done
        [ "$named" -eq 1 ] || fail "${t##*/} $o: the line does not name the option: $stderr"
    done
    [ -z "$(ls -A)" ] || fail "a refused option wrote here: $(ls -A)"
}

@test "tools: the table of options that take a value holds every such option of every script" {
    while read -r t; do
        name=$(basename "$t")
        listed=" $(awk -v n="$name" '$1 == n { $1 = ""; print }' <<<"$VALUE_OPTIONS" | tr '|' ' ') "
        for o in $(shifted_options "$t"); do
            [[ "$listed" == *" $o "* ]] || fail "$name $o takes a value but is not in VALUE_OPTIONS"
        done
    done < <(scripts)
    # the reader of the scripts finds what it must: grade's --lesson, launch's -n and --nproc
    assert_equal "$(shifted_options "$ROOT/tools/launch" | head -n 2 | tr '\n' ' ')" "-n --nproc "
    shifted_options "$ROOT/tools/grade" | grep -qx -- --lesson || fail "grade --lesson not found"
}

@test "tools: the host-only tools' --help lists their exit codes without 'no usable GPU', every default inside its range" {
    for t in tracestat checkpoint-report flight-report; do
        [ -x "$TOOLS/$t" ] || fail "$TOOLS/$t is not built (run make)"
        run "$TOOLS/$t" --help
        assert_success
        assert_line --regexp "^exit codes: 0 [^,]*, 1 .*2 bad usage"
        refute_output --partial "no usable GPU"
        problems=$(help_problems <<<"$output")
        [ -z "$problems" ] || fail "$t --help: $problems"
    done
    # the programs do ask for a GPU: theirs says 3
    run "$REF_BIN/06_per_batch_sync" --help
    assert_line "exit codes: 0 success, 1 a check failed or a runtime error, 2 bad usage, 3 no usable GPU"
}

@test "tools: the help checker finds scientific notation, a default outside its range, an option run into its text" {
    run help_problems <<'TXT'
  --lr X                     SGD learning rate (1e-06..10, default 0.02)
  --from-batch N             start here (0..1000000, default -1)
  --fault none|kill|skip|order|torn|disk-full inject a fault (default none)
  --fault none|kill|skip|order|torn|disk-full
                             inject a fault (0..5, default 7)
  --ok N                     fine (0.000001..10, default 0.02)
TXT
    assert_line --index 0 --partial "scientific notation"
    assert_line --index 1 --partial "default -1 outside 0..1000000"
    assert_line --index 2 --partial "run into its description"
    assert_line --index 3 --partial "default 7 outside 0..5"
    assert_equal "${#lines[@]}" 4
}

@test "tools: the table of exit codes (docs/developers.md) has a row for every tool, every host tool and the lessons" {
    table=$(sed -n '/^### Exit codes/,/^## /p' "$ROOT/docs/developers.md" | grep '^| ')
    [ -n "$table" ] || fail "no table under ### Exit codes"
    while read -r t; do
        name=$(basename "$t")
        grep -q "\`tools/$name\`" <<<"$table" || fail "no row for tools/$name"
    done < <(scripts)
    for src in "$ROOT"/tools/*.c; do
        name=$(basename "$src" .c)
        grep -q "\`build/tools/$name\`" <<<"$table" || fail "no row for build/tools/$name"
    done
    grep -q '`build/solutions/NN_topic`' <<<"$table" || fail "no row for the lessons"
    grep -q '`tests/timed`' <<<"$table" || fail "no row for tests/timed"
    # flight-report's 4 is in it, and no host-only tool claims 3
    grep '`build/tools/flight-report`' <<<"$table" | grep -q '| 4: ' || fail "flight-report's 4 is not in the table"
    for t in tracestat fatbin-archs checkpoint-report flight-report; do
        row=$(grep "\`build/tools/$t\`" <<<"$table")
        assert_equal "$(awk -F'|' '{ gsub(/ /, "", $6); print $6 }' <<<"$row")" ""
    done
}

# ----------------------------------------------------------------------------
# lessons 14 and 16's tools on hand-made rings and checkpoints (tests/fixtures/14_flight, 16_checkpoints),
# and tools/launch's restarts, signals, process groups and refusals: no GPU, no lesson run

FL=$FIXTURES/14_flight
CK=$FIXTURES/16_checkpoints

one_line() {
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "expected one line on stderr, got: $stderr"
}

# ckpt_sum FILE: the checkpoint checksum of FILE (common/recovery/ckpt.h's ckpt_sum), 16 hex digits,
# computed here apart from the C: the bytes as little-endian 64-bit words (od pads the last with
# zeros), word k folded into lane k % 4 by FNV-1a's step, then the lanes and the byte count a byte at
# a time. Bash's arithmetic is 64-bit and wraps as C's unsigned multiplication does. In a bash of its
# own: bats' traps would run at every word.
ckpt_sum() {
    # shellcheck disable=SC2016
    bash -c 'p=1099511628211 n=$(stat -c %s "$0") k=0 h=1469598103934665603 lane=()
             for j in 0 1 2 3; do lane[j]=$h; done
             for w in $(od -An -v -tx8 "$0"); do lane[k % 4]=$(((lane[k % 4] ^ 0x$w) * p)); k=$((k + 1)); done
             for v in "${lane[@]}" "$n"; do
                 for ((b = 0; b < 64; b += 8)); do h=$(((h ^ ((v >> b) & 255)) * p)); done
             done
             printf "%016x" "$h"' "$1"
}

# The fixture's run, as a header and a manifest write it: two ranks, --in 4 --hidden 8 --layers 1
# --out 2 (58 weights), --seed 1, --batch 64, and the defaults of --lr, --prep-work, --bucket-mib.
FIXTURE_RUN="world 2 shape 4,8,2 params 58 seed 1 global-batch 64 rank-batch 32 lr 0.02 prep-work 5 bucket-bytes 26214400"

# write_rank FILE HEADER PAYLOAD_BYTES: a rank file of zero weights and losses, its checksum right
write_rank() {
    printf '%-511s\n' "$2" >"$1"
    head -c "$3" /dev/zero >>"$1"
    printf 'checksum %s\n' "$(ckpt_sum "$1")" >>"$1"
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
    printf 'course-checkpoint-manifest 3\nbatch %d\n%s\n' "$2" "$(tr ' ' '\n' <<<"$FIXTURE_RUN" | paste -d' ' - -)" \
        >"$dir/manifest"
    for r in 0 1; do
        f=$dir/rank$r.bin
        head="course-checkpoint 3 rank $r batch $2 losses $3 $FIXTURE_RUN"
        if [ "$r" = 1 ] && [ -n "${4:-}" ]; then head=$(sed "$4" <<<"$head"); fi
        write_rank "$f" "$head" $((58 * 4 + $3 * 8))
        manifest_line "$f" "$r" >>"$dir/manifest"
    done
    echo end >>"$dir/manifest"
}

# alive PID: the process runs (a zombie, dead but not yet reaped, does not)
alive() {
    [ -e "/proc/$1" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# bats test_tags=claim:14-report-differ,claim:14-report-p2p,claim:14-report-noring,claim:14-report-waits
@test "tools: flight-report names the first divergence of hand-made rings in one line, each fault by name" {
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

@test "tools: flight-report refuses what is no ring: one line, exit code 2; no ring at all: exit code 1" {
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

# Rings that look whole but are not: each once said "no divergence", exit code 0.
# bats test_tags=claim:14-report-gap
@test "tools: flight-report refuses a ring with a call missing: one line naming it, exit code 2" {
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
@test "tools: flight-report reads every ring of the run: one whose header says another world is refused, one line, exit code 2" {
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

# One ring that does not read once stopped the report (exit code 2) before it compared the others.
# bats test_tags=claim:14-report-unreadable
@test "tools: flight-report: rings that read and differ are named beside one that does not read (exit code 4)" {
    u=$BATS_TEST_TMPDIR/unread
    want="rank 1 issued all-reduce #25 (batch 8, bucket 0, 265.0 KiB) where rank 0 issued all-reduce #25 (batch 8, bucket 1, 257.0 KiB)"
    for bad in 2 0; do
        rm -rf "$u" && cp -r "$FL/clean" "$u"
        sed -i 's/^25 25 all-reduce 8 1 65792 263168 /25 25 all-reduce 8 0 67848 271392 /' "$u/flight.job7.rank1"
        head -n 2 "$FL/clean/flight.job7.rank$bad" >"$u/flight.job7.rank$bad"  # cut: no 'stopped' line
        # rank 0's ring unread: the first that reads is the one the others are compared with
        [ "$bad" = 0 ] && want="rank 2 issued all-reduce #25 (batch 8, bucket 1, 257.0 KiB) where rank 1 issued all-reduce #25 (batch 8, bucket 0, 265.0 KiB)"
        run --separate-stderr "$TOOLS/flight-report" "$u" --run job7
        assert_equal "$status" 4
        assert_equal "$output" "$want"
        one_line
        assert_equal "$stderr" "flight-report: the others were compared without this ring: $u/flight.job7.rank$bad:3: expected 'stopped WHY'"
    done
    # the rings that read agree: the one that does not is what the report says, exit code 2
    rm -rf "$u" && cp -r "$FL/clean" "$u"
    head -n 2 "$FL/clean/flight.job7.rank2" >"$u/flight.job7.rank2"
    run --separate-stderr "$TOOLS/flight-report" "$u" --run job7 --ranks
    assert_equal "$status" 2
    assert_equal "$stderr" "flight-report: $u/flight.job7.rank2:3: expected 'stopped WHY'"
    assert_equal "${lines[2]}" "rank 2: a ring that does not read"
}

# bats test_tags=claim:14-report-lengths
@test "tools: flight-report: a ring of 8 calls against rings of 30, every call completed, is a divergence (exit code 4)" {
    l=$BATS_TEST_TMPDIR/len
    cp -r "$FL/clean" "$l"
    awk 'NR == 2 { sub(/calls 30/, "calls 8") } NR > 4 { $1 -= 22; $2 -= 22 } { print }' "$FL/clean/flight.job7.rank2" \
        >"$l/flight.job7.rank2"
    run --separate-stderr "$TOOLS/flight-report" "$l"
    assert_equal "$status" 4
    assert_equal "$output" "rank 2 stopped at all-reduce #7 (batch 9, bucket 2, 65.0 KiB) where rank 0 went on to all-reduce #29 (batch 9, bucket 2, 65.0 KiB), and no call waits: the ranks issued different calls"
}

# bats test_tags=claim:16-checksum,claim:16-manifest-match
@test "tools: checkpoint-report: the newest complete checkpoint; torn, corrupt, unfinished ones passed over for the one before" {
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
    { cat "$BATS_TEST_TMPDIR/body"; printf 'checksum %s\n' "$(ckpt_sum "$BATS_TEST_TMPDIR/body")"; } >"$f"
    run "$cr" "$c"
    [[ "${lines[0]}" == "ckpt-00000019: skipped: "*"rank1.bin: its size or checksum is not the manifest's" ]] || fail "${lines[0]}"
    assert_equal "${lines[2]}" "resume: at batch 10 from ckpt-00000009"
    # a temporary file left by a rank that died while writing: not read at all
    copy
    head -c 100 "$CK/ckpt-00000019/rank1.bin" >"$c/ckpt-00000019/rank1.bin.4242.tmp"
    run "$cr" "$c"
    assert_equal "${lines[0]}" "ckpt-00000019: complete: batch 19, 2 ranks, shape 4,8,2"
}

@test "tools: checkpoint-report refuses a checkpoint of another rank count or shape: one line, exit code 2" {
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

# bats test_tags=claim:16-losses-bound
@test "tools: checkpoint-report passes over a checkpoint holding more losses than batches, or a rank's header of another run" {
    cr=$TOOLS/checkpoint-report
    # the helpers first: the fixture's checksum is ckpt_sum's, and a checkpoint they make is complete
    head -c 904 "$CK/ckpt-00000019/rank0.bin" >"$BATS_TEST_TMPDIR/body"
    assert_equal "checksum $(ckpt_sum "$BATS_TEST_TMPDIR/body")" "$(tail -c 26 "$CK/ckpt-00000019/rank0.bin" | head -c 25)"
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

# bats test_tags=claim:16-size-first,claim:16-stream
@test "tools: checkpoint-report lists every folder, streams one larger than memory, checks a header's sizes before allocating" {
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
    printf '%-511s\n' "course-checkpoint 3 rank 0 batch 0 losses 1 $run1" >"$b/rank0.bin"
    truncate -s $((512 + n * 4 + 8)) "$b/rank0.bin"
    echo "checksum 0000000000000000" >>"$b/rank0.bin"
    big_manifest() {
        printf 'course-checkpoint-manifest 3\nbatch 0\n%s\n' "$(tr ' ' '\n' <<<"$run1" | paste -d' ' - -)" >"$b/manifest"
        manifest_line "$b/rank0.bin" 0 >>"$b/manifest"
        echo end >>"$b/manifest"
    }
    big_manifest
    run "$cr" "$BATS_TEST_TMPDIR/big"  # its checksum, as the tool sums it (ckpt_sum in bash would take minutes)
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
    write_rank "$s/rank0.bin" "course-checkpoint 3 rank 0 batch 0 losses 1 ${run1/params $n/params 8589934592}" 0
    printf 'course-checkpoint-manifest 3\nbatch 0\n%s\n' "$(tr ' ' '\n' <<<"${run1/params $n/params 8589934592}" | paste -d' ' - -)" \
        >"$s/manifest"
    manifest_line "$s/rank0.bin" 0 >>"$s/manifest"
    echo end >>"$s/manifest"
    run bash -c 'ulimit -v 49152 && exec "$0" "$1"' "$cr" "$BATS_TEST_TMPDIR/small"
    assert_equal "$status" 1
    [[ "${lines[0]}" == *"/rank0.bin: torn: 538 bytes where its header says 34359738914" ]] || fail "${lines[0]}"
}

# A named pipe where a file belongs blocks whoever opens it until a writer comes: the reports,
# lesson 16's restart and rank 0's prune waited on one forever.
# bats test_tags=claim:14-not-regular
@test "tools: checkpoint-report and flight-report refuse a named pipe as a rank file, a manifest or a ring: one line, at once" {
    cr=$TOOLS/checkpoint-report
    for file in ckpt-00000019/rank1.bin ckpt-00000019/manifest; do
        rm -rf "$BATS_TEST_TMPDIR/c" && cp -r "$CK" "$BATS_TEST_TMPDIR/c"
        rm "$BATS_TEST_TMPDIR/c/$file" && mkfifo "$BATS_TEST_TMPDIR/c/$file"
        for prune in "" "--prune 19"; do
            # shellcheck disable=SC2086
            run timeout 10 "$cr" "$BATS_TEST_TMPDIR/c" $prune
            [ "$status" -ne 124 ] || fail "$file $prune: the report waited on the named pipe"
            assert_success
            assert_equal "${lines[0]}" "ckpt-00000019: skipped: $BATS_TEST_TMPDIR/c/$file: a named pipe, not a regular file"
            assert_equal "${lines[-1]}" "resume: at batch 10 from ckpt-00000009"
        done
    done
    rm -rf "$BATS_TEST_TMPDIR/r" && cp -r "$FL/clean" "$BATS_TEST_TMPDIR/r"
    rm "$BATS_TEST_TMPDIR/r/flight.job7.rank1" && mkfifo "$BATS_TEST_TMPDIR/r/flight.job7.rank1"
    run --separate-stderr timeout 10 "$TOOLS/flight-report" "$BATS_TEST_TMPDIR/r" --run job7
    [ "$status" -ne 124 ] || fail "flight-report waited on the named pipe"
    assert_equal "$status" 2
    one_line
    assert_equal "$stderr" "flight-report: $BATS_TEST_TMPDIR/r/flight.job7.rank1: a named pipe, not a regular file"
}

# A header and a manifest that agree on 2^34 weights, in a sparse file of 64 GiB that holds 4 KiB:
# its checksum streamed 64 GiB of zeros (20 s and more).
# bats test_tags=claim:16-sparse
@test "tools: checkpoint-report refuses a sparse rank file as large as its header says, at once" {
    local run1="world 1 shape 4,8,2 params 17179869184 seed 1 global-batch 64 rank-batch 64 lr 0.02 prep-work 5 bucket-bytes 1"
    b=$BATS_TEST_TMPDIR/sparse/ckpt-00000000
    mkdir -p "$b"
    printf '%-511s\n' "course-checkpoint 3 rank 0 batch 0 losses 1 $run1" >"$b/rank0.bin"
    truncate -s $((512 + 17179869184 * 4 + 8)) "$b/rank0.bin"
    echo "checksum 0000000000000000" >>"$b/rank0.bin"
    [ $(($(stat -c %b "$b/rank0.bin") * 512)) -lt $((1 << 30)) ] || skip "this file system does not keep a file's holes"
    printf 'course-checkpoint-manifest 3\nbatch 0\n%s\n' "$(tr ' ' '\n' <<<"$run1" | paste -d' ' - -)" >"$b/manifest"
    manifest_line "$b/rank0.bin" 0 >>"$b/manifest"
    echo end >>"$b/manifest"
    run timeout 5 "$TOOLS/checkpoint-report" "$BATS_TEST_TMPDIR/sparse"
    [ "$status" -ne 124 ] || fail "the report read the sparse file's 64 GiB"
    assert_equal "$status" 1
    [[ "${lines[0]}" == "ckpt-00000000: skipped: $b/rank0.bin: sparse: 68719477282 bytes, of which "*" on disk: not a file a checkpoint writes" ]] ||
        fail "${lines[0]}"
}

# bats test_tags=claim:16-prune
@test "tools: checkpoint-report --prune removes what has no manifest or is older than the newest two that verify" {
    c=$BATS_TEST_TMPDIR/c
    for b in 4 9 14 19; do make_ckpt "$c" "$b" $((b + 1)); done
    mkdir "$c/ckpt-00000012" "$c/ckpt-00000024"  # no manifest: ranks that died; 24: an earlier attempt's
    touch "$c/ckpt-00000012/rank0.bin" "$c/ckpt-00000024/rank0.bin"
    run "$TOOLS/checkpoint-report" "$c" --prune 19
    assert_success
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000014 ckpt-00000019 ckpt-00000024"
    assert_equal "${lines[-1]}" "resume: at batch 20 from ckpt-00000019"
}

# Rank 0 prunes after every checkpoint, and reading a checkpoint back costs as long as writing it
# (2026-11-27, one H200: 0.3 s for 206 MB): what goes whatever its check would say is not read. A
# rank file that is a named pipe blocks whoever opens it: the oldest checkpoint's.
# bats test_tags=claim:16-prune-unread
@test "tools: checkpoint-report --prune reads no checkpoint older than the newest two that verify: it only removes them" {
    c=$BATS_TEST_TMPDIR/c
    for b in 4 9 14; do make_ckpt "$c" "$b" $((b + 1)); done
    rm "$c/ckpt-00000004/rank1.bin"
    mkfifo "$c/ckpt-00000004/rank1.bin"
    run timeout 20 "$TOOLS/checkpoint-report" "$c" --prune 14
    [ "$status" -ne 124 ] || fail "the prune opened the oldest checkpoint's rank file (a named pipe) and waited on it"
    assert_success
    assert_equal "$(cd "$c" && echo ckpt-*)" "ckpt-00000009 ckpt-00000014"
}

# Rank 0 prunes after every checkpoint: a manifest that does not verify now (a bad block, a file
# changed) must not cost the last checkpoint that does.
# bats test_tags=claim:16-prune-verify
@test "tools: checkpoint-report --prune: newer checkpoints that do not verify cost none of the older ones that do" {
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

# bats test_tags=claim:16-prune-link
@test "tools: checkpoint-report --prune never follows a symbolic link, in the checkpoint folder or inside a checkpoint" {
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

# bats test_tags=claim:16-launch-restart,claim:16-attempt-id,claim:16-restart-usage
@test "tools: launch --restarts: every rank started again after a failure, a run id and LAUNCH_ATTEMPT each, rings kept" {
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

# Without job control a script's & jobs start with SIGINT and SIGQUIT ignored, and a process keeps
# that through exec.
# bats test_tags=claim:14-launch-signals
@test "tools: launch: every rank starts with SIGINT and SIGQUIT at their defaults, even when the launcher did not" {
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
@test "tools: launch stops what a rank started too: a wrapper's child that ignores TERM, on a signal or a failed rank" {
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
@test "tools: launch keeps the rings of a failed run in the folder it made, whatever TMPDIR's name holds ([1], *, a space)" {
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
@test "tools: launch refuses an option given without its value, one line naming it, exit code 2" {
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

@test "tools: launch: each rank's environment, simulated nodes, a fresh folder and run id, exit codes, the others stopped" {
    first_run="" hosts=""
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
        assert_equal "$rank $world $local $lworld $nvls" "$k 3 $k 3 0"
        [[ "$run" == launch-* ]] || fail "no fresh run id: $run"
        [ -z "$first_run" ] || assert_equal "$run" "$first_run"  # one id for the ranks of one launch
        first_run=$run
    done
    [ ! -e "$dir" ] || fail "the fresh rendezvous folder $dir was not removed"
    # every launch a run id of its own: no file of an earlier launch is taken for this one's
    run "$LAUNCH" -n 1 "$BATS_TEST_TMPDIR/rank"
    read -r _ _ _ _ run _ _ <"$OUT/rank0"
    [ "$run" != "$first_run" ] || fail "two launches, one run id: $run"
    # simulated nodes: every rank a node of its own on the first GPU, over loopback sockets
    cat >"$BATS_TEST_TMPDIR/sim" <<'EOS'
#!/usr/bin/env bash
echo "$RANK $LOCAL_RANK $LOCAL_WORLD_SIZE $NCCL_SOCKET_IFNAME $NCCL_IB_DISABLE $SIMULATED_NODES $NCCL_HOSTID" >"$OUT/sim$RANK"
EOS
    chmod +x "$BATS_TEST_TMPDIR/sim"
    run "$LAUNCH" -n 3 --simulate-nodes "$BATS_TEST_TMPDIR/sim"
    assert_success
    for k in 0 1 2; do
        read -r rank local lworld ifname ib sim hostid <"$OUT/sim$k"
        assert_equal "$rank $local $lworld $ifname $ib $sim" "$k 0 1 lo 1 1"
        hosts="$hosts $hostid"
    done
    assert_equal "$(tr ' ' '\n' <<<"$hosts" | grep -c .)" 3
    assert_equal "$(tr ' ' '\n' <<<"$hosts" | grep . | sort -u | wc -l)" 3  # a host id each
    # a folder given: used, kept, and cleared of what an earlier run of the same id left
    mkdir "$BATS_TEST_TMPDIR/rv"
    touch "$BATS_TEST_TMPDIR/rv/failed.job7.rank1" "$BATS_TEST_TMPDIR/rv/nccl-id.job7" "$BATS_TEST_TMPDIR/rv/other" \
        "$BATS_TEST_TMPDIR/rv/flight.job7.rank1" "$BATS_TEST_TMPDIR/rv/flight.job7.a1.rank0"
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
