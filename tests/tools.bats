#!/usr/bin/env bats
# The tools of lessons 12 and 13's figures, without a GPU: tools/multi-gpu-figures' help and
# refusals, and tools/bench's tables of 12 and 13 made from stored runs (BENCH_REPORT_ONLY):
# the JSON of hand-made runs and hand-made rank traces (tests/fixtures/bench), which the
# bench measures with tracestat as it would a real run's.

load helpers

FIG=$ROOT/tools/multi-gpu-figures

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
    run --separate-stderr env CUDA_VISIBLE_DEVICES= COURSE_BIN="$REF_BIN" "$FIG" --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 3
    assert_equal "$(grep -c . <<<"$stderr")" 1
    [[ "$stderr" == "multi-gpu-figures: no usable GPU ("* ]] || fail "$stderr"
    [ ! -e "$BATS_TEST_TMPDIR/out" ] || fail "it wrote $(ls "$BATS_TEST_TMPDIR/out")"
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
    assert_equal "$(grep -c . <<<"$rows")" 9  # 12: 2 ranks, 3 figures, 2 windows; 13: m = 1, 4, 16
    unmarked=$(grep -vF "[simulated nodes: not performance]" <<<"$rows" || true)
    [ -z "$unmarked" ] || fail "rows not marked: $unmarked"
    refute_output --regexp '(\| yes \||\| NO \||: yes|: NO)'
    assert_output --partial "| >= 0.95 | not judged (simulated nodes: not performance) |"
    # a trace whose NCCL kernels are not a step's buckets (plus the losses' average) is said untrustworthy
    jq -c '.batches = 3' "$o/r1_12t2.json" >"$o/new" && mv "$o/new" "$o/r1_12t2.json"
    bench_table "$o"
    assert_output --partial "NCCL kernels beyond batches x buckets: -1 (expected 1, the losses' average)"
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
    assert_equal "$(grep -c . <<<"$rows")" 9  # 12: 2 ranks, 3 figures, 2 windows; 13: m = 1, 4, 16
    unmarked=$(grep -vF "[simulated nodes: not performance]" <<<"$rows" || true)
    [ -z "$unmarked" ] || fail "rows not marked: $unmarked"
    refute_output --regexp '(\| yes \||\| NO \||: yes|: NO)'
    for f in 12_timeline 13_timeline_1f1b 13_timeline_gpipe; do
        [ -s "$o/img/$f.svg" ] && [ -s "$o/img/$f.txt" ] || fail "no picture $f in $o/img"
        assert_output --partial "[$f](img/$f.svg)"
    done
    [ -z "$(find "$ROOT/notes" -newer "$BATS_TEST_TMPDIR/before")" ] || fail "it wrote into notes/"
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

@test "tools: the README's table of exit codes has a row for every tool, every host tool and the lessons" {
    table=$(sed -n '/^### Exit codes/,/^## /p' "$ROOT/README.md" | grep '^| ')
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
