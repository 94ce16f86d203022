#!/usr/bin/env bats
# Lesson 15: lesson 12's data-parallel step, its all-reduces included, captured as CUDA graphs and
# replayed with one launch per batch on every rank. Built only where make finds NCCL; its checks
# skip with that reason. The one-rank checks run on any GPU; those of two and four ranks on as
# many GPUs where they are visible, else as simulated nodes on one; only the checks of speed wait
# for separate GPUs. Scored checks (ex:) run the student's graphs under the test delays: a
# capture, a loss event or a launch missing diverges there every time.

load helpers

# every run of several ranks pays for NCCL's start and its network: 16 batches a run, more than
# the 12 graphs of the ring, so that every graph is launched and the first ones twice
NB=16
SMALL=${SMALL/--batches 40/--batches $NB}

P=15_graph_data_parallel
# SMALL with three buckets: layers 4-3 | 2 | 1 (a quarter MiB closes a bucket)
SMALL15="$SMALL --bucket-mib 0.25"
# lesson 11's small model, 64 samples a rank, no host work: the host issues the eager step more
# slowly than the GPU runs it
LAUNCH_BOUND="--batches 400 --batch 128 --in 64 --hidden 256 --out 8 --prep-work 0 --reps 3 --warmup 1"

setup_file() {
    detect_nccl "$P"
    detect_gpu
}

# nccl_is_2_28: skips, with the version, where make found another NCCL than the one these checks
# measured (notes/15: what NCCL 2.28.3 accepts inside a capture, another version may refuse)
nccl_is_2_28() {
    local v
    v=$(make -s -C "$ROOT" nccl-status 2>/dev/null | sed -n 's/^NCCL \([0-9.]*\) .*/\1/p')
    [[ "$v" == 2.28.* ]] || skip "NCCL ${v:-unknown}: this check holds for NCCL 2.28 (notes/15)"
}

# ratio A B: A / B
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { print a / b }'
}

# ----------------------------------------------------------------------------
# course health: no GPU needed

@test "15 builds, and --help lists its options, one default each inside its range, and how to run ranks on one GPU" {
    need_nccl
    check_help "$P"
    for option in --bucket-mib --ready-after --eager --no-warm-up --compare-priority --break-rule --rendezvous --timeout-s --fault \
        --fault-rank --fault-at-batch --delay-on --trace --json --capture-workspace --no-upload; do
        assert_output --partial -- "$option"
    done
    assert_output --partial "tools/launch -n 2 --simulate-nodes"
}

@test "15 refuses bad values with exit code 2 and one line naming the option" {
    need_nccl
    check_training_options "$P"
    check_rejects "$P" break-rule abc 1 both
    check_rejects "$P" bucket-mib abc 0 -1 4097 nan
    check_rejects "$P" ready-after abc 1
    check_dist_rejects "$P"
    check_rejects "$P" capture-workspace abc 1 both none
    # --eager captures nothing: the options about graphs are refused beside it
    for extra in --no-warm-up --compare-priority "--capture-workspace library" --no-upload; do
        check_refused CUDA_VISIBLE_DEVICES= "$BIN/$P" $SMALL15 --eager $extra
        [[ "$stderr" == *"--eager captures no graph"* ]] || fail "--eager $extra: $stderr"
    done
    # a graph that allocates has one executable form at a time: no prioritized second one
    check_refused CUDA_VISIBLE_DEVICES= "$BIN/$P" $SMALL15 --capture-workspace library --compare-priority
    [[ "$stderr" == *"--capture-workspace library"*"--compare-priority"* ]] || fail "$stderr"
    # the levers alone start (no GPU here: exit code 3, after the options were taken)
    for extra in "--capture-workspace own" "--capture-workspace library" --no-upload; do
        run --separate-stderr env CUDA_VISIBLE_DEVICES= "$BIN/$P" $SMALL15 $extra
        assert_equal "$status" 3
    done
    # one rank cannot show a collective the others never captured
    check_refused CUDA_VISIBLE_DEVICES= "$BIN/$P" $SMALL15 --break-rule one-rank
    [[ "$stderr" == *"--break-rule one-rank needs two ranks"* ]] || fail "$stderr"
}

