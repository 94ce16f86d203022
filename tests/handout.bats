#!/usr/bin/env bats
# The handout (tools/make-handout, make handout LESSONS=05-08): a student's copy of some
# lessons, without their answers. Course health: none of it is scored.
#
# A check here builds a whole handout and then its lessons, as a student would: minutes on a
# machine of two CPUs. Such a check has HANDOUT_TEST_TIMEOUT seconds (default 900), not the
# suite's BATS_TEST_TIMEOUT.
BATS_TEST_TIMEOUT=${HANDOUT_TEST_TIMEOUT:-900}

load helpers

BUILT=$(dirname "$REF_BIN")  # the build folder under test: the reference handed out comes from it

setup_file() {
    detect_gpu
}

# a_user_make ARGS...: make as a user types it, not as the test runner's make passes it down
a_user_make() {
    env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make "$@"
}

# Answers a handout of the course still holds, each with what removes it: make-handout refuses
# a range that holds one. The check of every range fails on any other answer found, and on one
# of these once no range holds it any more (then remove its line).
KNOWN_ANSWERS='
'

@test "handout: no answer of its lessons in a handout of every range of lessons (the answers still known listed)" {
    mapfile -t all < <(cd "$ROOT/solutions" && ls -d [0-9][0-9]_* | cut -c1-2)
    ranges=()
    for ((a = 0; a < ${#all[@]}; a++)); do
        for ((b = a; b < ${#all[@]}; b++)); do ranges+=("${all[a]}-${all[b]}"); done
    done
    out=$BATS_TEST_TMPDIR/h
    mkdir -p "$out"
    # side by side, one make-handout per range: "RANGE<TAB>STATUS" and its list of answers found
    printf '%s\n' "${ranges[@]}" | xargs -P "$(nproc)" -I{} sh -c \
        '"$0" --sources-only --lessons "$1" --out "$2/$1" >"$2/$1.out" 2>"$2/$1.err"; echo $? >"$2/$1.rc"' \
        "$ROOT/tools/make-handout" {} "$out"
    found="" unexpected=""
    for r in "${ranges[@]}"; do
        rc=$(cat "$out/$r.rc")
        hits=$(grep -E '^  [0-9]{2}-[a-z-]+'$'\t' "$out/$r.err" | awk -F'\t' '{ sub(/^  /, "", $1); split($2, w, ":"); print $1 " " w[1] }')
        if [ "$rc" -eq 0 ]; then
            [ -z "$hits" ] || fail "$r: exit 0, yet: $hits"
            continue
        fi
        [ "$rc" -eq 1 ] && [ -n "$hits" ] || fail "$r: make-handout exited $rc: $(cat "$out/$r.err")"
        while read -r id file; do
            found+="$id $file"$'\n'
            grep -qE "^$id +$file " <<<"$KNOWN_ANSWERS" || unexpected+="  $r: $id in $file"$'\n'
        done <<<"$hits"
    done
    [ -z "$unexpected" ] || fail "answers in a handout: $unexpected"
    gone=$(grep -E '^[0-9]' <<<"$KNOWN_ANSWERS" | while read -r id file _; do
        grep -qx "$id $file" <<<"$found" || echo "$id in $file"
    done)
    [ -z "$gone" ] || fail "no range holds these any more: remove them from KNOWN_ANSWERS: $gone"
    known=$(sort -u <<<"$found" | grep . | tr '\n' ';')
    [ -z "$known" ] || skip "every range checked; answers still known in a handout: $known"
}

# course_copy DIR: the course's sources, to break on purpose
course_copy() {
    mkdir -p "$1"
    (cd "$ROOT" && cp -a Makefile common solutions lessons tools tests notes "$1/")
}

@test "handout: the answer check finds an earlier answer typed again in a later lesson, in common/ and in a note, and releases nothing" {
    c=$BATS_TEST_TMPDIR/c
    course_copy "$c"
    # 05-kernel-wait's answer on another struct in lesson 06's code, 06-copy-sync's in a note of
    # 05, 07-copy-event's in a comment of common/
    answer=$(sed -n '/BEGIN SOLUTION(05-kernel-wait)/,/END SOLUTION/p' "$c/solutions/05_stream_overlap/pipeline.cu" |
        grep -v '^ *//' | sed 's/p->/x->/g')
    [ -n "$answer" ]
    awk -v a="$answer" '{ print } /^int main\(/ { getline; print; print a }' "$c/solutions/06_per_batch_sync/train.cu" >"$c/new" &&
        mv "$c/new" "$c/solutions/06_per_batch_sync/train.cu"
    { echo '```c'; sed -n '/BEGIN SOLUTION(06-copy-sync)/,/END SOLUTION/p' "$c/solutions/06_per_batch_sync/train.cu" |
        grep -v '^ *//'; echo '```'; } >>"$c/notes/05_stream_overlap.md"
    sed -n '/BEGIN SOLUTION(07-copy-event)/,/END SOLUTION/p' "$c/solutions/07_event_sync/train.cu" | grep -v '^ *//' |
        sed 's|^|// |' >>"$c/common/memory.c"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 05-07 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" =~ 05-kernel-wait$'\t'lessons/06_per_batch_sync/train\.cu: ]] || fail "06's copy of 05's answer: $stderr"
    [[ "$stderr" =~ 06-copy-sync$'\t'notes/05_stream_overlap\.md: ]] || fail "06's answer in a note: $stderr"
    [[ "$stderr" =~ 07-copy-event$'\t'common/memory\.c: ]] || fail "07's answer in common/: $stderr"
    [ ! -e "$BATS_TEST_TMPDIR/out/course-05-07.tar.gz" ] || fail "released anyway"
    # a handout without the lesson whose answer it is: nothing to hide there
    run "$c/tools/make-handout" --sources-only --lessons 06-06 --out "$BATS_TEST_TMPDIR/out"
    assert_success
    # a file that says it holds an answer handed out: its source stays out of common/, and
    # anywhere else it is refused
    [ -e "$BATS_TEST_TMPDIR/out/course-06-06/common/loss_ring.c" ] || fail "no lesson 08 handed out, yet no loss_ring.c"
    run "$c/tools/make-handout" --sources-only --lessons 08-08 --out "$BATS_TEST_TMPDIR/out"
    assert_success
    [ ! -e "$BATS_TEST_TMPDIR/out/course-08-08/common/loss_ring.c" ] || fail "08's handout holds common/loss_ring.c"
    printf '// handout-answer: 08-interval\n' >>"$c/tests/helpers.bash"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 08-08 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" =~ 08-interval$'\t'tests/helpers\.bash ]] || fail "a file that says it holds 08's answer: $stderr"
}

@test "handout: make-handout refuses a lesson the course does not have, a range backwards, bad options: exit code 2, one line" {
    for args in "--lessons 99" "--lessons 05-99" "--lessons 08-05" "--lessons x" "--arch abc" "--name a/b" "--frobnicate" \
        "--ref-build /nonexistent"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$ROOT/tools/make-handout" $args --out "$BATS_TEST_TMPDIR/out"
        [ "$status" -eq 2 ] || fail "$args: exit code $status, expected 2"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "$args: expected one line, got: $stderr"
        [[ "$stderr" == "make-handout: "* ]] || fail "$args: $stderr"
    done
}

@test "handout: fatbin-archs lists the architectures and the PTX a program carries, and refuses a file with none" {
    [ -x "$TOOLS/fatbin-archs" ] || fail "$TOOLS/fatbin-archs is not built (run make)"
    printf '__global__ void k(int *p) { *p = 1; }\nint main(void) { return 0; }\n' >"$BATS_TEST_TMPDIR/k.cu"
    nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
    [ -x "$nvcc" ] || nvcc=nvcc
    "$nvcc" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
        -gencode arch=compute_90,code=compute_90 "$BATS_TEST_TMPDIR/k.cu" -o "$BATS_TEST_TMPDIR/k"
    run "$TOOLS/fatbin-archs" "$BATS_TEST_TMPDIR/k"
    assert_success
    assert_output "sm=80 90
ptx=90"
    run --separate-stderr "$TOOLS/fatbin-archs" /bin/sh
    assert_equal "$status" 1
    assert_equal "$stderr" "fatbin-archs: /bin/sh holds no GPU code (no fat binary)"
}

# make_handout RANGE: a handout of RANGE from the build under test, in $BATS_TEST_TMPDIR/out
make_handout() {
    run "$ROOT/tools/make-handout" --lessons "$1" --ref-build "$BUILT" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    H=$BATS_TEST_TMPDIR/out/course-${1%%-*}-${1##*-}
}

@test "handout: a copy of 05-08 holds what a student needs and no solution, builds, and runs its checks without a GPU" {
    make_handout 05-08
    h=$H
    # what is in it, and what is not
    for f in README.md Makefile hints.tsv common/trainer.c tests/helpers.bash tests/timed tools/grade tools/run-tests \
        notes/05_stream_overlap.md; do
        [ -e "$h/$f" ] || fail "no $f in the handout"
    done
    assert_equal "$(cd "$h/lessons" && ls | tr '\n' ' ')" "05_stream_overlap 06_per_batch_sync 07_event_sync 08_interval_sync "
    assert_equal "$(cd "$h/tests" && ls *.bats | tr '\n' ' ')" \
        "05_stream_overlap.bats 06_per_batch_sync.bats 07_event_sync.bats 08_interval_sync.bats "
    [ ! -e "$h/solutions" ] || fail "solutions/ is in the handout"
    [ -z "$(find "$h" -name '09_*' -o -name '1[0-4]_*')" ] || fail "a later lesson's file: $(find "$h" -name '09_*' -o -name '1[0-4]_*')"
    for f in make-lessons gen-lesson make-handout dev-check grade-class bench; do
        [ ! -e "$h/tools/$f" ] || fail "tools/$f is in the handout"
    done
    # 08's loss ring (08-interval's answer, which later lessons use) compiled, without a source line
    [ ! -e "$h/common/loss_ring.c" ] || fail "common/loss_ring.c, 08-interval's answer, is in the handout"
    [ -f "$h/common/prebuilt/loss_ring.o" ] || fail "no common/prebuilt/loss_ring.o"
    ! readelf -S "$h/common/prebuilt/loss_ring.o" | grep -q '\.debug_' || fail "loss_ring.o has debugging information"
    # the student versions, as the course generates them
    for f in "$h"/lessons/*/*; do
        diff -q "$f" "$ROOT/lessons/${f#"$h"/lessons/}" >/dev/null || fail "$f differs from the course's lessons/"
    done
    # the reference: the programs the checks run, stripped; the README says what they were built for
    assert_equal "$(cd "$h/reference/solutions" && ls | tr '\n' ' ')" \
        "05_stream_overlap 06_per_batch_sync 07_event_sync 08_interval_sync "
    archs=$("$TOOLS/fatbin-archs" "$BUILT/solutions/05_stream_overlap")
    for f in "$h"/reference/solutions/*; do
        file "$f" | grep -q ', stripped' || fail "$f is not stripped"
        assert_equal "$("$TOOLS/fatbin-archs" "$f")" "$archs"
    done
    sm=$(sed -n 's/^sm=//p' <<<"$archs" | sed -E 's/([0-9]+)([0-9])( |$)/\1.\2\3/g; s/ /, /g')
    grep -qF "compute capability $sm;" "$h/README.md" || fail "the README does not say $sm: $(grep -m 1 'compute capability' "$h/README.md")"
    # every hint of its exercises, as the course gives it
    assert_equal "$(cut -f1 "$h/hints.tsv" | tr '\n' ' ')" \
        "$("$ROOT/tools/grade" --list-hints 05_stream_overlap 06_per_batch_sync 07_event_sync 08_interval_sync | cut -f1 | tr '\n' ' ')"
    # its links and paths lead somewhere; the archive holds the same files
    run broken_links "$h/README.md" "$h"/notes/*.md
    assert_output ""
    run cited_paths "$h" "$h/README.md" "$h"/notes/*.md
    assert_output ""
    assert_equal "$(tar -tzf "$h.tar.gz" | grep -v '/$' | sort)" "$(cd "$(dirname "$h")" && find "$(basename "$h")" -type f | sort)"

    # as a student: build, test, check, grade, without a GPU (none visible: CUDA_VISIBLE_DEVICES=)
    arch=()
    [ "$HAVE_GPU" = 1 ] || arch=(ARCH=90)  # no GPU: one architecture is enough to check that it compiles
    # (BATS_TEST_TIMEOUT= : the checks inside have no limit of bats's own, whose countdown bats 1.8.2 can
    # leave running after a check, holding its bats process; their programs have CHECK_TIMEOUT)
    export COURSE_BIN= COURSE_REF_BIN= COURSE_TOOLS= HAVE_GPU= GPU_WHY= CUDA_VISIBLE_DEVICES= BATS_TEST_TIMEOUT=
    run a_user_make -C "$h" "${arch[@]}"
    assert_success
    run a_user_make -C "$h" -s "${arch[@]}" test TAP_OUT="$h/build/t.tap"
    assert_success
    [[ "${lines[-1]}" =~ ^([0-9]+)\ passed,\ 0\ failed,\ ([0-9]+)\ skipped$ ]] || fail "the last line: ${lines[-1]}"
    assert_num "${BASH_REMATCH[1]}" ">" 10 "checks that need no GPU passed"
    assert_num "${BASH_REMATCH[2]}" ">" 20 "GPU checks skipped"
    # every GPU check skipped with its reason, and nothing scored
    [ -z "$(grep '# skip' "$h/build/t.tap" | grep -v '# skip no usable GPU: ')" ] ||
        fail "skipped for another reason: $(grep '# skip' "$h/build/t.tap" | grep -v 'no usable GPU' | head -n 3)"
    run a_user_make -C "$h" -s "${arch[@]}" grade
    assert_output --partial "grade: exit status 3"
    assert_line --regexp "^total .* not graded "
    run a_user_make -C "$h" -s "${arch[@]}" check LESSON=07
    assert_output --regexp "07_event_sync: builds; not graded: no usable GPU"
    while IFS=$'\t' read -r id hint; do
        [[ "$id" == 07-* ]] || continue
        assert_output --partial "$id: $hint"
    done <"$h/hints.tsv"
    run a_user_make -C "$h" -s "${arch[@]}" demo DEMO_ARGS="--only 1 --size-mib 1"
    assert_output --partial "05_stream_overlap: no usable GPU"
    run a_user_make -C "$h" -s lessons
    assert_equal "$status" 2
    assert_output --partial "not in a student's copy of the course"
}

# bats test_tags=gpu
@test "handout: on a GPU, an unsolved lesson scores 0 and a solved one full, against the prebuilt reference" {
    need_gpu
    make_handout 06-07
    h=$H
    export COURSE_BIN= COURSE_REF_BIN= COURSE_TOOLS=
    run env BATS_FILTER_TAGS='!sanitizer,!host-sanitizer' env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -C "$h" -s grade GRADE_LESSONS=07
    assert_line --regexp "^07 +0 +4 +0 +0/4 "
    cp "$ROOT"/solutions/07_event_sync/*.cu "$h/lessons/07_event_sync/"
    run env BATS_FILTER_TAGS='!sanitizer,!host-sanitizer' env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -C "$h" -s grade GRADE_LESSONS=07
    assert_success
    assert_line --regexp "^07 +4 +0 +0 +4/4 "
    assert_output --partial "grade: exit status 0"
}
