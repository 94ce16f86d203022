#!/usr/bin/env bats
# The timeline tools on fixtures: the JSON writer, the reader, the checks, the renderers.
# handmade_trace.json is small enough to verify by hand; 08_small_trace.json was
# recorded by lesson 08 on an H200 (notes/README.md says how to record it again).
# JSON is checked with jq. The trace format (common/trace/timeline.h): a host range's kind
# (tl_range) is its "cat"; a track's kind (stream, main, thread) is in its
# thread_name metadata; every event's pid names a process.

load helpers

HAND=$FIXTURES/handmade_trace.json
RECORDED=$FIXTURES/08_small_trace.json
TOOLS=$(dirname "$REF_BIN")/tools  # the tools of the build under test (make BUILD=...)

# What a trace may hold: the cats of host ranges (tl_range_name) and of GPU work.
HOST_CATS='["host","phase","prep","issue","sync","slot_wait","loader_wait"]'
GPU_CATS='["kernel","h2d","d2h","copy"]'

# format_problems FILE: the events of FILE that break the format, as JSON ([] if none)
format_problems() {
    jq -c --argjson host "$HOST_CATS" --argjson gpu "$GPU_CATS" '
        .traceEvents as $ev
        | ([$ev[] | select(.ph == "M" and .name == "process_name") | .pid]) as $pids
        | ([$ev[] | select(.ph == "M" and .name == "thread_name") | {key: "\(.pid)/\(.tid)", value: .args.kind}]
           | from_entries) as $kind
        | [ ($ev[] | select(.ph == "M" and .name == "thread_name")
                   | select((.args.kind | IN("stream", "main", "thread")) | not)
                   | {track: .args.name, problem: "kind \(.args.kind)"}),
            ($ev[] | select(.ph == "X") | . as $e | ($pids | index($e.pid)) as $p
                   | $kind["\(.pid)/\(.tid)"] as $k
                   | if $p == null then {event: .name, problem: "pid \(.pid) names no process"}
                     elif $k == null then {event: .name, problem: "on a track with no name or kind"}
                     elif $k == "stream" and ((.cat | IN($gpu[])) | not) then {event: .name, problem: "cat \(.cat) on a stream"}
                     elif $k != "stream" and ((.cat | IN($host[])) | not) then {event: .name, problem: "cat \(.cat) on a host track"}
                     else empty end)
          ] | .[0:5]' "$1"
}

@test "timeline: both fixtures are valid JSON and well-formed traces" {
    for f in "$HAND" "$RECORDED"; do
        run jq -e . "$f"
        assert_success
        run "$TOOLS/tracestat" "$f" --check
        assert_success
        assert_output --partial "ok:"
    done
}

@test "timeline: host ranges carry their kind as cat, tracks their kind, events a named process" {
    for f in "$HAND" "$RECORDED"; do
        run format_problems "$f"
        assert_success
        assert_output "[]"
    done
    # the kinds the fixtures are known to hold
    assert_equal "$(jq -r '[.traceEvents[] | select(.ph == "X" and (.cat | IN("phase", "prep", "sync")))] | length' "$HAND")" 4
    assert_equal "$(jq -r '[.traceEvents[] | select(.name == "thread_name") | .args.kind] | sort | join(",")' "$RECORDED")" \
        "main,stream,stream,stream"
}

@test "timeline: the writer's output, read back, is valid, sorted, nested, and measures the same" {
    for f in "$HAND" "$RECORDED"; do
        "$TOOLS/tracestat" "$f" --rewrite "$BATS_TEST_TMPDIR/again.json"
        run jq -e . "$BATS_TEST_TMPDIR/again.json"
        assert_success
        run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --check
        assert_success
        diff <("$TOOLS/tracestat" "$f" --window run) <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --window run)
        # kinds survive the round trip: every range keeps its cat, every track its kind
        run format_problems "$BATS_TEST_TMPDIR/again.json"
        assert_output "[]"
        kinds='[.traceEvents[] | select(.ph == "X") | "\(.name) \(.cat)"] | sort, [.traceEvents[] | select(.name == "thread_name") | "\(.args.name) \(.args.kind)"] | sort'
        diff <(jq -c "$kinds" "$f") <(jq -c "$kinds" "$BATS_TEST_TMPDIR/again.json")
    done
}

