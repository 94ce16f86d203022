#!/usr/bin/env bats
# The grader (tools/grade: make check, next, grade; tools/grade-class: make
# grade-class): a lesson's score counts its checks tagged ex:ID alone; the other
# checks are course health, reported, never scored; skipped scored checks are "not
# graded", never passed; a student's hang ends with its check; a student's tests/
# cannot change a grade.
#
# The fixtures: TAP carries no tags, so each TAP file comes with the names and tags of
# its checks (NAME.tags, from `tools/grade --list-tags`) and what tests/timed logged
# (NAME.timeouts); NAME.table.txt and NAME.csv are what the grader must make of them.
# - tap_no_gpu.tap was recorded on 2026-11-22 by running the suite here, on a machine
#   without a GPU (COURSE_BIN=the unsolved lessons; grading.bats left out): every GPU
#   check skipped. Lesson 12 was being written then: three course checks and one
#   health check of 11 (a stale tracestat) failed; they show that failures outside
#   the scored checks are reported, never scored.
# - tap_gpu_run.tap is made by hand, as a GPU run would write it: lessons 05-07 with
#   scored (ex:) and health checks, a scored check that failed, one skipped on a GPU
#   with one copy engine, a check bats stopped at its time limit and one whose
#   program tests/timed stopped (tap_gpu_run.timeouts), health checks failed and
#   skipped, and course and timeline checks that are not lessons. Its table and CSV
#   row were worked out by hand: 05 3/4 (one scored check not graded), 06 2/4 (two
#   timed out), 07 4/4, total 9/12 = 75.0%.

load helpers

BUILT=$(dirname "$REF_BIN")  # the build folder under test: its solutions are the reference

setup_file() {
    detect_gpu
}

# from_tap NAME [ARGS...]: the grader on fixture NAME (its tags and timeouts)
from_tap() {
    local f=$FIXTURES/$1
    shift
    local args=(--from-tap "$f.tap" --tags "$f.tags" --out "$BATS_TEST_TMPDIR/g")
    [ -f "$f.timeouts" ] && args+=(--timeouts "$f.timeouts")
    "$ROOT/tools/grade" "${args[@]}" "$@"
}

@test "grading: the table of a GPU run scores the ex: checks alone, per lesson and in total" {
    run from_tap tap_gpu_run
    assert_equal "$status" 1  # a check failed
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_gpu_run.table.txt"
    assert_line --regexp "^05 +3 +1 +1 +3/4 +4 +1 +0 +1 scored not graded$"
    assert_line --regexp "^06 +2 +2 +0 +2/4 +4 +0 +0 +2 timed out$"
    assert_line --regexp "^07 +4 +0 +0 +4/4 +1 +1 +1$"
    assert_line --regexp "^total +9 +3 +1 +9/12 +9 +2 +1$"
    assert_line "05: 1 scored not graded: skipped: one copy engine: copies to and from the GPU take turns"
    assert_output --partial "timed out: 06 synchronises twice per batch: for the copy, then for the step (the check timed out after 120 s)"
    assert_output --partial "(a program timed out after 60 s)"
    refute_output --partial "course:"
    refute_output --partial "timeline:"
}

@test "grading: the CSV row of a GPU run: percent per lesson and in total" {
    run from_tap tap_gpu_run --csv --name gpu_run
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_gpu_run.csv"
    assert_line --index 0 "student,05,06,07,total"
    assert_line --index 1 "gpu_run,75.0,50.0,100.0,75.0"
}

@test "grading: without a GPU every lesson is 'not graded', never a score (recorded run)" {
    run from_tap tap_no_gpu
    assert_failure
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_no_gpu.table.txt"
    assert_line --regexp "^07 +0 +0 +4 +not graded +3 +0 +4$"
    assert_line --regexp "^total +0 +0 +34 +not graded +25 +1 +39$"
    assert_output --regexp "not graded: 05 06 07 08 09 10 11: every scored check was skipped: .*no usable GPU"
    refute_output --regexp "[0-9]+/[0-9]+"
    run from_tap tap_no_gpu --csv --name no_gpu
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_no_gpu.csv"
}