@test "15 without a GPU says so and exits with code 3, on one rank or two" {
    need_nccl
    check_no_gpu_ranks "$P" $SMALL15
}

@test "15 stands on 12: it links 12's library (the Makefile's STANDS_ON), and its own files call 12's step, never retype it" {
    grep -qE "^STANDS_ON.$P := 12_data_parallel_overlap( |$)" "$ROOT/Makefile" ||
        fail "the Makefile does not link 12's library into 15"
    grep -qE "^LIBRARY.12_data_parallel_overlap := .*train.cu" "$ROOT/Makefile" || fail "12's library does not hold its loop"
    src=$ROOT/solutions/$P
    [ -d "$src" ] || src=$ROOT/lessons/$P  # a handout: the student's version, the same but for the exercises
    for f in "$src"/*.cu; do
        ! grep -nE 'mlp_(forward|backward|update)\(|ncclAllReduce\([^,]*d_grads|(ddp_)?plan_buckets\(' "$f" ||
            fail "$f retypes a piece of 12's step"
    done
    # (the capture's call of it is an exercise: in the course, capture_graph calls it; the text of the
    # call is not written here, where a handout would hand it out)
    [ ! -d "$ROOT/solutions" ] || awk '/^static void capture_graph\(/, /^}/' "$src/graphs.cu" | grep -q '^ *ddp_step(' ||
        fail "the capture does not issue 12's step"
}

# ----------------------------------------------------------------------------
# one rank: any GPU

# bats test_tags=gpu,ex:15-capture,ex:15-loss-event,ex:15-replay,claim:15-census-each
@test "15 one rank: graph and eager runs bit-identical to the reference under every test delay, one launch per batch" {
    need_nccl_gpu
    assert_verified_under_delays "$P" $SMALL15
    f=$BATS_TEST_TMPDIR/v.json
    assert_equal "$(json_get "$f" losses_taken)" "$NB"
    assert_equal "$(json_get "$f" runs_identical)" true
    # both variants, round-robin, every run checked: (1 warm-up + 2 timed) x 2
    assert_equal "$(json_get "$f" runs_checked)" 6
    assert_equal "$(json_get "$f" graph_launches)" "$NB"
    # twelve graphs: lesson 08's ring of 11 losses, rounded up to the two batch slots
    assert_equal "$(json_get "$f" graphs)" 12
    # the loss's record is a node the host can wait on (15-loss-event), in each of the twelve: its own
    # event looked up among the record nodes (the buckets' records may be nodes too), every graph
    # holding what graph 0 holds
    assert_equal "$(json_get "$f" graph_loss_record_nodes)" 12
    assert_equal "$(json_get "$f" graph_census_alike)" true
    # both variants again, with the graphs instantiated a second time at their nodes' priorities
    run_json p "$P" $SMALL15 --compare-priority
    assert_success
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/p.json" matches_reference)" true
    assert_num "$(json_get "$BATS_TEST_TMPDIR/p.json" prioritized_step_ms)" ">" 0 "the prioritized variant's step"
    assert_equal "$(json_get "$f" buckets)" 3
    assert_equal "$(json_get "$f" warm_up)" true
}

# bats test_tags=gpu,ex:15-capture,ex:15-loss-event,ex:15-replay
@test "15 one rank gives lesson 12's losses and weights, bit for bit, the eager step alone too" {
    need_nccl_gpu
    run --separate-stderr ref 12_data_parallel_overlap $SMALL15 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    want="$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum) $(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
    for on in compute copy; do
        run_json r "$P" $SMALL15 --delay-us "$DELAY_US" --delay-on $on
        assert_success
        f=$BATS_TEST_TMPDIR/r.json
        assert_equal "$(json_get "$f" loss_checksum) $(json_get "$f" weights_checksum)" "$want"
    done
    run_json e "$P" $SMALL15 --eager
    assert_success
    f=$BATS_TEST_TMPDIR/e.json
    assert_equal "$(json_get "$f" loss_checksum) $(json_get "$f" weights_checksum)" "$want"
    [ -z "$(json_get "$f" graph_launches)" ] || fail "--eager, yet a graph was launched"
}

# bats test_tags=gpu
@test "15 one rank, the levers of the capture: cuBLAS's own pool, graphs not uploaded: 12's bits, each said in the JSON" {
    need_nccl_gpu
    run --separate-stderr ref 12_data_parallel_overlap $SMALL15 --json
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/a.json"
    want="$(json_get "$BATS_TEST_TMPDIR/a.json" loss_checksum) $(json_get "$BATS_TEST_TMPDIR/a.json" weights_checksum)"
    # the defaults: the model's own workspace, so cuBLAS allocates nothing inside the capture; uploaded
    run_json d "$P" $SMALL15
    assert_success
    f=$BATS_TEST_TMPDIR/d.json
    assert_equal "$(json_get "$f" capture_workspace) $(json_get "$f" graph_uploaded)" "own true"
    assert_equal "$(json_get "$f" graph_alloc_nodes) $(json_get "$f" graph_free_nodes)" "0 0"
    for args in "--capture-workspace library" "--no-upload --warmup 0"; do
        # shellcheck disable=SC2086
        run_json v "$P" $SMALL15 $args
        [ "$status" -eq 0 ] || fail "$args: not verified (exit code $status)"
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" runs_identical)" "true true"
        assert_equal "$(json_get "$f" loss_checksum) $(json_get "$f" weights_checksum)" "$want"
        assert_equal "$(json_get "$f" graph_launches)" "$NB"
        case $args in
        --capture*) assert_equal "$(json_get "$f" capture_workspace) $(json_get "$f" graph_uploaded)" "library true" ;;
        *) assert_equal "$(json_get "$f" capture_workspace) $(json_get "$f" graph_uploaded)" "own false" ;;
        esac
    done
}

# bats test_tags=gpu
@test "15 --break-rule host-wait: CUDA refuses the polled wait inside a capture and loses the capture; exit code 1" {
    need_nccl_gpu
    run --separate-stderr prog "$P" $TINY --break-rule host-wait --json
    assert_equal "$status" 1
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/e.json"
    [[ "$stderr" == *"cudaEventQuery inside the capture returned cudaErrorCapturedEvent"* ]] || fail "$stderr"
    [[ "$stderr" == *"cudaStreamEndCapture then returned cudaErrorStreamCaptureInvalidated and no graph"* ]] ||
        fail "$stderr"
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/e.json" capture_error)" cudaErrorCapturedEvent
}

# ----------------------------------------------------------------------------
# two and four ranks: as many GPUs, or simulated nodes on one

# bats test_tags=ranks,gpu,ex:15-capture,ex:15-loss-event,ex:15-replay
@test "15 two ranks: bit-identical to the reference and to lesson 12 on every rank, under every test delay" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    BIN=$REF_BIN run_ranks 2 twelve 12_data_parallel_overlap $SMALL15
    assert_success
    want=$(json_get "$BATS_TEST_TMPDIR/twelve.json" weights_checksums)
    for delay in "${DELAYS[@]}"; do
        # shellcheck disable=SC2086
        run_ranks 2 v "$P" $SMALL15 $delay
        [ "$status" -eq 0 ] || fail "two ranks $delay: not verified (exit code $status)"
        f=$BATS_TEST_TMPDIR/v.json
        assert_equal "$(json_get "$f" world_size) $(json_get "$f" shard_batch)" "2 32"
        assert_equal "$(json_get "$f" matches_reference)" true
        assert_equal "$(json_get "$f" runs_identical)" true
        assert_equal "$(json_get "$f" ranks_identical)" true
        assert_equal "$(json_get "$f" ranks_verified)" true
        assert_equal "$(json_get "$f" graph_launches)" "$NB"
        assert_equal "$(json_get "$f" weights_checksums)" "$want"
    done
}

# bats test_tags=gpu,ranks,claim:15-torchrun
@test "15 under torchrun --standalone --no-python, two ranks: verified, the bits of tools/launch (losses, every rank's weights)" {
    need_nccl_gpu
    assert_torchrun_like_launch "$P" "loss_checksum weights_checksums" $SMALL15
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" matches_reference)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" ranks_identical)" true
    assert_equal "$(json_get "$BATS_TEST_TMPDIR/torchrun.json" graph_launches)" "$NB"
}

# bats test_tags=ranks,gpu,ex:15-capture,ex:15-loss-event,ex:15-replay
@test "15 four ranks: bit-identical to the reference and to lesson 12 on every rank, compute delayed" {
    need_nccl_gpu
    export NCCL_ALGO=Ring NCCL_PROTO=Simple
    BIN=$REF_BIN run_ranks 4 twelve 12_data_parallel_overlap $SMALL15 --batches 12
    assert_success
    run_ranks 4 v "$P" $SMALL15 --batches 12 --delay-us "$DELAY_US" --delay-on compute
    [ "$status" -eq 0 ] || fail "four ranks: not verified (exit code $status)"
    f=$BATS_TEST_TMPDIR/v.json
    assert_equal "$(json_get "$f" world_size) $(json_get "$f" shard_batch)" "4 16"
    assert_equal "$(json_get "$f" matches_reference) $(json_get "$f" ranks_identical)" "true true"
    assert_equal "$(json_get "$f" weights_checksums)" "$(json_get "$BATS_TEST_TMPDIR/twelve.json" weights_checksums)"
}

# bats test_tags=ranks,gpu,ex:15-capture,ex:15-replay
@test "15 two ranks, traces: one graph launch a batch, every kernel a graph's (NCCL's too), nothing run inside the capture" {
    need_nccl_gpu
    run_ranks 2 r "$P" $SMALL15 --reps 1 --warmup 0 --trace "$BATS_TEST_TMPDIR/t.json"
    assert_success
    for r in 0 1; do
        T=$BATS_TEST_TMPDIR/t.rank$r.json
        run "$TOOLS/tracestat" "$T" --check
        assert_success
        g=$BATS_TEST_TMPDIR/g$r.txt e=$BATS_TEST_TMPDIR/e$r.txt c=$BATS_TEST_TMPDIR/c$r.txt
        "$TOOLS/tracestat" "$T" --window run >"$g"
        "$TOOLS/tracestat" "$T" --window eager >"$e"
        "$TOOLS/tracestat" "$T" --window capture >"$c"
        assert_equal "$(kv_get "$g" graph_launches)" "$NB"
        # NB batches x 3 buckets in the graphs, and the run's losses all-reduced once, eagerly
        assert_equal "$(kv_get "$g" comm_kernels)" $((NB * 3 + 1))
        assert_equal "$(kv_get "$e" comm_kernels)" $((NB * 3 + 1))
        assert_equal "$(kv_get "$g" graph_kernels)" $(($(kv_get "$g" kernels) - 1))
        assert_equal "$(kv_get "$g" kernels)" "$(kv_get "$e" kernels)"  # the same kernels, eager or replayed
        assert_equal "$(kv_get "$e" graph_kernels) $(kv_get "$e" graph_launches)" "0 0"
        assert_equal "$(kv_get "$g" h2d)" $((NB + 1))  # the batches, copied before each launch; the losses
        assert_equal "$(kv_get "$c" kernels) $(kv_get "$c" copies) $(kv_get "$c" host_syncs)" "0 0 0"
        assert_equal "$(kv_get "$g" dropped)" 0
    done
}

# bats test_tags=ranks,gpu
@test "15 --no-warm-up: the gradients' communicator first used inside the capture, every check holds (NCCL 2.28)" {
    need_nccl_gpu
    nccl_is_2_28
    run_ranks 2 n "$P" $SMALL15 --no-warm-up
    assert_success
    f=$BATS_TEST_TMPDIR/n.json
    assert_equal "$(json_get "$f" warm_up) $(json_get "$f" matches_reference) $(json_get "$f" ranks_identical)" \
        "false true true"
    assert_equal "$(json_get "$f" warm_up_ms)" 0
}

# bats test_tags=ranks,gpu
@test "15 --break-rule new-comm: NCCL 2.28 makes a communicator inside a capture, and every rank says which it saw; exit code 1" {
    need_nccl_gpu
    nccl_is_2_28
    run --separate-stderr "$ROOT/tests/timed" 90 "$LAUNCH" $(launch_options 2) "$BIN/$P" $TINY --break-rule new-comm \
        --timeout-s 30
    assert_equal "$status" 1
    for r in 0 1; do
        [[ "$stderr" == *"$P rank $r: --break-rule new-comm: ncclCommSplit inside the capture answered ncclSuccess, and cudaStreamEndCapture cudaSuccess"* ]] ||
            fail "rank $r: $stderr"
    done
}

# bats test_tags=ranks,gpu,timed,deadline,claim:15-timeout
@test "15 --break-rule one-rank: rank 0's graph waits for an all-reduce no other rank captured, until --timeout-s" {
    need_nccl_gpu
    SECONDS=0
    run --separate-stderr "$ROOT/tests/timed" 90 "$LAUNCH" $(launch_options 2) --grace-s 60 "$BIN/$P" $TINY \
        --break-rule one-rank --timeout-s 8
    assert_equal "$status" 1
    assert_num "$SECONDS" ">=" 8 "seconds until every rank had stopped (the time limit is 8 s)"
    assert_num "$SECONDS" "<" 30 "seconds until every rank had stopped (the time limit is 8 s)"
    [[ "$stderr" == *"$P rank 0: --break-rule one-rank: rank 0 launches a graph holding an all-reduce"* ]] ||
        fail "rank 0 did not launch its graph: $stderr"
    for r in 0 1; do
        grep -q "^$P rank $r: .*nothing happened for 8 s.*aborting" <<<"$stderr" || fail "rank $r: $stderr"
    done
    [[ "$stderr" != *"completed, which it must not"* ]] || fail "the all-reduce completed: $stderr"
    [[ "$stderr" != *"launch:"* ]] || fail "the launcher had to stop a rank: $stderr"
}

# bats test_tags=ranks,gpu,timed,deadline,claim:15-note-names,claim:15-timeout
@test "15 a rank that fails stops every rank, graphs in flight included: by its note, then by --timeout-s when it hangs" {
    need_nccl_gpu
    assert_stops_by_note "$P" 2 $SMALL15
    assert_stops_by_timeout "$P" 2 $SMALL15
}

# Checks of speed: separate GPUs only; each compares the two variants of one run. At lesson 12's
# GPU-bound shape the graph is no faster than 12 and may be slower (tools/bench, notes/15): a figure,
# not a check.
# bats test_tags=ranks,gpu,timed,speed,ex:15-capture,ex:15-replay
@test "15 two GPUs, speed: on a small model the graph issues a step in under half the eager host time and steps faster" {
    need_separate_gpus 2
    run_ranks 2 s "$P" $LAUNCH_BOUND
    assert_success
    f=$BATS_TEST_TMPDIR/s.json
    assert_equal "$(json_get "$f" performance)" true
    assert_num "$(json_get "$f" graph_issue_ms)" "<" "$(ratio "$(json_get "$f" eager_issue_ms)" 2)" \
        "graph issue against half the eager issue, ms per step"
    assert_num "$(json_get "$f" graph_step_ms)" "<" "$(json_get "$f" eager_step_ms)" "graph against eager step, ms"
}

# ----------------------------------------------------------------------------
# compute-sanitizer, one rank: the course's set (helpers.bash, sanitizer_check), with its run and
# the reason memcheck differs for a lesson on NCCL

# bats test_tags=gpu,sanitizer
@test "15 compute-sanitizer memcheck is clean" {
    sanitizer_check memcheck
}

# bats test_tags=gpu,sanitizer
@test "15 compute-sanitizer racecheck is clean" {
    sanitizer_check racecheck
}

# bats test_tags=gpu,sanitizer
@test "15 compute-sanitizer synccheck is clean" {
    sanitizer_check synccheck
}

# bats test_tags=gpu,sanitizer
@test "15 compute-sanitizer initcheck is clean" {
    sanitizer_check initcheck
}
