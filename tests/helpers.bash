# helpers.bash: what every test file loads.
#
# The programs under test come from $COURSE_BIN (default build/solutions; in a
# handout, a student's copy without solutions/, the prebuilt reference/solutions:
# `make test` there checks the machine and the course, not the student's code); the
# grader points it at build/lessons or at a student's build. Checks that compare with
# another lesson use $REF_BIN, the course's own solutions (in a handout the prebuilt
# reference/), never the student's other lessons. GPU tests call need_gpu first: it skips them, with the
# reason, where no usable GPU is found.
#
# Tags: `ex:ID` marks a check of exercise ID: it is scored, and it must fail while
# that exercise is unsolved (make dev-check proves it). A check without `ex:` is
# course health (options, no-GPU exit, sanitizers): reported, never scored.

bats_require_minimum_version 1.5.0
bats_load_library bats-support
bats_load_library bats-assert

ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
if [ -d "$ROOT/solutions" ]; then
    BIN=${COURSE_BIN:-$ROOT/build/solutions}
    REF_BIN=${COURSE_REF_BIN:-$ROOT/build/solutions}
    TOOLS=${COURSE_TOOLS:-$(dirname "$REF_BIN")/tools}  # the tools of the build under test
else  # a student's copy (tools/make-handout): the prebuilt reference (the grader: their lessons)
    BIN=${COURSE_BIN:-$ROOT/reference/solutions}
    REF_BIN=${COURSE_REF_BIN:-$ROOT/reference/solutions}
    TOOLS=${COURSE_TOOLS:-$ROOT/build/tools}
fi
FIXTURES=$ROOT/tests/fixtures

# A small training configuration: every structural check runs in about a second.
SMALL="--batches 40 --batch 64 --in 64 --hidden 256 --out 8 --reps 2 --warmup 1"
# A GPU-heavy one (GPU step about twice the host prep): what overlap there is shows in a trace.
GPU_HEAVY="--batches 30 --batch 512 --hidden 4096 --layers 4 --prep-work 0 --reps 1 --warmup 0"
# The balanced default model, few batches: efficiency against the bound.
BALANCED="--batches 60 --reps 3 --warmup 1"
# Tiny, for compute-sanitizer (its racecheck is slow).
TINY="--batches 12 --batch 16 --in 32 --hidden 64 --out 4 --reps 1 --warmup 0"
# The test delays: a spin kernel before every copy, or before every step's kernels,
# long against anything the host does between two batches at the SMALL size, so
# that a missing wait is caught every time (notes/README.md, "Test delays").
DELAY_US=${DELAY_US:-1500}
DELAYS=("" "--delay-us $DELAY_US --delay-on copy" "--delay-us $DELAY_US --delay-on compute")

# Every program a test runs is ended, with everything it started, after this long.
CHECK_TIMEOUT=${CHECK_TIMEOUT:-120}

setup() {
    export CHECK_NAME="$BATS_TEST_DESCRIPTION"  # for tests/timed's report
}

# prog NAME ARGS...: runs $BIN/NAME under the time limit (use as `run prog ...`).
prog() {
    local name=$1
    shift
    "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$BIN/$name" "$@"
}

# ref NAME ARGS...: the course's own solution of lesson NAME, under the time limit.
ref() {
    local name=$1
    shift
    "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$REF_BIN/$name" "$@"
}

# Decide once per file whether a GPU is usable (bats 1.8.2: never skip in setup_file), and
# count the GPUs this process may use: the CUDA runtime's count (tools/gpu-probe), never
# nvidia-smi's text. GPU_WHY names the real cause once (no driver, a driver too old, none
# visible), or what the course's own lesson 05 (never the program under test) said when a GPU is
# there but cannot run the course's code: never empty.
detect_gpu() {
    if [ -z "${HAVE_GPU:-}" ]; then
        HAVE_GPU=0 GPUS=0
        local probe
        probe=$("$TOOLS/gpu-probe" 2>&1) || true  # exit code 3 without a GPU: its text says why
        GPUS=$(sed -n 's/^gpus=//p' <<<"$probe")
        GPUS=${GPUS:-0}
        if [ ! -x "$TOOLS/gpu-probe" ]; then
            GPU_WHY="$TOOLS/gpu-probe is not built (run make)"
        elif [ "$GPUS" -eq 0 ]; then
            GPU_WHY="no usable GPU: $(sed -n 's/^why=//p' <<<"$probe")"
        else
            ref_runs_on_gpu
        fi
        export HAVE_GPU GPU_WHY GPUS
    fi
}

