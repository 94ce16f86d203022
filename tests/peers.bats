#!/usr/bin/env bats
# The peers that lessons 12 and 13 are set beside (tools/ddp-peer.py: PyTorch's DDP, tunings included;
# tools/pipe-peer.py: torch.distributed.pipelining), without a GPU: their shapes against the lessons'
# bench shapes, their refusals, and, where PyTorch and torchrun are installed, a run of each on the
# CPU over gloo (--cpu: a check of the script, not a timing). The GPU runs are tools/multi-gpu-figures'.

load helpers

PIPE=$ROOT/tools/pipe-peer.py
DDP=$ROOT/tools/ddp-peer.py

# default OPTION: the default the --help on stdin gives OPTION ("(1..65536, default 256)")
default() {
    sed -n "s/^  --$1 .*default \([^)]*\))\$/\1/p"
}

# refuses SCRIPT ARGS...: SCRIPT ARGS ends with exit code 2 and one line naming the script
refuses() {
    local script=$1 name
    name=$(basename "$script")
    shift
    run --separate-stderr python3 "$script" "$@"
    [ "$status" -eq 2 ] || fail "$name $*: exit code $status, expected 2: $stderr"
    [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "$name $*: expected one line, got: $stderr"
    [[ "$stderr" == "$name: "* ]] || fail "$name $*: $stderr"
}

# need_torchrun: skip where the CPU runs cannot be made
need_torchrun() {
    command -v torchrun >/dev/null || skip "torchrun is not installed (PyTorch's launcher: pip install torch)"
    python3 -c 'import torch, numpy' 2>/dev/null || skip "python3 cannot import torch and numpy"
}

@test "peers: pipe-peer.py, 13's peer, compiles, has 13's bench shape, says what matches, refuses a bad value with one line" {
    command -v python3 >/dev/null || skip "python3 is not installed (the peers alone need it)"
    run env PYTHONPYCACHEPREFIX="$BATS_TEST_TMPDIR/pyc" python3 -m py_compile "$PIPE"
    assert_success
    run python3 "$PIPE" --help
    assert_success
    assert_output --partial "What matches lesson 13"
    assert_output --partial "What cannot match"
    peer=$output
    detect_nccl 13_pipeline_parallel
    if [ "${NCCL:-0}" = 1 ]; then  # 13's model and rate, where 13 is built
        run prog 13_pipeline_parallel --help
        assert_success
        for o in in out lr; do assert_equal "$o $(default "$o" <<<"$peer")" "$o $(default "$o" <<<"$output")"; done
    fi
    # tools/bench's rows of 13 (13m4, 13m8, 13m16): --hidden 8192 --layers 3 --batch 1024
    h=$(sed -n 's/^H12=[0-9]* H13=\([0-9]*\) .*/\1/p' "$ROOT/tools/bench")
    shape=$(sed -n 's/^ *P13="\(--hidden \$H13 --layers [0-9]* --batch [0-9]*\) .*/\1/p' "$ROOT/tools/bench")
    [ -n "$h" ] && [ -n "$shape" ] || fail "tools/bench has no H13 or P13 shape"
    shape=${shape/\$H13/$h}
    assert_equal "$shape" "--hidden $(default hidden <<<"$peer") --layers $(default layers <<<"$peer") --batch $(default batch <<<"$peer")"
    for args in "--batches 0" "--micro-batches 3" "--micro-batches 4,x" "--schedules zb" "--hidden x" "--bogus"; do
        # shellcheck disable=SC2086
        refuses "$PIPE" $args
    done
    refuses "$PIPE"  # not under torchrun: it says how to start it
    assert_equal "$stderr" "pipe-peer.py: run under torchrun, one process a stage: torchrun --standalone --nproc-per-node 2 tools/pipe-peer.py"
}

@test "peers: ddp-peer.py's variants (DDP as its users tune it): each word checked, one line for a bad one" {
    command -v python3 >/dev/null || skip "python3 is not installed (the peers alone need it)"
    run python3 "$DDP" --help
    assert_success
    for word in gradient_as_bucket_view=True static_graph=True fused foreach bucket_cap_mb; do
        assert_output --partial "$word"
    done
    refuses "$DDP" --variants "view+nope"
    assert_equal "$stderr" "ddp-peer.py: argument --variants: variant 'view+nope': 'nope' is none of default, view, static, foreach, fused, loop or bucket=MIB (try --help)"
    refuses "$DDP" --variants "fused+loop"
    refuses "$DDP" --variants "view;view"
    refuses "$DDP" --variants "bucket=0"
}

@test "peers: pipe-peer.py on the CPU, two stages: 13's cut, every micro-batch count and schedule timed, losses finite" {
    need_torchrun
    run --separate-stderr "$ROOT/tests/timed" 300 torchrun --standalone --nproc-per-node 2 "$PIPE" --cpu --hidden 32 \
        --batch 32 --batches 2 --rounds 2 --warmup 0 --micro-batches 4,8 --json-out "$BATS_TEST_TMPDIR/p.json"
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 <<<"$stderr")"
    f=$BATS_TEST_TMPDIR/p.json
    assert_equal "$(jq -r '[.stages, .stage_layers, .losses_finite, .performance] | join(" ")' "$f")" "2 1-2|3-4 true false"
    assert_equal "$(jq -r '[.figures[] | "\(.micro_batches):\(.schedule)"] | join(" ")' "$f")" "4:1f1b 4:gpipe 8:1f1b 8:gpipe"
    jq -e '[.figures[] | .step_ms > 0 and .step_min_ms <= .step_ms and .step_ms <= .step_max_ms
        and (.step_ms_per_stage | split(",") | length == 2)] | all' "$f" >/dev/null || fail "figures: $(jq -c .figures "$f")"
}

@test "peers: ddp-peer.py on the CPU, two ranks: each variant a row, its settings said, weights alike synced, not under no_sync" {
    need_torchrun
    run --separate-stderr "$ROOT/tests/timed" 300 torchrun --standalone --nproc-per-node 2 "$DDP" --cpu --hidden 32 \
        --layers 2 --shard 8 --batches 2 --rounds 1 --warmup 0 --variants "default;view+static+fused;loop+bucket=0.01" \
        --trace-out "$BATS_TEST_TMPDIR/t.json" --json-out "$BATS_TEST_TMPDIR/d.json"
    [ "$status" -eq 0 ] || fail "exit code $status: $(tail -n 5 <<<"$stderr")"
    f=$BATS_TEST_TMPDIR/d.json
    assert_equal "$(jq -r '[.variants[] | "\(.name):\(.gradient_as_bucket_view):\(.static_graph):\(.optimizer):\(.bucket_cap_mb)"] | join(" ")' "$f")" \
        "default:false:false:default:25 view+static+fused:true:true:fused:25 loop+bucket=0.01:false:false:loop:0.01"
    assert_equal "$(jq -r '[.variants[].ranks_identical] | join(" ")' "$f") $(jq -r .ranks_identical "$f")" "true true true true"
    # no_sync held the whole step (forward too): every rank ended its no_sync runs with weights of its own
    assert_equal "$(jq -r '[.variants[].nosync_ranks_identical] | join(" ")' "$f")" "false false false"
    assert_equal "$(jq -r '.variant, .sync_step_ms == .variants[0].sync_step_ms' "$f" | paste -sd ' ')" "default true"
    for m in sync nosync one; do [ -s "$BATS_TEST_TMPDIR/t.$m.json" ] || fail "no trace of $m"; done
}