@test "timeline: a kernel starting inside the one before it on its stream is written from that one's end, still sorted" {
    # CUPTI's clock and the host's, and a graph's kernels, can make a stream's records overlap: kernel
    # B (50 us) starts inside A (0-100 us); the writer moves it to 100 us, past the host range at 60
    e() { printf '{"name":"%s","cat":"%s","ph":"X","ts":%s.000,"dur":%s.000,"pid":1,"tid":%s,"args":{"batch":-1,"bytes":0,"pageable":0}}' "$@"; }
    {
        echo '{"traceEvents":['
        echo '{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"one rank"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main","kind":"main"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"compute","kind":"stream"}},'
        echo '{"name":"run","cat":"phase","ph":"X","ts":0.000,"dur":200.000,"pid":1,"tid":1,"args":{"batch":-1,"bytes":0,"pageable":0}},'
        printf '%s,\n' "$(e A kernel 0 100 2)" "$(e B kernel 50 10 2)"
        e cudaGraphLaunch issue 60 5 1
        echo  # the reader takes an event a line
        echo '],"displayTimeUnit":"ms","otherData":{"program":"one rank","dropped":0,"base_ns":1000000000000}}'
    } >"$BATS_TEST_TMPDIR/o.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/o.json" --rewrite "$BATS_TEST_TMPDIR/again.json"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --check
    assert_success
    run jq -r '[.traceEvents[] | select(.ph == "X") | "\(.name)@\(.ts)"] | join(" ")' "$BATS_TEST_TMPDIR/again.json"
    assert_output "run@0 A@0 cudaGraphLaunch@60 B@100"
}

@test "timeline: a kernel wholly inside the one before it on its stream becomes a point at its end, beside the next" {
    # as a graph's kernels on an H100 (2026-11-27): B (50-60 us) inside A (0-100), C (90-120) from 90:
    # written, B is the point 100-100 and C runs 100-120; in start order, C (the longer) first
    e() { printf '{"name":"%s","cat":"kernel","ph":"X","ts":%s.000,"dur":%s.000,"pid":1,"tid":2,"args":{"batch":-1,"bytes":0,"pageable":0}}' "$@"; }
    {
        echo '{"traceEvents":['
        echo '{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"one rank"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":2,"args":{"name":"compute","kind":"stream"}},'
        printf '%s,\n' "$(e A 0 100)" "$(e B 50 10)"
        e C 90 30
        echo
        echo '],"displayTimeUnit":"ms","otherData":{"program":"one rank","dropped":0,"base_ns":1000000000000}}'
    } >"$BATS_TEST_TMPDIR/p.json"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/p.json" --rewrite "$BATS_TEST_TMPDIR/again.json"
    run jq -r '[.traceEvents[] | select(.ph == "X") | "\(.name)@\(.ts)+\(.dur)"] | join(" ")' "$BATS_TEST_TMPDIR/again.json"
    assert_output "A@0+100 C@100+20 B@100+0"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/again.json" --check
    assert_success
    # a point may stand inside a kernel; a kernel of any length may not
    sed 's/"name":"B","cat":"kernel","ph":"X","ts":100.000,"dur":0.000/"name":"B","cat":"kernel","ph":"X","ts":100.000,"dur":1.000/' \
        "$BATS_TEST_TMPDIR/again.json" >"$BATS_TEST_TMPDIR/long.json"
    ! cmp -s "$BATS_TEST_TMPDIR/again.json" "$BATS_TEST_TMPDIR/long.json" || fail "the rewritten trace no longer has B as a point"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/long.json" --check
    assert_failure
    assert_output --partial "overlap without nesting"
}