# ref_runs_on_gpu: HAVE_GPU=1 when the course's 05 runs on the GPU gpu-probe counted; else GPU_WHY,
# what its first failed start said. A start that fails for another reason than "no usable GPU" (exit
# code 3) is tried again, up to three starts a second apart: on a GPU busy with other processes
# (dev-check's lanes, simulated ranks) one start can fail, and it skipped every GPU check of its bats
# process, saying nothing (issue 43: two of the 11-external mutant's four checks, on two H200).
ref_runs_on_gpu() {
    local try out code
    GPU_WHY=""
    for try in 1 2 3; do
        # (|| : setup_file runs under set -e, and a failed start is what this loop is for)
        out=$("$ROOT/tests/timed" 60 "$REF_BIN/05_stream_overlap" --only 1 --size-mib 1 2>&1 >/dev/null) && code=0 || code=$?
        if [ "$code" -eq 0 ]; then
            HAVE_GPU=1 GPU_WHY=""
            return
        fi
        [ -n "$GPU_WHY" ] || GPU_WHY=$(head -n 1 <<<"$out")
        [ -n "$GPU_WHY" ] || GPU_WHY="the course's 05_stream_overlap --only 1 exited with code $code, saying nothing"
        [ "$code" -ne 3 ] || return 0  # no usable GPU, as it says: another start would say the same
        [ "$try" -eq 3 ] || sleep 1
    done
    GPU_WHY="$GPU_WHY (3 starts of the course's 05 failed)"
}

need_gpu() {
    [ "$HAVE_GPU" = 1 ] || skip "$GPU_WHY"
}

need_sanitizer() {
    need_gpu
    command -v compute-sanitizer >/dev/null || skip "compute-sanitizer is not on the PATH"
}

# need_overlap [copy-engines]: skips, with the reason, where work on different
# streams cannot run at once, so that a check of overlap would fail correct code:
# one hardware queue, synchronous launches, no concurrent kernels, MIG or MPS.
# With `copy-engines`, also where copies in the two directions cannot overlap.
need_overlap() {
    need_gpu
    [ "${CUDA_DEVICE_MAX_CONNECTIONS:-8}" -gt 1 ] ||
        skip "CUDA_DEVICE_MAX_CONNECTIONS=$CUDA_DEVICE_MAX_CONNECTIONS: every stream shares one hardware queue"
    [ "${CUDA_LAUNCH_BLOCKING:-0}" != 1 ] || skip "CUDA_LAUNCH_BLOCKING=1: every launch waits for the GPU"
    [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] || skip "MPS: the GPU is shared with other processes"
    local caps try
    for try in 1 2 3; do  # as ref_runs_on_gpu: a start that fails on a busy GPU is tried again
        caps=$("$ROOT/tests/timed" 60 "$REF_BIN/05_stream_overlap" --only 1 --size-mib 1 --json 2>/dev/null) && break
        caps=""
        [ "$try" -eq 3 ] || sleep 1
    done
    [ -n "$caps" ] || skip "the course's 05_stream_overlap --only 1 --json failed 3 times: what this GPU overlaps is unknown"
    [ "$(jq -r .concurrent_kernels <<<"$caps")" = 1 ] || skip "this GPU runs one kernel at a time"
    [ "$(jq -r .mig <<<"$caps")" != true ] || skip "a MIG instance: a slice of a GPU, shared"
    if [ "${1:-}" = copy-engines ]; then
        [ "$(jq -r .copy_engines <<<"$caps")" -ge 2 ] || skip "one copy engine: copies to and from the GPU take turns"
    fi
}

# The compute-sanitizer checks, one set for every lesson: its file holds one check per tool
# (memcheck, racecheck, synccheck, initcheck), each `sanitizer_check TOOL`, and this table says
# the small run of each lesson (one rank where it has several), so that no lesson's run drifts.
sanitizer_args() {
    case $1 in
    05_stream_overlap) echo "--size-mib 2 --chunks 8 --reps 1 --warmup 0 --priority-trials 2" ;;
    06_per_batch_sync | 07_event_sync) echo "$TINY" ;;
    08_interval_sync | 09_four_stream_pipeline | 11_cuda_graph_step) echo "$TINY --sync-interval 5" ;;
    10_async_loader_pipeline) echo "$TINY --workers 2 --prefetch 3 --sync-interval 5" ;;
    12_data_parallel_overlap | 14_fault_tolerance | 15_graph_data_parallel | 16_checkpoint_restart)
        echo "$TINY --bucket-mib 0.01 --timeout-s 280"
        ;;
    13_pipeline_parallel) echo "$TINY --micro-batches 2 --timeout-s 280" ;;
    *) return 1 ;;
    esac
}

# sanitizer_check TOOL: compute-sanitizer's TOOL on lesson $P's run of the table above; passes
# when the program succeeds and the tool reports no error. Skips, saying why, without a GPU or
# compute-sanitizer (or NCCL, for 12 and later). Lessons on NCCL (12 and later) run memcheck
# without its leak check (NCCL keeps allocations of its own until the process ends) and without
# reporting API errors (NCCL asks cudaFuncGetAttributes about kernels built for other GPUs, and
# takes the error as the answer; the course checks every call of its own and would exit on one).
sanitizer_check() {
    local tool=$1 args
    args=$(sanitizer_args "$P") || fail "sanitizer_args: no run for $P"
    case $P in
    0[0-9]_* | 1[01]_*) need_sanitizer ;;
    *)
        need_sanitizer
        need_nccl
        if [ "$tool" = memcheck ]; then
            # shellcheck disable=SC2086
            run "$ROOT/tests/timed" 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
                "$BIN/$P" $args
            assert_success
            assert_output --partial "ERROR SUMMARY: 0 errors"
            return
        fi
        ;;
    esac
    # shellcheck disable=SC2086
    sanitize "$tool" "$BIN/$P" $args
}

