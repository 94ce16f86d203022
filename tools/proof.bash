# proof.bash: how the course's proofs are read, for tools/dev-check and tools/gpu-check (sourced).
#
#   mutant_verdict ID NTAG TAP      a mutant's checks against what its exercise must make fail
#   handout_verdict RANGE STATE DIR a handout's grade, unsolved (every lesson 0) or solved (full)
#   handout_lesson_grade ...        a lesson's line and checks of such a grade, from its checks' TAP
#
# Each prints its lines for a person, and one "PROBLEM: ..." line per problem found; its exit
# status is 0 when there is none.

# mutant_verdict ID NTAG TAP: exercise ID's mutant ran its tagged checks into TAP; each of the
# NTAG must have run and failed ("06-copy-sync: 4 of 4 tagged checks fail without it"); a check
# that passed or was skipped (a skip proves nothing) is named
mutant_verdict() {
    local id=$1 ntag=$2 tap=$3 ran failed t
    ran=$(grep -cE '^(not )?ok [0-9]+ ' "$tap" 2>/dev/null)
    failed=$(grep -cE '^not ok [0-9]+ ' "$tap" 2>/dev/null)
    ran=${ran:-0} failed=${failed:-0}
    echo "  $id: $failed of $ntag tagged checks fail without it"
    [ "$ran" -eq "$ntag" ] && [ "$failed" -eq "$ntag" ] && return 0
    grep -E '^ok [0-9]+ ' "$tap" 2>/dev/null | sed 's/^ok [0-9]* //' | while IFS= read -r t; do
        if [[ "$t" == *" # skip"* ]]; then echo "    skipped: $t"; else echo "    passed anyway: $t"; fi
    done
    [ "$ran" -eq "$ntag" ] || echo "    bats ran $ran of the $ntag tagged checks ($tap)"
    echo "PROBLEM: $id: $((ntag - failed)) of $ntag tagged checks do not fail without it"
    return 1
}

# handout_verdict RANGE STATE DIR: a handout's grade (tools/grade's lessons.tsv and checks.tsv in
# DIR), a line per lesson ("handout 05-08 unsolved: lesson 06 scores 0/3"); a problem for each
# lesson that did not run, ran no scored check, scores other than 0 unsolved or other than full
# solved
handout_verdict() {
    local r=$1 st=$2 c=$3/checks.tsv n lst note total failed passed bad=0
    [ -s "$c" ] || { echo "PROBLEM: handout $r $st: the grade gave no results ($3)"; return 1; }
    while IFS=$'\t' read -r n lst _ note; do
        echo "PROBLEM: handout $r $st lesson $n: $lst: $note"
        bad=1
    done < <(awk -F'\t' '$2 != "ran"' "$3/lessons.tsv")
    for n in $(awk -F'\t' '$2 == "ran" { print $1 }' "$3/lessons.tsv"); do
        total=$(awk -F'\t' -v n="$n" '$1 == n && $3 != "-" && $2 != "skip"' "$c" | wc -l)
        failed=$(awk -F'\t' -v n="$n" '$1 == n && $3 != "-" && ($2 == "fail" || $2 == "timeout")' "$c" | wc -l)
        passed=$((total - failed))
        echo "handout $r $st: lesson $n scores $passed/$total"
        if [ "$total" -eq 0 ]; then
            echo "PROBLEM: handout $r $st lesson $n: no scored check ran"
            bad=1
        elif [ "$st" = unsolved ] && [ "$passed" -ne 0 ]; then
            echo "PROBLEM: handout $r unsolved lesson $n: $passed scored checks pass: $(awk -F'\t' -v n="$n" \
                '$1 == n && $3 != "-" && $2 == "pass" { printf "%s; ", $4 }' "$c")"
            bad=1
        elif [ "$st" = solved ] && [ "$failed" -ne 0 ]; then
            echo "PROBLEM: handout $r solved lesson $n: $failed scored checks fail: $(awk -F'\t' -v n="$n" \
                '$1 == n && $3 != "-" && ($2 == "fail" || $2 == "timeout") { printf "%s; ", $4 }' "$c")"
            bad=1
        fi
    done
    return "$bad"
}

# handout_lesson_grade COURSE TREE NN TAPDIR DIR: lesson NN of the handout TREE graded into DIR
# (lessons.tsv and checks.tsv, as tools/grade writes them, a line appended to each) from the TAP
# its checks left in TAPDIR (tools/bats-pool): "build failed" (the compiler's first error) where the
# lesson has no binary, "not graded" where its checks did not finish, else scored as tools/grade
# scores a TAP (its checks' times, bats --timing, taken off their names first)
handout_lesson_grade() {
    local course=$1 tree=$2 n=$3 taps=$4 dir=$5 l
    mkdir -p "$dir"
    l=$(cd "$tree/tests" 2>/dev/null && basename "$(echo "${n}"_*.bats)" .bats)
    if [ ! -x "$tree/build/lessons/$l" ]; then
        printf '%s\tbuild failed\t0\t%s\n' "$n" "$(grep -m 1 -E ': (fatal )?error|undefined reference|nvcc fatal' \
            "$tree.build.log" 2>/dev/null || echo "no binary $tree/build/lessons/$l ($tree.build.log)")" >>"$dir/lessons.tsv"
    elif [ ! -f "$taps/$l.done" ]; then
        printf '%s\tnot graded\t0\tits checks did not finish (%s)\n' "$n" "$taps" >>"$dir/lessons.tsv"
    else
        "$course/tools/grade" --list-tags "$tree/tests/$l.bats" >"$dir/$n.tags"
        sed -E 's/ in [0-9]+ ?ms( # |$)/\1/' "$taps/$l.tap" >"$dir/$n.tap"
        if "$course/tools/grade" --from-tap "$dir/$n.tap" --tags "$dir/$n.tags" --timeouts "$taps/$l.timeouts" \
            --out "$dir/$n" >/dev/null 2>&1 || [ -s "$dir/$n/lessons.tsv" ]; then
            cat "$dir/$n/lessons.tsv" >>"$dir/lessons.tsv"
            cat "$dir/$n/checks.tsv" >>"$dir/checks.tsv"
        else
            printf '%s\tnot graded\t0\tits TAP could not be scored (%s)\n' "$n" "$taps/$l.tap" >>"$dir/lessons.tsv"
        fi
    fi
}