@test "timeline: --fold-streams puts the streams the program did not name on as few lanes as their overlap needs" {
    # a graph's own streams: 1 (0-10 us), 2 (5-15 us, beside 1), 3 (12-20 us, after 1): two lanes
    e() { printf '{"name":"%s","cat":"kernel","ph":"X","ts":%s.000,"dur":%s.000,"pid":1,"tid":%s,"args":{"batch":-1,"bytes":0,"pageable":0,"graph":7}}' "$@"; }
    {
        echo '{"traceEvents":['
        echo '{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"one rank"}},'
        echo '{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"compute","kind":"stream"}},'
        for k in 1 2 3; do
            echo '{"name":"thread_name","ph":"M","pid":1,"tid":'$((k + 1))',"args":{"name":"stream '$((k + 20))'","kind":"stream"}},'
        done
        printf '%s,\n' "$(e A 0 30 1)" "$(e B 0 10 2)" "$(e C 5 10 3)"
        e D 12 8 4
        echo
        echo '],"displayTimeUnit":"ms","otherData":{"program":"one rank","dropped":0,"base_ns":1000000000000}}'
    } >"$BATS_TEST_TMPDIR/g.json"
    s=$BATS_TEST_TMPDIR/s.txt
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" >"$s"
    assert_equal "$(kv_get "$s" tracks)" "compute,stream 21,stream 22,stream 23"
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/g.json" --fold-streams >"$s"
    assert_equal "$(kv_get "$s" tracks)" "compute,lane 1,lane 2"
    assert_equal "$(kv_get "$s" kernels) $(kv_get "$s" graph_kernels)" "4 4"
    # merged, each rank's own lanes
    run "$TOOLS/tracestat" --fold-streams --merge "$BATS_TEST_TMPDIR/m.json" "$BATS_TEST_TMPDIR/g.json" "$BATS_TEST_TMPDIR/g.json"
    assert_success
    "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/m.json" >"$s"
    assert_equal "$(kv_get "$s" tracks)" "r0 compute,r0 lane 1,r0 lane 2,r1 compute,r1 lane 1,r1 lane 2"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/m.json" --check
    assert_success
}

@test "timeline: every track of the recorded trace is named, with the lesson's stream names" {
    "$TOOLS/tracestat" "$RECORDED" --window run >"$BATS_TEST_TMPDIR/s.txt"
    tracks=$(kv_get "$BATS_TEST_TMPDIR/s.txt" tracks)
    [[ "$tracks" == *"main"* && "$tracks" == *"copy"* && "$tracks" == *"compute"* ]] || fail "tracks: $tracks"
    assert_num "$(jq '[.traceEvents[] | select(.ph == "X")] | length' "$RECORDED")" ">" 100
    assert_equal "$(jq '[.traceEvents[] | select(.name == "" or (.name == "thread_name" and .args.name == ""))] | length' "$RECORDED")" 0
}

@test "timeline: the checker rejects unsorted events and partly overlapping ones" {
    sed 's/"ts":610.000/"ts":100.000/' "$HAND" >"$BATS_TEST_TMPDIR/unsorted.json"
    ! cmp -s "$HAND" "$BATS_TEST_TMPDIR/unsorted.json" || fail "the fixture no longer has the event this test moves"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/unsorted.json" --check
    assert_failure
    assert_output --partial "starts before"
    # the second kernel made to start inside the first one on the same stream
    sed 's/"name":"sgd_kernel","cat":"kernel","ph":"X","ts":600.000/"name":"sgd_kernel","cat":"kernel","ph":"X","ts":599.000/' "$HAND" >"$BATS_TEST_TMPDIR/overlap.json"
    ! cmp -s "$HAND" "$BATS_TEST_TMPDIR/overlap.json" || fail "the fixture no longer has the kernel this test moves"
    run "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/overlap.json" --check
    assert_failure
    assert_output --partial "overlap without nesting"
}

@test "timeline: the figures of the hand-made trace are the ones worked out by hand" {
    "$TOOLS/tracestat" "$HAND" --window run >"$BATS_TEST_TMPDIR/s.txt"
    s=$BATS_TEST_TMPDIR/s.txt
    assert_equal "$(kv_get "$s" gpu_busy)" 0.660000          # GPU busy from 300 to 960 us of 1000
    assert_equal "$(kv_get "$s" copy_hidden)" 0.400000       # 40 of 100 us of copies under a kernel
    assert_equal "$(kv_get "$s" host_blocked)" 0.100000      # the 100 us sync
    assert_equal "$(kv_get "$s" prep_under_gpu)" 0.500000    # the second prep, not the first
    assert_equal "$(kv_get "$s" largest_gap_ms)" 0.300000    # nothing on the GPU before 300 us
    assert_equal "$(kv_get "$s" kernels)" 3
    assert_equal "$(kv_get "$s" own_kernels)" 1
    assert_equal "$(kv_get "$s" h2d)" 2
    assert_equal "$(kv_get "$s" host_syncs)" 1
}