# Runs compute-sanitizer's TOOL on a program and its arguments; passes when the
# program succeeds and the tool reports no error.
sanitize() {
    local tool=$1
    shift
    local extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    run "$ROOT/tests/timed" 300 compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$@"
    assert_success
    assert_output --regexp "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed)"
}

# json_get FILE KEY: the value of a top-level key of a JSON file (empty when absent).
json_get() {
    jq -r --arg k "$2" 'if has($k) then .[$k] | tostring else empty end' "$1"  # not //: it drops false
}

# kv_get FILE KEY: the value of a key=value line (tracestat's output).
kv_get() {
    sed -n "s/^$2=//p" "$1" | head -n 1
}

# trace_kernels FILE WINDOW TRACK: the kernels and copies of one track (its thread_name) inside the
# last range named WINDOW on the main track of a course trace, as a JSON array of {name, ts, end},
# in time order.
trace_kernels() {
    jq -c --arg w "$2" --arg t "$3" '.traceEvents as $e
        | ([$e[] | select(.name == "thread_name") | {key: (.tid | tostring), value: .args.name}] | from_entries) as $tn
        | ([$e[] | select(.ph == "X" and $tn[.tid | tostring] == "main" and .name == $w)] | last) as $win
        | [$e[] | select(.ph == "X" and $tn[.tid | tostring] == $t and .ts >= $win.ts and .ts <= $win.ts + $win.dur)
            | {name, ts, end: (.ts + .dur)}] | sort_by(.ts)' "$1"
}

# started_during A B: how many of A's kernels (a trace_kernels array) saw a kernel of B start
# while they ran.
started_during() {
    jq -n --argjson a "$1" --argjson b "$2" '[$a[] | . as $x | select(any($b[]; .ts > $x.ts and .ts < $x.end))] | length'
}

# Numeric comparisons that say what they compared when they fail.
assert_num() {  # assert_num A OP B [what]  (OP: < <= > >= ==)
    if ! awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
        if (a == "" || b == "") exit 1
        if (op == "<") exit !(a + 0 < b + 0); if (op == "<=") exit !(a + 0 <= b + 0)
        if (op == ">") exit !(a + 0 > b + 0); if (op == ">=") exit !(a + 0 >= b + 0)
        if (op == "==") exit !(a + 0 == b + 0); exit 1 }'; then
        fail "expected $1 $2 $3${4:+ ($4)}"
    fi
}

# assert_step_kernels STATS BATCHES LAYERS: every kernel of ours the training steps
# issued is in a window of tracestat's output (LAYERS weight layers per step).
assert_step_kernels() {
    local s=$1 n=$2 L=$3
    assert_equal "$(kv_get "$s" 'kernel_count\[bias_act_kernel\]')" $((n * L))
    assert_equal "$(kv_get "$s" 'kernel_count\[loss_kernel\]')" "$n"
    assert_equal "$(kv_get "$s" 'kernel_count\[bias_grad_kernel\]')" $((n * L))
    assert_equal "$(kv_get "$s" 'kernel_count\[relu_back_kernel\]')" $((n * (L - 1)))
    assert_equal "$(kv_get "$s" 'kernel_count\[sgd_kernel\]')" "$n"
}

# assert_trace_complete PROGRAM BATCHES: the course's own PROGRAM, traced on the
# GPU-heavy model, holds every batch's copy in and every kernel of its step (5 weight
# layers), and CUPTI dropped no record: what the lessons' trace checks rely on, and
# nothing a student writes (their output in $BATS_TEST_TMPDIR/complete.txt).
assert_trace_complete() {
    run --separate-stderr ref "$1" $GPU_HEAVY --trace "$BATS_TEST_TMPDIR/complete.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/complete.json" --window run >"$BATS_TEST_TMPDIR/complete.txt"
    local s=$BATS_TEST_TMPDIR/complete.txt
    assert_equal "$(kv_get "$s" h2d)" "$2"
    assert_step_kernels "$s" "$2" 5
    assert_equal "$(kv_get "$s" dropped)" 0
}

# run_json NAME PROGRAM ARGS...: runs $BIN/PROGRAM with --json into
# $BATS_TEST_TMPDIR/NAME.json (its text in NAME.txt); checks the JSON is valid.
run_json() {
    local name=$1
    shift
    run --separate-stderr prog "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    printf '%s\n' "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
    if [ "$status" -ne 0 ]; then  # shown first when the test fails: what the program found wrong
        echo "$1 $* said:"
        grep -E "never|poisoned|diverge|differ|NOT|: NO|FAILED|failed|no loader|timed out|synchronous run gives" \
            <<<"$stderr" | head -n 6 | sed 's/^ */  /'
    fi
    jq -e . "$BATS_TEST_TMPDIR/$name.json" >/dev/null || fail "$name: --json output is not valid JSON"
}

