#!/usr/bin/env bats
# The grader (tools/grade: make check, next, grade): scoring, hints, and a
# student's tests never counting. The TAP fixtures were recorded from real runs
# of this suite: tap_gpu_run.tap on an H200 (with five failures since fixed),
# tap_no_gpu.tap on a machine without a GPU.

load helpers

setup_file() {
    detect_gpu
}

@test "grading: the score table of a recorded GPU run, per lesson and in total" {
    run "$ROOT/tools/grade" --from-tap "$FIXTURES/tap_gpu_run.tap"
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_gpu_run.table.txt"
    assert_line --regexp "^05 +16 +1 +0 +16/17$"
    assert_line --regexp "^total +70 +5 +0 +70/75$"
}

@test "grading: without a GPU the score counts only the checks that ran, and says why" {
    run "$ROOT/tools/grade" --from-tap "$FIXTURES/tap_no_gpu.tap"
    assert_success
    diff <(printf '%s\n' "$output") "$FIXTURES/tap_no_gpu.table.txt"
    assert_line --regexp "^total +20 +0 +56 +20/20$"
    assert_output --partial "56 checks were skipped"
    assert_output --partial "no usable GPU"
}

@test "grading: tests outside the lessons (course, timeline) are not scored" {
    printf 'ok 1 course: builds\nnot ok 2 timeline: broken\nok 3 07 works\nnot ok 4 07 fails\n' >"$BATS_TEST_TMPDIR/t.tap"
    run "$ROOT/tools/grade" --from-tap "$BATS_TEST_TMPDIR/t.tap"
    assert_line --regexp "^07 +1 +1 +0 +1/2$"
    assert_line --regexp "^total +1 +1 +0 +1/2$"
    refute_output --partial "course"
}

@test "grading: make check without a GPU says the GPU checks were skipped, and why" {
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= "$ROOT/tools/grade" --lesson 07
    assert_success
    assert_output --partial "07_event_sync: all 3 checks that ran pass"
    assert_output --regexp "[0-9]+ GPU checks were skipped: .*no usable GPU"
}

@test "grading: a student's own tests/ cannot change their grade" {
    student=$BATS_TEST_TMPDIR/student
    mkdir -p "$student/tests"
    cp -r "$ROOT/lessons" "$student/"
    printf '@test "07 always passes" { true; }\n' >"$student/tests/07_event_sync.bats"
    run env CUDA_VISIBLE_DEVICES= HAVE_GPU= GRADE_OUT="$BATS_TEST_TMPDIR/grade" "$ROOT/tools/grade" --student "$student" --lesson 07
    assert_success
    assert_output --partial "all 3 checks that ran pass"   # the course's 07 tests, not the student's one
    refute_output --partial "always passes"
}

# bats test_tags=gpu
@test "grading: an unsolved lesson fails, and the hint of its first failing check is shown" {
    need_gpu
    run env BATS_FILTER_TAGS='!sanitizer,!host-sanitizer' "$ROOT/tools/grade" --lesson 06
    assert_failure
    assert_output --partial "first failing check: 06"
    assert_output --regexp "hint \(06-(copy|step)-sync\): "
}
