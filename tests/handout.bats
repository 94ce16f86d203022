#!/usr/bin/env bats
# The handout (tools/make-handout, make handout LESSONS=05-08): a student's copy of some
# lessons, without their answers. Course health: none of it is scored.
#
# A check here builds handouts and then their lessons, as a student would: minutes on a
# machine of two CPUs. Such a check has HANDOUT_TEST_TIMEOUT seconds (default 900), not the
# suite's BATS_TEST_TIMEOUT. The handouts' reference is the build under test's own solutions
# (--ref-build), which the Makefile builds without call text: nothing is built twice. On a GPU,
# `make dev-check PARTS=handouts` grades every lesson of the handouts of 05-08, 05-12 and 05-16.
BATS_TEST_TIMEOUT=${HANDOUT_TEST_TIMEOUT:-900}

load helpers

BUILT=$(dirname "$REF_BIN")  # the build folder under test: the reference handed out comes from it

setup_file() {
    detect_gpu
}

# as_a_student [NAME=VALUE...] COMMAND...: COMMAND as a student types it in their copy (a_user),
# with nothing of this course's build under test (COURSE_*) or of this check's GPU; the checks inside
# have no limit of bats's own, their programs have CHECK_TIMEOUT
as_a_student() {
    a_user COURSE_BIN= COURSE_REF_BIN= COURSE_TOOLS= HAVE_GPU= GPU_WHY= "$@"
}

# a_user_make ARGS...: make as a student types it
a_user_make() {
    as_a_student make "$@"
}

# Which ranges: a handout of a range holds a subset of the files of one of a longer range (its notes
# aside, whose links to lessons not handed out become text) and a subset of its answers, so what a
# range hides the ranges holding it hide too: every lesson alone (its own answers, which its own
# files must not hold) and every range from 05 up (the course as handed out so far, 05-16 the whole),
# each made from sources, side by side.
@test "handout: no answer of its lessons in a handout of every lesson alone and every range from 05 (sources)" {
    mapfile -t all < <(cd "$ROOT/solutions" && ls -d [0-9][0-9]_* | cut -c1-2)
    ranges=()
    for n in "${all[@]}"; do ranges+=("$n-$n"); done
    for n in "${all[@]:1}"; do ranges+=("${all[0]}-$n"); done
    out=$BATS_TEST_TMPDIR/h
    mkdir -p "$out"
    printf '%s\n' "${ranges[@]}" | xargs -P "$(nproc)" -I{} sh -c \
        '"$0" --sources-only --lessons "$1" --out "$2/$1" >"$2/$1.out" 2>"$2/$1.err"; echo $? >"$2/$1.rc"' \
        "$ROOT/tools/make-handout" {} "$out"
    bad=""
    for r in "${ranges[@]}"; do
        [ "$(cat "$out/$r.rc")" -eq 0 ] || bad+="  $r: exit $(cat "$out/$r.rc"): $(cat "$out/$r.err")"$'\n'
    done
    [ -z "$bad" ] || fail "ranges not released: $bad"
}

# course_copy DIR: the course's sources, to break on purpose
course_copy() {
    mkdir -p "$1"
    (cd "$ROOT" && cp -a Makefile common solutions lessons tools tests notes "$1/")
}

# region ID FILE: the code of exercise ID's region in FILE (its comments left out)
region() {
    sed -n "/BEGIN SOLUTION($1)/,/END SOLUTION/p" "$2" | grep -v '^ *//'
}