# assert_verified_under_delays PROGRAM ARGS...: the run is bit-identical to the
# synchronous reference, every loss taken once, without delays and with each
# stream held back in turn: a missing wait fails here every time.
assert_verified_under_delays() {
    for delay in "${DELAYS[@]}"; do
        # shellcheck disable=SC2086
        run_json v "$@" $delay
        [ "$status" -eq 0 ] || fail "$1 $* $delay: not verified (exit code $status)"
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" matches_reference)" true
        assert_equal "$(json_get "$BATS_TEST_TMPDIR/v.json" losses_once)" true
    done
}

# assert_verified_under_test_delays PROGRAM ARGS...: as assert_verified_under_delays, under the two
# test delays alone: for a check whose own run, without a delay, is verified too (a check of speed
# or of a trace, which runs alone among the timed checks: one program start fewer there).
assert_verified_under_test_delays() {
    local DELAYS=("${DELAYS[@]:1}")
    assert_verified_under_delays "$@"
}

# check_rejects PROGRAM OPTION VALUE...: each value must be refused with exit code 2
# and exactly one line on stderr that names the option.
check_rejects() {
    local name=$1 option=$2
    shift 2
    for value in "$@"; do
        run --separate-stderr prog "$name" "--$option" "$value"
        [ "$status" -eq 2 ] || fail "$name --$option '$value': exit code $status, expected 2 (bad usage)"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "$name --$option '$value': expected one line on stderr, got: $stderr"
        [[ "$stderr" == *"--$option"* ]] || fail "$name --$option '$value': the message does not name the option: $stderr"
    done
}

# check_training_options NAME [all]: the options every training lesson takes (one
# parser, common/train/trainer.c) refuse an out-of-range value each; with `all`, every kind
# of bad value (lesson 06 checks the shared parser so; the other lessons show that they
# use it, at a sixth of the program starts: each start loads cuBLAS, about 0.1 s).
check_training_options() {
    local name=$1
    if [ "${2:-}" = all ]; then
        for option in batches batch in hidden layers out reps; do
            check_rejects "$name" "$option" abc 0 -1 99999999999999999999 1.5
        done
        check_rejects "$name" prep-work abc -1 100001 99999999999999999999
        check_rejects "$name" seed abc -1 2147483648
        check_rejects "$name" warmup abc -1 11
        check_rejects "$name" lr abc 0 -0.1 1e400 nan
        check_rejects "$name" delay-us abc -1 100001
        check_rejects "$name" delay-on abc 1 copies
    else
        for option in batches batch in hidden layers out reps; do check_rejects "$name" "$option" 0; done
        check_rejects "$name" prep-work 100001
        check_rejects "$name" seed -1
        check_rejects "$name" warmup 11
        check_rejects "$name" lr 0
        check_rejects "$name" delay-us -1
        check_rejects "$name" delay-on copies
    fi
    # a trace file that cannot be written: refused before any work
    run --separate-stderr prog "$name" --trace /nonexistent-folder/t.json --batches 1
    [ "$status" -eq 2 ] || fail "$name --trace to a folder that does not exist: exit code $status, expected 2"
    [[ "$stderr" == *"--trace"* ]] || fail "$name --trace: the message does not name the option: $stderr"
}

# help_problems: the lines of a --help text (on stdin) that break its rules, one per
# line, empty when none: an option line states at most one default; a range is
# written "(MIN..MAX, default D)" with every number in digits (never 2.1e+09 or 1e-06),
# and the default lies inside the range. An option whose name and value overflow the
# option column has its description on the next line (a line of spaces first): it is
# read as part of the option's line; no description runs into the option's name.
help_problems() {
    awk '
    function judge(line,   r, parts, mm, d) {
        if (gsub(/default/, "default", line) > 1) { print "two defaults: " line; return }
        if (line ~ /[0-9]e[-+]?[0-9]/) { print "a number in scientific notation: " line; return }
        if (match(line, /\([^()]*\.\.[^()]*, default [^()]*\)$/)) {
            r = substr(line, RSTART + 1, RLENGTH - 2)
            split(r, parts, /, default /); split(parts[1], mm, /\.\./); d = parts[2]
            if (d !~ /^-?[0-9.e+-]+$/) return
            if (d + 0 < mm[1] + 0 || d + 0 > mm[2] + 0) print "default " d " outside " mm[1] ".." mm[2] ": " line
        }
    }
    /^  --/ {
        if (pending != "") judge(pending)
        pending = $0
        # an option as long as the column, or longer, with text right after it: it ran into its description
        if (match($0, /^  --[^ ]+( [^ ]+)? /) && RLENGTH > 29 && substr($0, RLENGTH + 1, 1) != "") print "an option run into its description: " $0
        next
    }
    pending != "" && /^   +[^ -]/ { sub(/^ +/, " "); pending = pending $0; next }
    { if (pending != "") judge(pending); pending = "" }
    END { if (pending != "") judge(pending) }'
}