@test "grading: health checks never change a score; skipped scored checks are not graded, never passed" {
    printf '07 a\tgpu,ex:07-x\n07 b\tgpu,ex:07-x\n07 c\tgpu\n07 d\t\n08 a\tgpu,ex:08-y\n' >"$BATS_TEST_TMPDIR/t.tags"
    printf 'ok 1 07 a\nok 2 07 b # skip no GPU\nnot ok 3 07 c\nnot ok 4 07 d\nok 5 08 a # skip no GPU\n' >"$BATS_TEST_TMPDIR/t.tap"
    run "$ROOT/tools/grade" --from-tap "$BATS_TEST_TMPDIR/t.tap" --tags "$BATS_TEST_TMPDIR/t.tags" --out "$BATS_TEST_TMPDIR/g"
    assert_equal "$status" 1
    assert_line --regexp "^07 +1 +0 +1 +1/1 +0 +2 +0 +1 scored not graded$"
    assert_line --regexp "^08 +0 +0 +1 +not graded +0 +0 +0$"
    assert_line --regexp "^total +1 +0 +2 +not graded "
    # only health failed and nothing was skipped: a full score, and still exit 1
    printf 'ok 1 07 a\nok 2 07 b\nnot ok 3 07 c\n' >"$BATS_TEST_TMPDIR/h.tap"
    run "$ROOT/tools/grade" --from-tap "$BATS_TEST_TMPDIR/h.tap" --tags "$BATS_TEST_TMPDIR/t.tags" --out "$BATS_TEST_TMPDIR/g" --csv --name h
    assert_equal "$status" 1
    assert_line --index 1 "h,100.0,100.0"
    # every scored check skipped, nothing failed: exit 3, not graded
    printf 'ok 1 07 a # skip no GPU\nok 2 07 d\n' >"$BATS_TEST_TMPDIR/s.tap"
    run "$ROOT/tools/grade" --from-tap "$BATS_TEST_TMPDIR/s.tap" --tags "$BATS_TEST_TMPDIR/t.tags" --out "$BATS_TEST_TMPDIR/g"
    assert_equal "$status" 3
}

@test "grading: checks outside the lessons (course, timeline) are not scored" {
    printf 'ok 1 course: builds\nnot ok 2 timeline: broken\nok 3 07 works\nnot ok 4 07 fails\n' >"$BATS_TEST_TMPDIR/t.tap"
    printf '07 works\tex:07-x\n07 fails\tex:07-x\n' >"$BATS_TEST_TMPDIR/t.tags"
    run "$ROOT/tools/grade" --from-tap "$BATS_TEST_TMPDIR/t.tap" --tags "$BATS_TEST_TMPDIR/t.tags" --out "$BATS_TEST_TMPDIR/g"
    assert_line --regexp "^07 +1 +1 +0 +1/2 "
    assert_line --regexp "^total +1 +1 +0 +1/2 "
    refute_output --partial "course"
    refute_output --partial "timeline"
}

@test "grading: the grader reads the tags of every check as bats does" {
    "$ROOT/tools/grade" --list-tags >"$BATS_TEST_TMPDIR/tags.tsv"
    for file in "$ROOT"/tests/[0-9][0-9]_*.bats; do
        [ "$(basename "$file" | cut -c1-2)" = 00 ] && continue
        assert_equal "$(grep -c "^$(basename "$file" | cut -c1-2) " "$BATS_TEST_TMPDIR/tags.tsv")" "$(bats --count "$file")"
        for tag in $(grep "^$(basename "$file" | cut -c1-2) " "$BATS_TEST_TMPDIR/tags.tsv" | cut -f2 | tr ',' '\n' | sort -u); do
            mine=$(awk -F'\t' -v t="$tag" '{ k = split($2, a, ","); for (i = 1; i <= k; i++) if (a[i] == t) c++ } END { print c + 0 }' \
                <(grep "^$(basename "$file" | cut -c1-2) " "$BATS_TEST_TMPDIR/tags.tsv"))
            [ "$mine" -eq "$(bats --count --filter-tags "$tag" "$file")" ] ||
                fail "$(basename "$file"): $mine checks tagged $tag by the grader, $(bats --count --filter-tags "$tag" "$file") by bats"
        done
    done
}