@test "handout: the answer check finds an answer typed again in a later lesson, in a note, in common/, and a near copy" {
    c=$BATS_TEST_TMPDIR/c
    course_copy "$c"
    # 05-kernel-wait's answer on another struct in lesson 06's code
    answer=$(region 05-kernel-wait "$c/solutions/05_stream_overlap/pipeline.cu" | sed 's/p->/x->/g')
    [ -n "$answer" ]
    awk -v a="$answer" '{ print } /^int main\(/ { getline; print; print a }' "$c/solutions/06_per_batch_sync/train.cu" >"$c/new" &&
        mv "$c/new" "$c/solutions/06_per_batch_sync/train.cu"
    # 06-copy-sync's in a note of 05, 07-copy-event's in a comment of common/
    { echo '```c'; region 06-copy-sync "$c/solutions/06_per_batch_sync/train.cu"; echo '```'; } >>"$c/notes/05_stream_overlap.md"
    region 07-copy-event "$c/solutions/07_event_sync/train.cu" | sed 's|^|// |' >>"$c/common/gpu/memory.c"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 05-07 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" =~ 05-kernel-wait$'\t'lessons/06_per_batch_sync/train\.cu: ]] || fail "06's copy of 05's answer: $stderr"
    [[ "$stderr" =~ 06-copy-sync$'\t'notes/05_stream_overlap\.md: ]] || fail "06's answer in a note: $stderr"
    [[ "$stderr" =~ 07-copy-event$'\t'common/gpu/memory\.c: ]] || fail "07's answer in common/: $stderr"
    [ ! -e "$BATS_TEST_TMPDIR/out/course-05-07.tar.gz" ] || fail "released anyway"
    # a handout without the lesson whose answer it is: nothing to hide there
    run "$c/tools/make-handout" --sources-only --lessons 06-06 --out "$BATS_TEST_TMPDIR/out"
    assert_success
    # a near copy in common/: 16-atomic's calls, in order, on names of its own (as flight.c had them)
    {
        echo 'int planted_write(const char *a, const char *b, void *c, long n)'
        echo '{'
        region 16-atomic "$c/solutions/16_checkpoint_restart/checkpoint.cu" | grep -v '^ *//|' |
            sed 's/\btmp\b/a/g; s/\bpath\b/b/g; s/\bout\b/stream/g; s/\bbad\b/failed/g; s/\bsaved\b/e/g'
        echo '}'
    } >>"$c/common/base/own_file.c"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 16-16 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" =~ 16-atomic$'\t'common/base/own_file\.c:[0-9]+\ \(a\ near\ copy ]] || fail "the near copy: $stderr"
    [ "$(grep -c $'^  16-atomic\t' <<<"$stderr")" -eq 1 ] || fail "found elsewhere too: $stderr"
}

@test "handout: the answer check reads notes and checks statement by statement; what the lesson itself gives does not count" {
    c=$BATS_TEST_TMPDIR/c
    course_copy "$c"
    # one statement of 07-copy-event in a note, across two lines; the other in a check's grep
    n=$(($(wc -l <"$c/notes/07_event_sync.md") + 2))
    printf '\nThe copy ends: `cudaEventRecord(sync->copied,\n    t->copy_stream)`, then the step.\n' >>"$c/notes/07_event_sync.md"
    k=$(($(wc -l <"$c/tests/07_event_sync.bats") + 1))
    printf "# grep -q 'cudaStreamWaitEvent(t->compute_stream, sync->copied, 0)' train.cu\n" >>"$c/tests/07_event_sync.bats"
    # a call of 05-by-stage's answer that lesson 05 also makes outside its exercises
    grep -q 'chunk_len(w, c)' "$c/lessons/05_stream_overlap/overlap.cu" || fail "lesson 05 no longer gives chunk_len(w, c)"
    region 05-by-stage "$c/solutions/05_stream_overlap/overlap.cu" | grep -q 'chunk_len(w, c)' || fail "05-by-stage no longer makes it"
    printf '\nEach chunk is `chunk_len(w, c)` long.\n' >>"$c/notes/05_stream_overlap.md"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 05-07 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" == *$'07-copy-event\tnotes/07_event_sync.md:'"$n"' (it holds cudaEventRecord(copied,copy_stream))'* ]] ||
        fail "the statement in a note: $stderr"
    [[ "$stderr" == *$'07-copy-event\ttests/07_event_sync.bats:'"$k"' (it holds cudaStreamWaitEvent(compute_stream,copied,0))'* ]] ||
        fail "the statement in a check: $stderr"
    [[ "$stderr" != *05-by-stage* ]] || fail "what lesson 05 gives counted as its answer: $stderr"
    [ ! -e "$BATS_TEST_TMPDIR/out/course-05-07.tar.gz" ] || fail "released anyway"
}