# check_help NAME: NAME --help succeeds, names the exit codes, and breaks none of
# help_problems' rules.
check_help() {
    run prog "$1" --help
    assert_success
    assert_output --partial "exit codes"
    local problems
    problems=$(help_problems <<<"$output")
    [ -z "$problems" ] || fail "$1 --help: $problems"
}

# The checks every program must pass without a GPU.
check_no_gpu_exit() {
    local name=$1
    shift
    run --separate-stderr env CUDA_VISIBLE_DEVICES= "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$BIN/$name" "$@"
    assert_equal "$status" 3
    [[ "$stderr" == *"no usable GPU"* ]] || fail "expected 'no usable GPU' on stderr, got: $stderr"
}

# check_refused ENV... PROGRAM ARGS...: refused with exit code 2 and one line on stderr (run's
# $stderr, for what the caller checks of it)
check_refused() {
    run --separate-stderr env "$@"
    [ "$status" -eq 2 ] || fail "$*: exit code $status, expected 2: $stderr"
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "$*: expected one line on stderr, got: $stderr"
}

# check_dist_rejects PROGRAM: the options every lesson of several ranks takes (common/dist:
# --timeout-s, --rendezvous, the test faults), each bad value refused with exit code 2, one line
check_dist_rejects() {
    check_rejects "$1" timeout-s abc 0 3601
    check_rejects "$1" fault-rank abc -2 65536
    check_rejects "$1" fault-at-batch abc -2
    check_rejects "$1" fault abc 1 both kill
    check_rejects "$1" rendezvous /nonexistent-folder
}

# check_no_gpu_ranks PROGRAM ARGS...: without a GPU, on one rank and on two under tools/launch,
# every rank says so, exit code 3
check_no_gpu_ranks() {
    local name=$1
    shift
    check_no_gpu_exit "$name" "$@"
    run --separate-stderr env CUDA_VISIBLE_DEVICES= "$ROOT/tests/timed" 60 "$LAUNCH" -n 2 "$BIN/$name" "$@"
    assert_equal "$status" 3
    assert_equal "$(grep -c "no usable GPU" <<<"$stderr")" 2
}

# ----------------------------------------------------------------------------
# Several ranks (lessons 12 and 13). A check of N ranks runs them on N GPUs where that
# many are visible, else as simulated nodes on one (tools/launch --simulate-nodes: every
# rank a node of its own, NCCL over loopback sockets): results, order, traces and
# failures are checked either way. Only a check of speed needs separate GPUs.
LAUNCH=$ROOT/tools/launch

# detect_nccl PROGRAM: in setup_file; HAVE_NCCL=1 where PROGRAM was built, else the reason.
detect_nccl() {
    if [ -x "$BIN/$1" ]; then
        HAVE_NCCL=1 NCCL_WHY=""
    else
        HAVE_NCCL=0
        NCCL_WHY="$(make -s -C "$ROOT" nccl-status 2>/dev/null | head -n 1)"
        [[ "$NCCL_WHY" == "NCCL not found"* ]] || NCCL_WHY="$BIN/$1 is not built (run make)"
    fi
    export HAVE_NCCL NCCL_WHY
}

need_nccl() {
    [ "$HAVE_NCCL" = 1 ] || skip "$NCCL_WHY"
}

need_nccl_gpu() {
    need_nccl
    need_gpu
}

# need_separate_gpus N: for checks of speed alone.
need_separate_gpus() {
    need_nccl_gpu
    [ "${GPUS:-0}" -ge "$1" ] ||
        skip "a check of speed: it needs $1 separate GPUs, ${GPUS:-0} visible (simulated nodes time loopback sockets)"
}

# launch_options N: tools/launch's options for N ranks on this machine.
launch_options() {
    if [ "${GPUS:-0}" -ge "$1" ]; then echo "-n $1"; else echo "-n $1 --simulate-nodes"; fi
}

