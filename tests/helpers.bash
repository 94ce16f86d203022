# helpers.bash: what every test file loads.
#
# The programs under test come from $COURSE_BIN (default build/solutions); the
# grader points it at build/lessons or at a student's build. GPU tests call
# need_gpu first: it skips them, with the reason, where no usable GPU is found.

bats_require_minimum_version 1.5.0
bats_load_library bats-support
bats_load_library bats-assert

ROOT=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
BIN=${COURSE_BIN:-$ROOT/build/solutions}
TOOLS=$ROOT/build/tools
FIXTURES=$ROOT/tests/fixtures

# A small training configuration: every structural check runs in about a second.
SMALL="--batches 40 --batch 64 --in 64 --hidden 256 --out 8 --reps 2 --warmup 1"
# A GPU-heavy one (GPU step about twice the host prep): what overlap there is shows in a trace.
GPU_HEAVY="--batches 30 --batch 512 --hidden 4096 --layers 4 --prep-work 0 --reps 1 --warmup 0"
# Tiny, for compute-sanitizer (its racecheck is slow).
TINY="--batches 12 --batch 16 --in 32 --hidden 64 --out 4 --reps 1 --warmup 0"

# Decide once per file whether a GPU is usable (bats 1.8.2: never skip in setup_file).
detect_gpu() {
    if [ -z "${HAVE_GPU:-}" ]; then
        HAVE_GPU=0
        GPU_WHY="$("$ROOT/build/solutions/05_stream_overlap" --only 1 --size-mib 1 2>&1 >/dev/null | head -n 1)"
        if "$ROOT/build/solutions/05_stream_overlap" --only 1 --size-mib 1 >/dev/null 2>&1; then
            HAVE_GPU=1
            GPU_WHY=""
        fi
        export HAVE_GPU GPU_WHY
    fi
}

need_gpu() {
    [ "$HAVE_GPU" = 1 ] || skip "$GPU_WHY"
}

need_sanitizer() {
    need_gpu
    command -v compute-sanitizer >/dev/null || skip "compute-sanitizer is not on the PATH"
}

# Runs compute-sanitizer's TOOL on a program and its arguments; passes when the
# program succeeds and the tool reports no error.
sanitize() {
    local tool=$1
    shift
    local extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    run compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$@"
    assert_success
    assert_output --regexp "(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed)"
}

# json_get FILE KEY: the value of a top-level key in a program's --json output.
json_get() {
    sed -n "s/^  \"$2\": \(.*\)$/\1/p" "$1" | sed 's/,$//; s/^"\(.*\)"$/\1/' | head -n 1
}

# kv_get FILE KEY: the value of a key=value line (tracestat's output).
kv_get() {
    sed -n "s/^$2=//p" "$1" | head -n 1
}

# Numeric comparisons that say what they compared when they fail.
assert_num() {  # assert_num A OP B (OP: < <= > >= ==)
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

# Runs a program with --json into $BATS_TEST_TMPDIR/NAME.json; checks the JSON is valid.
run_json() {
    local name=$1
    shift
    run --separate-stderr "$@" --json
    echo "$output" >"$BATS_TEST_TMPDIR/$name.json"
    echo "$stderr" >"$BATS_TEST_TMPDIR/$name.txt"
    if [ "$status" -ne 0 ]; then  # shown first when the test fails: what the program found wrong
        echo "$(basename "$1") said:"
        grep -E "never|poisoned|diverge|differ|NOT|: NO|FAILED|no loader|failed|synchronous run gives" \
            <<<"$stderr" | head -n 6 | sed 's/^ */  /'
    fi
    "$TOOLS/jsoncheck" "$BATS_TEST_TMPDIR/$name.json" || fail "$name: --json output is not valid JSON"
}

# check_rejects PROGRAM OPTION VALUE...: each value must be refused with exit code 2
# and exactly one line on stderr that names the option.
check_rejects() {
    local prog=$1 option=$2
    shift 2
    for value in "$@"; do
        run --separate-stderr "$BIN/$prog" "--$option" "$value"
        [ "$status" -eq 2 ] || fail "$prog --$option '$value': exit code $status, expected 2 (bad usage)"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "$prog --$option '$value': expected one line on stderr, got: $stderr"
        [[ "$stderr" == *"--$option"* ]] || fail "$prog --$option '$value': the message does not name the option: $stderr"
    done
}

# The options every training lesson takes, with values each must refuse.
check_training_options() {
    local prog=$1
    for option in batches batch in hidden layers out reps; do
        check_rejects "$prog" "$option" abc 0 -1 99999999999999999999 1.5
    done
    check_rejects "$prog" prep-work abc -1 100001 99999999999999999999
    check_rejects "$prog" seed abc -1 2147483648
    check_rejects "$prog" warmup abc -1 11
    check_rejects "$prog" lr abc 0 -0.1 1e400 nan
}

# The checks every program must pass without a GPU.
check_no_gpu_exit() {
    local prog=$1
    shift
    run --separate-stderr env CUDA_VISIBLE_DEVICES= "$BIN/$prog" "$@"
    assert_equal "$status" 3
    [[ "$stderr" == *"no usable GPU"* ]] || fail "expected 'no usable GPU' on stderr, got: $stderr"
}