@test "handout: the answer check reads binaries: an object with a check macro's call text is refused, one without it is not" {
    c=$BATS_TEST_TMPDIR/c
    course_copy "$c"
    # 07-copy-event's first call, as a lesson types it, through the course's CUDA_CHECK
    cat >"$BATS_TEST_TMPDIR/planted.c" <<'EOF'
#include "common/base/check.h"
typedef struct { cudaEvent_t copied; } event_sync;
typedef struct { cudaStream_t copy_stream; } trainer;
void planted(event_sync *sync, trainer *t)
{
    CUDA_CHECK(cudaEventRecord(sync->copied, t->copy_stream));
}
EOF
    cuda=${CUDA_HOME:-/usr/local/cuda}
    gcc -std=c11 -c -I"$ROOT" -I"$cuda/include" "$BATS_TEST_TMPDIR/planted.c" -o "$c/common/planted.o"
    run --separate-stderr "$c/tools/make-handout" --sources-only --lessons 07-07 --out "$BATS_TEST_TMPDIR/out"
    assert_equal "$status" 1
    [[ "$stderr" == *$'07-copy-event\tcommon/planted.o (a binary: its strings hold cudaEventRecord(copied,copy_stream))'* ]] ||
        fail "the call text in a binary: $stderr"
    # built as the solutions are (the Makefile's SOLUTION_FLAGS), the same object holds no call text
    gcc -std=c11 -DCOURSE_NO_CALL_TEXT -c -I"$ROOT" -I"$cuda/include" "$BATS_TEST_TMPDIR/planted.c" -o "$c/common/planted.o"
    run "$c/tools/make-handout" --sources-only --lessons 07-07 --out "$BATS_TEST_TMPDIR/out"
    assert_success
    grep -q 'SOLUTION_FLAGS := -DCOURSE_NO_CALL_TEXT' "$ROOT/Makefile" || fail "the Makefile no longer builds solutions so"
}

@test "handout: make-handout says each object, library and program of the reference as it builds it, and that it goes on" {
    b=$BATS_TEST_TMPDIR/b
    cp -a "$BUILT" "$b"
    rm -f "$b/lib/08_interval_sync.a" "$b/lib/08_interval_sync/loss_ring.o"  # and so 09, which links it
    # another make-handout's build in that folder for 3 s: this one waits, and says that it goes on
    flock "$b/.lock" sh -c 'touch "$0"; sleep 3' "$BATS_TEST_TMPDIR/held" &
    for ((k = 0; k < 100; k++)); do [ -e "$BATS_TEST_TMPDIR/held" ] && break; sleep 0.1; done
    run env MAKE_HANDOUT_PROGRESS_S=1 "$ROOT/tools/make-handout" --lessons 09-09 --ref-build "$b" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    assert_line "make-handout: another make-handout builds in $b: waiting for it"
    assert_line --regexp '^make-handout: still building \([0-9]+ s so far\)$'
    assert_line "make-handout: building lib/08_interval_sync/loss_ring.o"
    assert_line "make-handout: building lib/08_interval_sync.a"
    assert_line "make-handout: building solutions/09_four_stream_pipeline"
    refute_line --partial "building tools/"  # built already: not a word of it
}