# run_ranks N NAME PROGRAM ARGS...: N ranks of $BIN/PROGRAM under tools/launch with --json;
# rank 0's JSON (it carries every rank's figures) into $BATS_TEST_TMPDIR/NAME.json, every
# rank's stderr into NAME.txt. On a failure, what the ranks found wrong is shown first.
run_ranks() {
    local n=$1 name=$2 program=$3
    shift 3
    # shellcheck disable=SC2046
    run --separate-stderr "$ROOT/tests/timed" "$CHECK_TIMEOUT" "$LAUNCH" $(launch_options "$n") "$BIN/$program" "$@" --json
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/$name.json"
    printf '%s\n' "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
    if [ "$status" -ne 0 ]; then
        echo "$n ranks of $program $* said:"
        grep -E "never|poisoned|diverge|differ|NOT|: NO|FAILED|failed|wrong|abort|timed out|exercise" <<<"$stderr" |
            grep -v ': stop timeline, ' | head -n 6 | sed 's/^ */  /'
    fi
    jq -e . "$BATS_TEST_TMPDIR/$name.json" >/dev/null || fail "$name: rank 0's --json output is not valid JSON"
    if [ "${GPUS:-0}" -lt "$n" ] && [ "$status" -eq 0 ]; then  # the program must say it was simulated
        [ "$(json_get "$BATS_TEST_TMPDIR/$name.json" simulated_nodes)" = true ] ||
            fail "$name: $n ranks on ${GPUS:-0} GPUs, yet the JSON does not say simulated_nodes"
        [ "$(json_get "$BATS_TEST_TMPDIR/$name.json" performance)" = false ] ||
            fail "$name: simulated nodes, yet the JSON does not say performance: false"
    fi
}

# stop_problems PROGRAM RANKS FAILING ENDED: what is wrong with the stop of a run whose rank FAILING
# failed with a note, a line each (nothing when nothing is), from the ranks' stderr (on stdin) and
# ENDED, the wall clock once the launch had returned. Each rank ends with its stop timeline
# (common/dist/dist_stop.c): seconds from the failed rank's note, and the design's intervals. By
# design (notes/12, "stopping when a rank fails") a waiting rank looks for a note every E s and
# stops on seeing one; from then the watchdog, looking every W s, gives its stop (the abort, the
# exit) L s before it ends the process. So every rank has begun its exit E + L + W after the note;
# the exit itself, the driver freeing the process's GPU context and NCCL's, takes up to
# PROCESS_END_S more (1.5 s seen: 13's four simulated stages, three of them ended by the watchdog,
# four H200, 2026-11-28, their launch ending 6.54 s after the note); launch sees it within its
# 0.1 s poll, and LAUNCH_SETTLE_S (0.5) is for launch and tests/timed to end. What ran before the
# note (the ranks' start, batches 0-4) is no part of the stop.
LAUNCH_SETTLE_S=0.5 PROCESS_END_S=2
stop_problems() {
    local program=$1 n=$2 failing=$3 ended=$4 text line r from origin="" e="" w="" l=""
    text=$(cat)
    for ((r = 0; r < n; r++)); do
        line=$(grep -m 1 "^$program rank $r: stop timeline, " <<<"$text")
        if [ -z "$line" ]; then
            echo "rank $r said no stop timeline"
            continue
        fi
        if [ "$r" -eq "$failing" ]; then from="its own note"; else from="rank $failing's note"; fi
        [[ "$line" == *"seconds from $from (wall clock "* ]] || echo "rank $r's stop answers no note of rank $failing: $line"
        [[ "$line" =~ \(wall\ clock\ ([0-9.]+)\) ]] || continue
        if [ -z "$origin" ]; then
            origin=${BASH_REMATCH[1]}
        elif [ "${BASH_REMATCH[1]}" != "$origin" ]; then
            echo "rank $r's note is dated ${BASH_REMATCH[1]}, another rank's $origin: not the same note"
        fi
        [[ "$line" =~ every\ ([0-9.]+)\ s,\ the\ watchdog\ every\ ([0-9.]+)\ s,\ a\ stop\ given\ ([0-9.]+)\ s$ ]] &&
            e=${BASH_REMATCH[1]} w=${BASH_REMATCH[2]} l=${BASH_REMATCH[3]}
    done
    [ -n "$origin" ] && [ -n "$l" ] || return 0  # said above
    awk -v end="$ended" -v t="$origin" -v e="$e" -v w="$w" -v l="$l" -v f="$failing" -v settle="$LAUNCH_SETTLE_S" \
        -v exit_s="$PROCESS_END_S" 'BEGIN {
        bound = e + l + w + exit_s + 0.1 + settle
        if (end - t > bound)
            printf "the stop took %.2f s from rank %s\047s note to the end of the launch, over the design\047s %.2f s " \
                "(notes looked for every %s s, the watchdog every %s s, a stop given %s s, %s s for a process to end; " \
                "launch\047s 0.1 s, %s s to end)\n", end - t, f, bound, e, w, l, exit_s, settle }'
}