@test "grading: make check without a GPU says it builds, 'not graded' with the reason, and lists each TODO left with its hint" {
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= GRADE_OUT="$BATS_TEST_TMPDIR/g" make -s -C "$ROOT" check LESSON=07 BUILD="$BUILT"
    assert_equal "$status" 2  # make's own code for any failure: the grader's 3 is on its last line
    assert_output --partial "grade: exit status 3"
    assert_output --regexp "07_event_sync: builds; not graded: no usable GPU: .* \(its 4 scored checks need a GPU\)"
    assert_output --partial "course health (not scored): 3 of 3 pass"
    # every TODO of the handed-out lesson, where it is, its id and its hint
    ids=$(sed -n 's/^[ \t]*\/\/ BEGIN SOLUTION(\([^)]*\)).*/\1/p' "$ROOT"/solutions/07_event_sync/*.cu)
    [ -n "$ids" ]
    assert_output --partial "TODO left ($(grep -c . <<<"$ids"))"
    for id in $ids; do
        hint=$(grep -h -m 1 "BEGIN SOLUTION($id)" "$ROOT"/solutions/07_event_sync/*.cu | sed 's/^.*BEGIN SOLUTION([^)]*): //')
        assert_output --regexp "lessons/07_event_sync/train\.cu:[0-9]+ $id: "
        assert_output --partial "$id: $hint"
    done
}

@test "grading: make next without a GPU stops at the first lesson with a TODO left, not graded, and exits non-zero" {
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= GRADE_OUT="$BATS_TEST_TMPDIR/g" make -s -C "$ROOT" next BUILD="$BUILT"
    assert_failure
    assert_output --partial "05_stream_overlap: builds; not graded"
    assert_output --partial "05-per-chunk: "
    assert_output --partial "next: lesson 05 is where to work"
    refute_output --partial "every lesson passes"
}

@test "grading: make grade without a GPU is a compile check: 'not graded' for every lesson, no check run, exit non-zero" {
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= GRADE_OUT="$BATS_TEST_TMPDIR/g" make -s -C "$ROOT" grade BUILD="$BUILT"
    assert_failure
    assert_output --partial "grade: exit status 3"
    for n in $(cd "$ROOT/tests" && ls [0-9][0-9]_*.bats | cut -c1-2 | grep -v 00); do
        assert_line --regexp "^$n +- +- +- +not graded +- +- +-$"
    done
    assert_line --regexp "^total .* not graded "
    # the reason once, the real cause, for every lesson
    assert_equal "$(grep -c 'no usable GPU' <<<"$output")" 1
    assert_output --regexp "not graded: 05 06 07 .*: no usable GPU: "
    # no check ran (none could score a lesson): no bats process, an empty TAP stream
    [ ! -s "$BATS_TEST_TMPDIR/g/pool.log" ] || fail "checks ran: $(head -n 5 "$BATS_TEST_TMPDIR/g/pool.log")"
    assert_equal "$(cat "$BATS_TEST_TMPDIR/g/grade.tap")" "1..0"
    assert_output --partial "TODO left: 05 ("
    assert_equal "$(tail -n 1 "$BATS_TEST_TMPDIR/g/grade.csv" | tr ',' '\n' | grep -vc 'not graded')" 1  # the name alone
    grep -q '<testsuites>' "$BATS_TEST_TMPDIR/g/report.xml"
}

# A check that grades (the handout's, make dev-check's) runs the grader inside bats, through make,
# whose recipe runs in /bin/sh where it needs a shell (quotes: `--lessons "07"`). There PATH begins
# with bats's own libexec folder, and /bin/sh (dash) drops the function bats's wrapper exports: the
# nested bats found no file of its own and ran no check ("Executed 0 instead of expected 1 tests",
# issue 43, on two H200).
@test "grading: make grade run inside a check, through make's /bin/sh, runs its checks" {
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= GRADE_HEALTH=1 GRADE_OUT="$BATS_TEST_TMPDIR/g" \
        make -s -C "$ROOT" grade GRADE_LESSONS=07 BUILD="$BUILT"
    assert_output --partial "grade: exit status 3"
    refute_output --partial "Executed 0"
    assert_line --regexp "^07 +0 +0 +4 +not graded +3 +0 +0"
}

@test "grading: a student's own tests/ cannot change their grade" {
    student=$BATS_TEST_TMPDIR/student
    mkdir -p "$student/tests"
    cp -r "$ROOT/lessons" "$student/"
    printf '@test "07 always passes" { true; }\n' >"$student/tests/07_event_sync.bats"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= "$ROOT/tools/grade" --student "$student" --ref-build "$BUILT" \
        --out "$BATS_TEST_TMPDIR/grade" --lesson 07
    assert_equal "$status" 3
    assert_output --partial "course health (not scored): 3 of 3 pass"   # the course's 07 tests, not the student's one
    refute_output --partial "always passes"
    [ ! -e "$BATS_TEST_TMPDIR/grade/stage/tests/07_event_sync.bats" ] || ! grep -q "always passes" "$BATS_TEST_TMPDIR/grade/stage/tests/07_event_sync.bats"
}

# bats test_tags=timed,deadline
@test "grading: a student's hang ends with its check, and nothing of theirs is left running" {
    "$ROOT/tools/make-class-fixture" "$BATS_TEST_TMPDIR/class" >/dev/null
    out=$BATS_TEST_TMPDIR/grade
    start=$(date +%s)
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= CHECK_TIMEOUT=3 "$ROOT/tools/grade" --student "$BATS_TEST_TMPDIR/class/hanging" \
        --ref-build "$BUILT" --out "$out" --lesson 07
    assert_equal "$status" 1
    help_check=$(grep -m 1 '^@test "07 --help' "$ROOT/tests/07_event_sync.bats" | sed 's/^@test "//; s/" {$//')
    assert_output --partial "timed out: $help_check (a program timed out after 3 s)"
    assert_output --partial "first failing check (course health): $help_check"
    assert_output --partial "no TODO left in lessons/07_event_sync"  # the hanging student solved it
    assert_num "$(($(date +%s) - start))" "<" 120 "seconds to grade a hanging lesson 07"
    grep -q "while (student_hang)" "$out/stage/lessons/07_event_sync/train.cu"
    sleep 1
    run pgrep -f "$out/stage/build/lessons/07_event_sync"
    assert_failure
}

@test "grading: grade-class writes one row per student; a lesson that does not build fails alone, with its first error" {
    "$ROOT/tools/make-class-fixture" "$BATS_TEST_TMPDIR/class" >/dev/null
    mkdir "$BATS_TEST_TMPDIR/class/not-a-copy"
    # lessons 07 and 08, their GPU checks alone (all skipped here): the builds and the rows, quickly
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= BATS_FILTER_TAGS=gpu "$ROOT/tools/grade-class" --build "$BUILT" \
        --out "$BATS_TEST_TMPDIR/gc" --keep --lessons "07 08" "$BATS_TEST_TMPDIR/class"
    assert_equal "$status" 1  # a lesson did not build, and a folder is not a copy
    assert_line --partial "grade-class: exit status 1"
    csv=$BATS_TEST_TMPDIR/gc/class.csv
    header=$(head -n 1 "$csv")
    assert_equal "$header" "student,07,08,total"
    assert_equal "$(wc -l <"$csv")" 6
    ng() { sed "s/[^,]*/$1/g" <<<"${header#student,}"; }
    assert_equal "$(grep '^solved,' "$csv")" "solved,$(ng 'not graded')"
    assert_equal "$(grep '^unsolved,' "$csv")" "unsolved,$(ng 'not graded')"
    assert_equal "$(grep '^not-a-copy,' "$csv")" "not-a-copy,$(ng 'no lessons folder')"
    # broken: 08 does not build, the others are graded (here: not graded)
    col=$(tr ',' '\n' <<<"$header" | grep -n '^08$' | cut -d: -f1)
    assert_equal "$(grep '^broken,' "$csv" | cut -d, -f"$col")" "build failed"
    assert_equal "$(grep '^broken,' "$csv" | tr ',' '\n' | grep -c 'build failed')" 1
    grep -A 20 '^broken:' "$BATS_TEST_TMPDIR/gc/class.log" | grep -qE "08: build failed: lessons/08_interval_sync/.*error" ||
        fail "the class log does not give 08's first error: $(cat "$BATS_TEST_TMPDIR/gc/class.log")"
    # the course's part was built once and copied (timestamps kept), not rebuilt per student
    for s in solved unsolved broken; do
        assert_equal "$(stat -c %Y "$BATS_TEST_TMPDIR/gc/$s/stage/build/libcourse.a")" "$(stat -c %Y "$BUILT/libcourse.a")"
    done
    # every lesson built, none graded (no GPU): exit 3, as the help says, its last line one line; into the
    # same folder: the students of the run before are gone, none of them feeds this one
    mkdir "$BATS_TEST_TMPDIR/class2"
    mv "$BATS_TEST_TMPDIR/class/solved" "$BATS_TEST_TMPDIR/class/unsolved" "$BATS_TEST_TMPDIR/class2/"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= BATS_FILTER_TAGS=gpu "$ROOT/tools/grade-class" --build "$BUILT" \
        --out "$BATS_TEST_TMPDIR/gc" --lessons "07" "$BATS_TEST_TMPDIR/class2"
    assert_equal "$status" 3
    [[ "${lines[-1]}" =~ ^grade-class:\ exit\ status\ 3\ \(.*no\ usable\ GPU.*\)$ ]] || fail "the last line: ${lines[-1]}"
    assert_equal "$(grep -c '^grade-class: exit status' <<<"$output")" 1
    assert_equal "$(ls "$BATS_TEST_TMPDIR/gc" | grep -vE '^(class\.csv|class\.log|course-build\.log)$' | tr '\n' ' ')" "solved unsolved "
    assert_equal "$(wc -l <"$BATS_TEST_TMPDIR/gc/class.csv")" 3
    # no GPU found: it says so, and names no compute capability as if it had found one
    if ! nvidia-smi -L >/dev/null 2>&1; then
        refute_output --partial "compute capability"
        assert_line --index 0 --partial "no GPU found"
    fi
}

# bats test_tags=timed,deadline
@test "grading: grade-class stops a student at the time limit, ends what they started, and says so" {
    "$ROOT/tools/make-class-fixture" "$BATS_TEST_TMPDIR/all" >/dev/null
    mkdir "$BATS_TEST_TMPDIR/class"
    mv "$BATS_TEST_TMPDIR/all/hanging" "$BATS_TEST_TMPDIR/class/"
    start=$(date +%s)
    # a check's own limit far away: only the student's limit can stop the hang
    # (without a GPU the grade runs no check unless asked to: GRADE_HEALTH, the checks that need none)
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= CHECK_TIMEOUT=600 BATS_FILTER_TAGS='!gpu' GRADE_HEALTH=1 BATS_TEST_TIMEOUT= "$ROOT/tools/grade-class" \
        --build "$BUILT" --out "$BATS_TEST_TMPDIR/gc" --time-limit 30 --lessons "06 07" "$BATS_TEST_TMPDIR/class"
    assert_num "$(($(date +%s) - start))" "<" 90 "seconds for a time limit of 30"
    header=$(head -n 1 "$BATS_TEST_TMPDIR/gc/class.csv")
    col=$(tr ',' '\n' <<<"$header" | grep -n '^07$' | cut -d: -f1)
    assert_equal "$(sed -n 2p "$BATS_TEST_TMPDIR/gc/class.csv" | cut -d, -f"$col")" "timed out"
    assert_output --partial "stopped at the time limit of 30"
    sleep 1
    run pgrep -f "$BATS_TEST_TMPDIR/gc/hanging/stage/build/lessons/"
    assert_failure
}

# course_copy DIR: a copy of the course and of the build under test, timestamps kept
# (nothing is rebuilt that was built), in which a test may break things
course_copy() {
    mkdir -p "$1"
    (cd "$ROOT" && cp -a Makefile common solutions lessons tools tests "$1/")
    cp -a "$BUILT" "$1/build"
}

@test "grading: a lesson that stops compiling after a good build is 'build failed', never graded from its old binary" {
    tree=$BATS_TEST_TMPDIR/course
    course_copy "$tree"
    [ -x "$tree/build/lessons/07_event_sync" ]  # the good build's binary is there
    printf 'this line is not C;\n' >>"$tree/lessons/07_event_sync/train.cu"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g" --lesson 07
    assert_equal "$status" 1
    assert_output --regexp "07_event_sync: build failed: lessons/07_event_sync/train\.cu\([0-9]+\): error"
    refute_output --partial "course health"
    # the whole grade too: every scored check counts as failed
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g2" --lessons "07"
    assert_equal "$status" 1
    assert_line --regexp "^07 +0 +4 +0 +build failed "
    assert_line --regexp "^07: build failed: lessons/07_event_sync/train\.cu\([0-9]+\): error"
}

# A grade builds each lesson with a make of its own, side by side in one tree. In a fresh tree (a
# handout: its tools link no part of the course's library) those makes each built the course's
# library and the ranks' bootstrap, the same files at once: on two H200 (issue 43) the 05-15
# handout's unsolved 07 failed so, "make: Target ... not remade because of errors". Each make's
# reasons (make --trace) say what it built.
@test "grading: in a fresh handout each lesson's make builds its lesson alone: what they all link is built once, first" {
    run "$ROOT/tools/make-handout" --lessons 12-13 --ref-build "$BUILT" --out "$BATS_TEST_TMPDIR/out"
    assert_success
    h=$BATS_TEST_TMPDIR/out/course-12-13
    [ ! -e "$h/build/libcourse.a" ] || fail "the handout came with the course's library built"
    run env -u MAKELEVEL CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= COURSE_TOOLS= MAKEFLAGS=--trace \
        "$h/tools/grade" --out "$BATS_TEST_TMPDIR/g"
    assert_equal "$status" 3  # built, not graded (no GPU)
    for l in 12_data_parallel_overlap 13_pipeline_parallel; do
        [ -x "$h/build/lessons/$l" ] || fail "$l was not built"
        others=$(sed -nE "s/^Makefile:[0-9]+: (update )?target '([^']*)'.*/\2/p" "$BATS_TEST_TMPDIR/g/$l.build.log" |
            grep -vxF "$h/build/lessons/$l") || true
        [ -z "$others" ] || fail "$l's make built what every lesson links: $(head -n 3 <<<"$others" | tr '\n' ' ')"
    done
    grep -q "target '$h/build/libcourse.a'" "$BATS_TEST_TMPDIR/g/course-build.log" || fail "the course's library was not built first"
}

# A folder where a build writes a file: its step fails with no line of a compiler's (rm's "Is a
# directory"), as a step that loses a race, is killed, or fails in nvcc's own words ("nvcc fatal :").
@test "grading: a build failing without a compiler's 'error:' line is reported by its first real line, never make's summary" {
    tree=$BATS_TEST_TMPDIR/course
    course_copy "$tree"
    rm -f "$tree/build/lessons/07_event_sync"
    mkdir -p "$tree/build/lessons/07_event_sync/x"  # the lesson's own step: rm -f of its old binary fails
    touch -d 2000-01-01 "$tree/build/lessons/07_event_sync"  # older than its sources: make rebuilds it
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g" --lessons "07"
    assert_equal "$status" 1
    assert_line --regexp "^07: build failed: rm: cannot remove '.*/build/lessons/07_event_sync': Is a directory$"
    # the course's own part: its library cannot be written
    rm -rf "$tree/build/lessons/07_event_sync" "$tree/build/libcourse.a"
    mkdir -p "$tree/build/libcourse.a/x"
    touch -d 2000-01-01 "$tree/build/libcourse.a"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g" --lessons "07"
    assert_equal "$status" 1
    assert_output --regexp "grade: the course's .* do(es)? not build"
    assert_line --regexp "^ *rm: cannot remove '.*/build/libcourse\.a': Is a directory$"
}

@test "grading: without a GPU nothing is scored, not even a scored check that passes without one" {
    tree=$BATS_TEST_TMPDIR/course
    course_copy "$tree"
    printf '\n# bats test_tags=ex:07-copy-event\n@test "07 a scored check that needs no GPU" {\n    true\n}\n' \
        >>"$tree/tests/07_event_sync.bats"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g" --lessons "07"
    assert_equal "$status" 3
    assert_line --regexp "^07 +- +- +- +not graded "
    refute_output --regexp "[0-9]+/[0-9]+"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= COURSE_BIN= COURSE_REF_BIN= "$tree/tools/grade" --out "$BATS_TEST_TMPDIR/g" --lesson 07
    assert_equal "$status" 3
    assert_output --regexp "07_event_sync: builds; not graded: no usable GPU: .* \(its 5 scored checks need a GPU\)"
}

@test "grading: make dev-check without a GPU says it needs one and exits with code 3" {
    run env CUDA_VISIBLE_DEVICES= "$ROOT/tools/dev-check" --build "$BUILT" solutions
    assert_equal "$status" 3
    assert_output --partial "dev-check: needs a GPU"
}

# bats test_tags=gpu
@test "grading: an unsolved lesson fails, and the hint of its first failing scored check is shown" {
    need_gpu
    run env BATS_FILTER_TAGS='!sanitizer,!host-sanitizer' "$ROOT/tools/grade" --build "$BUILT" --out "$BATS_TEST_TMPDIR/g" --lesson 06
    assert_failure
    assert_output --regexp "06_per_batch_sync: builds; 0 of [0-9]+ scored checks pass"
    assert_output --partial "first failing check: 06"
    assert_output --regexp "hint \(06-(copy|step)-sync\): "
}

@test "grading: a lesson the course does not have is refused, never dropped: exit code 2, one line naming it" {
    mkdir -p "$BATS_TEST_TMPDIR/class/a/lessons"
    for cmd in "grade --lessons 05,99" "grade --lessons 00" "grade-class --lessons 99 $BATS_TEST_TMPDIR/class" \
        "grade-class --lessons 05,99 $BATS_TEST_TMPDIR/class"; do
        # shellcheck disable=SC2086
        run --separate-stderr "$ROOT"/tools/$cmd --out "$BATS_TEST_TMPDIR/out"
        [ "$status" -eq 2 ] || fail "$cmd: exit code $status, expected 2"
        [ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "$cmd: expected one line, got: $stderr"
        [[ "$stderr" == *"no lesson "[09][09]* ]] || fail "$cmd: $stderr"
    done
}