@test "handout: a lesson handed out with a later one that links it: its library stripped to what links, the README says so" {
    run "$ROOT/tools/make-handout" --lessons 08-09 --ref-build "$BUILT" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    h=$BATS_TEST_TMPDIR/out/course-08-09
    lib=$h/lib/08_interval_sync.a
    [ -z "$(nm "$lib" | awk '$2 ~ /^[tdb]$/')" ] || fail "local names in $lib: $(nm "$lib" | awk '$2 ~ /^[tdb]$/')"
    [ "$(readelf -S "$lib" | grep -c '\.debug')" -eq 0 ] || fail "debugging information in $lib"
    grep -qF "Every lesson of this copy comes compiled, its answers too, in \`reference/solutions/\`" "$h/README.md" ||
        fail "the README does not say that the lessons come compiled"
    grep -qF "and lesson 08's library also in \`lib/08_interval_sync.a\`" "$h/README.md" ||
        fail "the README does not say that lesson 08 is in lib/ too"
    # what a later lesson links, as it stands: 09 builds against it and runs
    run env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -s -C "$h" build/lessons/09_four_stream_pipeline
    assert_success
    run "$h/build/lessons/09_four_stream_pipeline" --help
    assert_success
    # a range without lesson 08 carries its library, and says nothing of 08 compiled
    run "$ROOT/tools/make-handout" --lessons 09-09 --ref-build "$BUILT" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    ! grep -q "lesson 08's library also" "$BATS_TEST_TMPDIR/out/course-09-09/README.md" || fail "09-09 says 08 is compiled in it"
}