# assert_stops_by_note PROGRAM RANKS ARGS...: for each rank failing in turn (the last, then the
# first), --fault error at batch 5: every rank stops by itself (a grace period longer than the
# check), the failed one says so, every other one names it, and the stop, from the failed rank's
# note to the last rank's end, lasts no longer than the design gives it (stop_problems). A failure
# shows every rank's stop timeline: where the seconds went.
assert_stops_by_note() {
    local program=$1 n=$2 problems ended
    shift 2
    for failing in $((n - 1)) 0; do
        # shellcheck disable=SC2046
        run --separate-stderr "$ROOT/tests/timed" 90 "$LAUNCH" $(launch_options "$n") --grace-s 60 "$BIN/$program" \
            "$@" --fault error --fault-rank "$failing" --fault-at-batch 5 --timeout-s 30
        ended=$(date +%s.%N)
        assert_equal "$status" 1
        problems=$(stop_problems "$program" "$n" "$failing" "$ended" <<<"$stderr")
        [ -z "$problems" ] || fail "$n ranks, rank $failing failing: $problems
the ranks' stop timelines:
$(grep ': stop timeline, ' <<<"$stderr")"
        [[ "$stderr" == *"$program rank $failing: stopping at batch 5"* ]] || fail "rank $failing's line: $stderr"
        for ((r = 0; r < n; r++)); do
            [ "$r" -eq "$failing" ] && continue
            [[ "$stderr" == *"$program rank $r: rank $failing failed"* ]] || fail "rank $r does not name rank $failing: $stderr"
        done
        [[ "$stderr" != *"launch:"* ]] || fail "the launcher had to stop a rank: $stderr"
    done
}

# assert_stops_by_timeout PROGRAM RANKS ARGS...: the last rank hangs at batch 5 (its GPU stops
# answering, no note). The others give up after --timeout-s (8 s), each leaving a note that says
# so; the hanging rank stops when it reads one. Every rank stops by itself, not long after 8 s,
# and every rank's line says that the time ran out (its own, or the note it quotes).
assert_stops_by_timeout() {
    local program=$1 n=$2
    shift 2
    SECONDS=0
    # shellcheck disable=SC2046
    run --separate-stderr "$ROOT/tests/timed" 90 "$LAUNCH" $(launch_options "$n") --grace-s 60 "$BIN/$program" "$@" \
        --fault hang --fault-rank $((n - 1)) --fault-at-batch 5 --timeout-s 8
    assert_equal "$status" 1
    assert_num "$SECONDS" ">=" 8 "seconds until every rank had stopped (the time limit is 8 s)"
    [ "$SECONDS" -lt 30 ] || fail "expected $SECONDS < 30 (seconds until every rank had stopped, the time limit 8 s); the ranks' stop timelines:
$(grep ': stop timeline, ' <<<"$stderr")"
    [[ "$stderr" == *"$program rank $((n - 1)): hanging at batch 5"* ]] || fail "the hanging rank's line: $stderr"
    for ((r = 0; r < n; r++)); do
        grep -q "^$program rank $r: .*nothing happened for 8 s.*(--timeout-s).*aborting" <<<"$stderr" ||
            fail "rank $r does not say that the time ran out: $stderr"
    done
    [[ "$stderr" != *"stopping at batch"* ]] || fail "a rank stopped with an error, not by hanging: $stderr"
    [[ "$stderr" != *"launch:"* ]] || fail "the launcher had to stop a rank: $stderr"
}

# fsync_shim: tests/fsync-log.c built as an LD_PRELOAD library (gcc, seconds); prints its path.
# With LD_PRELOAD=that and FSYNC_LOG=FILE, a program's fsync, fdatasync and renames are logged
# in order, one line each ("PID fsync PATH", "PID rename FROM TO"): no strace needed.
fsync_shim() {
    local so=$BATS_FILE_TMPDIR/fsync-log.so
    [ -f "$so" ] || gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC "$ROOT/tests/fsync-log.c" -o "$so" -ldl ||
        fail "tests/fsync-log.c does not build"
    echo "$so"
}

# ----------------------------------------------------------------------------
# A run inside a check (make, a handout's grade, a nested suite), as a user types it.

# a_user [NAME=VALUE...] COMMAND...: COMMAND with a user's environment, not the one this check
# passes down: none of make's variables (its -j and jobserver), none of the outer bats's BATS_*
# but BATS_LIB_PATH (where its libraries are), BATS_TEST_TIMEOUT set but empty (the outer check
# has its limit; bats 1.8.2 can leave its countdown running), and bats's own folder off the PATH:
# inside a check PATH begins with it, and its `bats` needs a function that bats's wrapper exports
# and /bin/sh drops (make runs a recipe with quotes through /bin/sh): a nested bats found there ran
# no check ("Executed 0 instead of expected 1 tests", issue 43). NAME=VALUE are set after that.
a_user() {
    local v unset=()
    for v in $(compgen -e); do
        case $v in
        BATS_LIB_PATH) ;;
        BATS_* | MAKELEVEL | MAKEFLAGS | MFLAGS) unset+=(-u "$v") ;;
        esac
    done
    env "${unset[@]}" PATH="$(tr ':' '\n' <<<"$PATH" | grep -vxF "${BATS_LIBEXEC:-/nonexistent}" | paste -sd: -)" \
        BATS_TEST_TIMEOUT= "$@"
}

# ----------------------------------------------------------------------------
# Documents: README.md and the notes (the course's, and a handout's).