@test "timeline: a range's kind comes from its cat, not its name" {
    # the sync range renamed: still a sync (host blocked); made a prep range: no longer
    sed 's/"name":"sync","cat":"sync"/"name":"waiting","cat":"sync"/' "$HAND" >"$BATS_TEST_TMPDIR/renamed.json"
    ! cmp -s "$HAND" "$BATS_TEST_TMPDIR/renamed.json" || fail "the fixture no longer has the sync range this test renames"
    assert_equal "$(kv_get <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/renamed.json" --window run) host_blocked)" 0.100000
    sed 's/"name":"sync","cat":"sync"/"name":"sync","cat":"host"/' "$HAND" >"$BATS_TEST_TMPDIR/other.json"
    assert_equal "$(kv_get <("$TOOLS/tracestat" "$BATS_TEST_TMPDIR/other.json" --window run) host_blocked)" 0.000000
}

@test "timeline: the terminal rendering of the hand-made trace matches" {
    run "$TOOLS/tracestat" "$HAND" --window run --text --width 60
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/handmade_trace.timeline.txt"
}

@test "timeline: the terminal rendering of the recorded trace matches, at 100 columns" {
    run "$TOOLS/tracestat" "$RECORDED" --window run --from-batch 10 --batches 3 --text
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/08_small_trace.timeline.txt"
    while IFS= read -r line; do
        [ "${#line}" -le 100 ] || fail "a line is wider than 100 columns: $line"
    done <<<"$output"
}

@test "timeline: the SVG of a trace names every drawn track and is closed" {
    "$TOOLS/tracestat" "$RECORDED" --window run --from-batch 10 --batches 3 --svg "$BATS_TEST_TMPDIR/t.svg"
    run head -c 4 "$BATS_TEST_TMPDIR/t.svg"
    assert_output "<svg"
    run tail -n 1 "$BATS_TEST_TMPDIR/t.svg"
    assert_output "</svg>"
    grep -q ">main</text>" "$BATS_TEST_TMPDIR/t.svg"
    grep -q ">compute</text>" "$BATS_TEST_TMPDIR/t.svg"
}

@test "timeline: tracestat refuses bad options with exit code 2 and one line naming the option" {
    for args in "--width abc" "--width 5" "--from-batch -2" "--batches 0" "--ms-axis x"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$TOOLS/tracestat" "$HAND" $args
        [ "$status" -eq 2 ] || fail "tracestat $args: exit code $status, expected 2"
        [ "$(printf '%s\n' "$stderr" | grep -c .)" -eq 1 ] || fail "tracestat $args: expected one line on stderr, got: $stderr"
        [[ "$stderr" == *"${args%% *}"* ]] || fail "tracestat $args: the message does not name the option: $stderr"
    done
    # the old form --batches FIRST COUNT: the count is now a stray argument
    run --separate-stderr "$TOOLS/tracestat" "$RECORDED" --window run --batches 10 3 --text
    assert_equal "$status" 2
    assert_equal "$(printf '%s\n' "$stderr" | grep -c .)" 1
}

@test "timeline: tracestat refuses a trace cut short (half of one, its first line, a line cut in two): exit 1, one line" {
    n=$(wc -l <"$RECORDED")
    head -n $((n / 2)) "$RECORDED" >"$BATS_TEST_TMPDIR/half.json"
    echo '{"traceEvents":[' >"$BATS_TEST_TMPDIR/open.json"
    { head -n 40 "$RECORDED"; sed -n 41p "$RECORDED" | sed "s/.\{10\}$//"; } >"$BATS_TEST_TMPDIR/cut.json"  # an event cut in two
    for f in half open cut; do
        for args in --check "--window run" --text; do
            # shellcheck disable=SC2086
            run --separate-stderr "$TOOLS/tracestat" "$BATS_TEST_TMPDIR/$f.json" $args
            [ "$status" -eq 1 ] || fail "$f.json $args: exit code $status, expected 1"
            [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "$f.json $args: expected one line on stderr, got: $stderr"
            [[ "$stderr" == *"cut short"* ]] || fail "$f.json $args: $stderr"
            [[ "$output" != *"ok:"* ]] || fail "$f.json $args: said ok"
        done
    done
    # the whole file is read as it was: nothing but its end was missing from the half
    run "$TOOLS/tracestat" "$RECORDED" --check
    assert_success
}