@test "handout: make-handout refuses a lesson the course does not have, a range backwards, bad options: exit code 2, one line" {
    for args in "--lessons 99" "--lessons 05-99" "--lessons 08-05" "--lessons x" "--arch abc" "--name a/b" "--frobnicate" \
        "--ref-build /nonexistent/x" "--lessons" "--out" "--name" "--arch" "--ref-build"; do
        # shellcheck disable=SC2086
        run --separate-stderr timeout 20 "$ROOT/tools/make-handout" $args
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

# make_handout RANGE: a handout of RANGE, its reference the build under test's, in $BATS_TEST_TMPDIR/out
make_handout() {
    run "$ROOT/tools/make-handout" --lessons "$1" --ref-build "$BUILT" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    H=$BATS_TEST_TMPDIR/out/course-${1%%-*}-${1##*-}
}

# assert_handout_holds H LESSON...: what a handout of those lessons holds, and what it does not
assert_handout_holds() {
    local h=$1 f
    shift
    for f in README.md Makefile hints.tsv common/train/trainer.c tests/helpers.bash tests/timed tools/grade tools/run-tests \
        tools/gpu-probe.c; do
        [ -e "$h/$f" ] || fail "no $f in the handout"
    done
    assert_equal "$(cd "$h/lessons" && ls | tr '\n' ' ')" "$(printf '%s ' "$@")"
    assert_equal "$(cd "$h/tests" && ls *.bats | tr '\n' ' ')" "$(printf '%s.bats ' "$@")"
    [ ! -e "$h/solutions" ] || fail "solutions/ is in the handout"
    for f in make-lessons gen-lesson make-handout dev-check grade-class bench; do
        [ ! -e "$h/tools/$f" ] || fail "tools/$f is in the handout"
    done
    # the student versions, as the course generates them
    for f in "$h"/lessons/*/*; do
        diff -q "$f" "$ROOT/lessons/${f#"$h"/lessons/}" >/dev/null || fail "$f differs from the course's lessons/"
    done
    # the libraries of the lessons they stand on, prebuilt, with their headers and no debugging information
    for l in "$@"; do
        for e in $(sed -n "s/^STANDS_ON\\.$l := //p" "$ROOT/Makefile"); do
            [ -f "$h/lib/$e.a" ] || fail "$l stands on $e: no lib/$e.a"
            [ -f "$h/lib/$e/$(ls "$ROOT/solutions/$e" | grep '\.h$' | head -n 1)" ] || fail "no headers in lib/$e"
            ! readelf -S "$h/lib/$e.a" | grep -q '\.debug_' || fail "lib/$e.a has debugging information"
        done
    done
    # the reference: stripped, built without the solutions' call text (the check macros' fixed text
    # in its place); 07's two answers, which a reference with call text printed, are not in it
    for f in "$h"/reference/solutions/*; do
        file "$f" | grep -q ', stripped' || fail "$f is not stripped"
        strings -a "$f" | grep -q 'the call at this line' || fail "$f: no check macro without call text in it"
    done
    if [ -e "$h/reference/solutions/07_event_sync" ]; then
        ! strings -a "$h/reference/solutions/07_event_sync" | grep -E 'cudaEventRecord\(sync->copied|sync->copied, 0\)' ||
            fail "07's answers in its reference"
    fi
    # every hint of its exercises, as the course gives it; links and paths lead somewhere
    assert_equal "$(cut -f1 "$h/hints.tsv" | tr '\n' ' ')" "$("$ROOT/tools/grade" --list-hints "$@" | cut -f1 | tr '\n' ' ')"
    run broken_links "$h/README.md" "$h"/notes/*.md
    assert_output ""
    run cited_paths "$h" "$h/README.md" "$h"/notes/*.md
    assert_output ""
    ! grep -rn 'build/solutions/' "$h/lessons" || fail "a lesson names build/solutions/, which a handout has not"
    ! grep -rn 'The complete program is `lessons/' "$h/notes" || fail "a note calls the student's version complete"
    assert_equal "$(tar -tzf "$h.tar.gz" | grep -v '/$' | sort)" "$(cd "$(dirname "$h")" && find "$(basename "$h")" -type f | sort)"
}

# assert_student_run H [LESSON_TO_CHECK [TESTS]]: as a student, without a GPU (none visible): build,
# test (TESTS: those files alone, e.g. a lesson's whose copy another handout's test ran), grade,
# check a lesson, demo
assert_student_run() {
    local h=$1 n=${2:-} tests=${3:-}
    local arch=()
    [ "$HAVE_GPU" = 1 ] || arch=(ARCH=ptx)  # no GPU: what make chooses, a check that it compiles
    export CUDA_VISIBLE_DEVICES=
    run a_user_make -C "$h" "${arch[@]}"
    assert_success
    for l in "$h"/lessons/*; do [ -x "$h/build/lessons/$(basename "$l")" ] || fail "$(basename "$l") was not built"; done
    run a_user_make -C "$h" -s "${arch[@]}" test TAP_OUT="$h/build/t.tap" ${tests:+TESTS="$tests"}
    assert_success
    [[ "${lines[-1]}" =~ ^([0-9]+)\ passed,\ 0\ failed,\ ([0-9]+)\ skipped$ ]] || fail "the last line: ${lines[-1]}"
    assert_num "${BASH_REMATCH[1]}" ">" 2 "checks that need no GPU passed"
    assert_num "${BASH_REMATCH[2]}" ">" 3 "GPU checks skipped"
    # every GPU check skipped with the one reason, or because of this machine's size (05's and 06's
    # memory), or a check of the course's own code that a student's copy has not (14's recorder, 16's writer)
    others=$(grep '# skip' "$h/build/t.tap" |
        grep -vE '# skip (no usable GPU: |this machine (has|holds) [0-9]+ GiB|.*: not in a student.s copy$)') || true
    [ -z "$others" ] || fail "skipped for another reason: $(head -n 3 <<<"$others")"
    run a_user_make -C "$h" -s "${arch[@]}" grade
    assert_output --partial "grade: exit status 3"
    assert_line --regexp "^total .* not graded "
    assert_output --partial "(README, Working on a lesson)"
    if [ -n "$n" ]; then
        local lesson
        lesson=$(basename "$(echo "$h"/lessons/"$n"_*)")
        run a_user_make -C "$h" -s "${arch[@]}" check LESSON="$n"
        assert_output --regexp "$lesson: builds; not graded: no usable GPU"
        while IFS=$'\t' read -r id hint; do
            [[ "$id" == "$n"-* ]] || continue
            assert_output --partial "$id: $hint"
        done <"$h/hints.tsv"
    fi
    run a_user_make -C "$h" -s "${arch[@]}" demo DEMO_ARGS="--help"
    assert_success
    run a_user_make -C "$h" -s lessons
    assert_equal "$status" 2
    assert_output --partial "not in a student's copy of the course"
}

# seed_build FROM TO [all]: TO's build folder begins as FROM's build/ (timestamps kept): the course's
# part (common/, the tools, whose sources make-handout copies with their times), and with `all` the
# lessons too, whose sources are the same files (make-handout gives a generated lesson its
# solution's time), so that make builds only what differs
seed_build() {
    local from=$1/build
    [ -d "$from/common" ] || from=$1  # the course's build folder itself
    mkdir -p "$2/build"
    (cd "$from" && cp -a common libcourse.a libcourse-host.a tools "$2/build/")
    [ "${3:-}" != all ] || cp -a "$from/lessons" "$2/build/"
}

@test "handout: copies of 05-16, 05-08, 05-12 and 14 alone hold what a student needs, no answer, build and test without a GPU" {
    make_handout 05-16
    full=$H
    mapfile -t all < <(cd "$ROOT/solutions" && ls -d [0-9][0-9]_*)
    assert_handout_holds "$full" "${all[@]}"
    grep -qF "NCCL for lessons 12, 13, 14, 15 and 16" "$full/README.md" || fail "the README's NCCL lessons: $(grep NCCL "$full/README.md")"
    for t in launch.c tracestat.c checkpoint-report.c flight-report.c; do
        [ -e "$full/tools/${t%.c}" ] || [ -e "$full/tools/$t" ] || fail "no tools/$t in 05-16"
    done
    # common/, the tools and the lessons as the course built them (the same files, their times kept),
    # but one lesson of each kind compiled here against what the handout carries: 09 on 08's prebuilt
    # library, 13 on NCCL and none (14 alone, below: on 12's and 08's)
    seed_build "$BUILT" "$full" all
    touch "$full"/lessons/09_*/*.cu "$full"/lessons/13_*/*.cu
    assert_student_run "$full" 13
    for l in 09_four_stream_pipeline 13_pipeline_parallel; do
        [ "$full/build/lessons/$l" -nt "$BUILT/lessons/$l" ] || fail "$l was not compiled in the handout"
    done
    # the smaller ranges, each built over the first's objects (the same files): what differs is built;
    # their checks are the same files as 05-16's, run there against the same reference: one lesson's
    # here, to see the checks run in that tree
    make_handout 05-08
    assert_handout_holds "$H" "${all[@]:0:4}"
    [ ! -e "$H/tools/launch" ] && [ ! -e "$H/lib/12_data_parallel_overlap.a" ] || fail "05-08 holds what only 12-16 need"
    grep -qF "NCCL for none of these lessons" "$H/README.md" || fail "the README's NCCL lessons: $(grep NCCL "$H/README.md")"
    seed_build "$full" "$H" all
    assert_student_run "$H" 07 tests/07_event_sync.bats
    make_handout 05-12
    assert_handout_holds "$H" "${all[@]:0:8}"
    seed_build "$full" "$H" all
    assert_student_run "$H" 12 tests/12_data_parallel_overlap.bats
    # lesson 14 alone: 12's library and 08's, prebuilt, and 14 compiled here against them
    make_handout 14-14
    assert_handout_holds "$H" 14_fault_tolerance
    assert_equal "$(cd "$H/lib" && ls -d *.a | tr '\n' ' ')" "08_interval_sync.a 12_data_parallel_overlap.a "
    seed_build "$full" "$H"
    assert_student_run "$H" 14
}

# bats test_tags=gpu,compiles
@test "handout: on a GPU, an unsolved lesson scores 0 and a solved one full, against the prebuilt reference" {
    need_gpu
    make_handout 06-07
    h=$H
    grade_07() { as_a_student BATS_FILTER_TAGS='!sanitizer,!host-sanitizer' make -C "$h" -s grade GRADE_LESSONS=07; }
    run grade_07
    assert_line --regexp "^07 +0 +4 +0 +0/4 "
    cp "$ROOT"/solutions/07_event_sync/*.cu "$h/lessons/07_event_sync/"
    run grade_07
    assert_success
    assert_line --regexp "^07 +4 +0 +0 +4/4 "
    assert_output --partial "grade: exit status 0"
}