# broken_links FILE.md...: "FILE: TARGET" for every relative link or image of FILE
# whose target (without its #anchor) is no file or folder beside FILE; web links,
# mail links and anchors of the same page are left out.
broken_links() {
    local md dir target path
    for md in "$@"; do
        dir=$(dirname "$md")
        while IFS= read -r target; do
            path=${target%%#*}
            [ -n "$path" ] || continue
            [ -e "$dir/$path" ] || echo "$md: $target"
        done < <(grep -o '\]([^)]*)' "$md" | sed 's/^](//; s/)$//; s/[[:space:]].*$//' | grep -vE '^(https?|mailto|ftp):|^#')
    done
}

# cited_paths ROOT FILE.md...: "FILE: PATH" for every path of the course FILE names in backticks
# (`common/dist/dist_env.c`, `build/tools/tracestat DIR`) that is no file under ROOT: a built program
# by its source (build/tools/X: tools/X.c; build/solutions/X: solutions/X). Patterns (NN_topic,
# *, ...) and placeholders in capitals are left out.
cited_paths() {
    local md root=$1
    shift
    for md in "$@"; do
        grep -o '`[^`]*`' "$md" | tr -d '`' | tr ' (),;:' '\n\n\n\n\n\n' |
            grep -E '^(\./)?(common|tools|solutions|lessons|tests|notes|build/tools|build/solutions|build/lessons)/[A-Za-z0-9_.-]' |
            grep -vE 'NN|\*|\.\.\.|[A-Z]{2,}' | sort -u | while read -r p; do
            p=${p#./}; p=${p%.}
            case $p in
            build/tools/*) src=${p#build/tools/}; src=tools/${src%%/*}.c ;;
            build/solutions/* | build/lessons/*) src=${p#build/*/}; src=solutions/${src%%/*} ;;
            *) src=$p ;;
            esac
            [ -e "$root/$src" ] || [ -e "$root/${src%.c}.cu" ] || echo "$md: $p"  # tools/*.cu: sm-share
        done
    done
}

# assert_torchrun_like_launch PROGRAM "KEYS" ARGS...: PROGRAM on two ranks under tools/launch, then
# under `torchrun --standalone --no-python` (PyTorch's launcher; the check skips where it is not
# installed), each with ARGS; both verified, torchrun's stdout rank 0's JSON alone (its own lines go
# to stderr), and the JSON's KEYS (the bits: losses, weights) the same in both. torchrun sets RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and TORCHELASTIC_RUN_ID (the run's id,
# common/dist/dist_env.c); the NCCL id goes through the rendezvous folder, as under tools/launch.
# The two JSON objects stay in $BATS_TEST_TMPDIR/launched.json and torchrun.json.
assert_torchrun_like_launch() {
    local program=$1 keys=$2 k rv f node=()
    shift 2
    command -v torchrun >/dev/null || skip "torchrun is not installed (PyTorch's launcher: pip install torch)"
    export NCCL_ALGO=Ring NCCL_PROTO=Simple  # nothing but the launcher varies between the two runs
    run_ranks 2 launched "$program" "$@"
    assert_success
    rv=$BATS_TEST_TMPDIR/rv
    mkdir -m 700 "$rv"
    if [ "${GPUS:-0}" -lt 2 ]; then
        # one GPU: torchrun's two processes would share it, which NCCL refuses on one host ("Duplicate
        # GPU detected"); each made a node of its own, as tools/launch --simulate-nodes does
        cat >"$BATS_TEST_TMPDIR/node" <<'NODE'
#!/usr/bin/env bash
export LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NCCL_HOSTID="torchrun-${TORCHELASTIC_RUN_ID:-run}-node$RANK" \
    NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 SIMULATED_NODES=1
exec "$@"
NODE
        chmod +x "$BATS_TEST_TMPDIR/node"
        node=("$BATS_TEST_TMPDIR/node")
    fi
    run --separate-stderr env RENDEZVOUS_DIR="$rv" "$ROOT/tests/timed" "$CHECK_TIMEOUT" torchrun --standalone \
        --no-python --nproc-per-node 2 "${node[@]}" "$BIN/$program" "$@" --json
    [ "$status" -eq 0 ] || fail "torchrun: exit code $status: $(tail -n 5 <<<"$stderr")"
    f=$BATS_TEST_TMPDIR/torchrun.json
    printf '%s\n' "$output" >"$f"
    jq -e . "$f" >/dev/null || fail "torchrun's stdout is not rank 0's JSON: $output"
    assert_equal "$(json_get "$f" world_size) $(json_get "$f" launcher)" "2 tools/launch or torchrun"
    assert_equal "$(json_get "$f" simulated_nodes)" "$(json_get "$BATS_TEST_TMPDIR/launched.json" simulated_nodes)"
    for k in $keys; do
        [ -n "$(json_get "$f" "$k")" ] || fail "torchrun's JSON has no $k"
        assert_equal "$k $(json_get "$f" "$k")" "$k $(json_get "$BATS_TEST_TMPDIR/launched.json" "$k")"
    done
}
