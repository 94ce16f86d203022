#!/usr/bin/env bats
# The course as a whole: the build, the generated student versions, the notes, the
# exercises and their checks, the C style. Course health: none of it is scored.

load helpers

BUILT=$(dirname "$REF_BIN")  # the build folder under test (make BUILD=...)

# c_code FILE...: every line of code as FILE:LINE:CODE, with comments, the contents of
# strings and character constants, and preprocessor lines left out.
c_code() {
    awk '
    FNR == 1 { incomment = 0; cont = 0 }
    {
        raw = $0
        if (cont) { cont = (raw ~ /\\$/); next }
        if (!incomment && raw ~ /^[ \t]*#/) { cont = (raw ~ /\\$/); next }
        out = ""; i = 1; n = length(raw)
        while (i <= n) {
            c = substr(raw, i, 1); d = substr(raw, i, 2)
            if (incomment) { if (d == "*/") { incomment = 0; i += 2 } else i++; continue }
            if (d == "/*") { incomment = 1; i += 2; continue }
            if (d == "//") break
            if (c == "\"" || c == "\047") {
                q = c; i++
                while (i <= n && substr(raw, i, 1) != q) { if (substr(raw, i, 1) == "\\") i++; i++ }
                i++; out = out q q; continue
            }
            out = out c; i++
        }
        print FILENAME ":" FNR ":" out
    }' "$@"
}

# file_scope_state FILE...: FILE:LINE: DECLARATION for every variable defined at file
# scope that is not const (static or not, host or __device__). A statement at file
# scope (the braces of its initialiser or type folded to {}) ends at ";", or at the
# "{" of a function's body; types, prototypes, extern declarations and consts pass.
file_scope_state() {
    c_code "$@" | awk '
    function classify(s) {
        gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s)
        if (s == "") return
        if (s ~ /^(typedef|extern|using|template|static_assert|_Static_assert)[^A-Za-z0-9_]/) return
        if (s ~ /^(static )?(struct|union|enum)( [A-Za-z_][A-Za-z0-9_]*)? ?(\{\})?$/) return
        eq = index(s, "="); par = index(s, "(")
        if (par && (!eq || par < eq)) return
        if (s ~ /^(static )?((__device__|__constant__|__host__) )*const /) return
        printf "%s:%d: %s\n", file, line0, s
    }
    {
        k = index($0, ":"); f = substr($0, 1, k - 1); rest = substr($0, k + 1)
        k = index(rest, ":"); ln = substr(rest, 1, k - 1); code = substr(rest, k + 1)
        if (f != file) { file = f; depth = 0; stmt = ""; fold = 0; externc = 0 }
        for (j = 1; j <= length(code); j++) {
            c = substr(code, j, 1)
            if (depth > 0) {
                if (c == "{") depth++
                else if (c == "}" && --depth == 0 && !fold) stmt = ""
                continue
            }
            if (stmt ~ /^[ \t]*$/ && c ~ /[^ \t]/) line0 = ln
            if (c == ";") { classify(stmt); stmt = ""; continue }
            if (c == "}") { if (externc) externc--; continue }
            if (c == "{") {
                if (stmt ~ /^[ \t]*extern[ \t]*""[ \t]*$/) { externc++; stmt = ""; continue }
                eq = index(stmt, "="); par = index(stmt, "(")
                fold = eq > 0 || !par   # an initialiser or a type: the statement goes on
                if (fold) stmt = stmt "{}"
                depth = 1
                continue
            }
            stmt = stmt c
        }
        if (depth == 0) stmt = stmt " "
    }'
}

# defines_lists FILE...: "FILE HEADER NAME" for every name in the `defines:` comment of a
# project include, its continuation lines (comment lines indented under it) included.
defines_lists() {
    awk '
    function take(text,   n, i, parts) {
        n = split(text, parts, /[ \t,]+/)
        for (i = 1; i <= n; i++) if (parts[i] != "") print FILENAME, header, parts[i]
    }
    /^#include "[^"]*"[ \t]*\/\/ defines:/ {
        header = $0; sub(/^#include "/, "", header); sub(/".*/, "", header)
        text = $0; sub(/.*\/\/ defines:/, "", text); take(text); inlist = 1; next
    }
    inlist && /^[ \t]+\/\/[ \t]+[^ \t]/ { text = $0; sub(/^[ \t]*\/\//, "", text); take(text); next }
    { inlist = 0 }' "$@"
}

# functions_defined FILE...: the functions FILE declares or defines at file scope (a line of code
# at column 0 that names a function: prototypes, definitions, static inline ones), and its macros
functions_defined() {
    c_code "$@" | cut -d: -f3- | grep -E '^[A-Za-z_]' | grep -v '^typedef' |
        grep -oE '^[^=;(]*[ *][A-Za-z_][A-Za-z0-9_]*\(' | sed 's/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\)($/\1/'
    grep -h '^#[ \t]*define[ \t]' "$@" | awk '{ sub(/\(.*/, "", $2); print $2 }' | grep -vE '^COMMON_[A-Z_]*_H$'
}

# identifiers FILE...: every identifier in FILE's code (comments, strings and preprocessor lines
# left out), once each
identifiers() {
    c_code "$@" | cut -d: -f3- | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u
}

# declared_by DIR HEADER: every identifier HEADER (relative to DIR) holds, through the project
# headers it includes too: its code, and the names of its macros
declared_by() {
    local headers
    headers=$(cd "$1" && gcc -std=c11 -MM -MG -I. -I"${CUDA_HOME:-/usr/local/cuda}/include" "$2" | tr ' \\' '\n\n' |
        grep '\.h$' | grep -v '^/') || return 1
    headers=$(sed "s|^|$1/|" <<<"$headers")
    { identifiers $headers; grep -h '^#[ \t]*define[ \t]' $headers | awk '{ sub(/\(.*/, "", $2); print $2 }'; } | sort -u
}

# stale_defines DIR LABEL FILE...: what is wrong with the `defines:` lists of the includes of
# common/ in FILE... (one lesson's files, or one tool, called LABEL), a line each: a name its
# header does not declare, a name the files never use, a function or macro of common/ they use
# that no list names. DIR holds common/.
stale_defines() {
    local dir=$1 label=$2 file header name used listed api own
    shift 2
    used=$(identifiers "$@")
    listed=$(defines_lists "$@" | awk '$2 ~ /^common\//')
    local cache=$BATS_TEST_TMPDIR/declared  # what each header declares, read once
    mkdir -p "$cache"
    while read -r file header name; do
        [ -n "$name" ] || continue
        local c=$cache/${header//\//_}
        [ -f "$c" ] || declared_by "$dir" "$header" >"$c"
        grep -qx -- "$name" "$c" || echo "${file#"$dir"/}: $header declares no $name"
        grep -qx -- "$name" <<<"$used" || echo "${file#"$dir"/}: $name is listed for $header, never used"
    done <<<"$listed"
    api=$(functions_defined "$dir"/common/*/*.h | sort -u)
    own=$(functions_defined "$@" | sort -u)  # a lesson's own function of the same name (05's test_delay)
    comm -12 <(echo "$used") <(echo "$api") | comm -23 - <(echo "$own") |
        comm -23 - <(awk '{ print $3 }' <<<"$listed" | sort -u) | sed "s|^|$label: uses common's |; s|$|, named by no defines: list|"
}

# file_uses OBJ...: "A B" for every object A that uses a function or variable that object B
# defines (nm's symbols): which file of common/ stands on which.
file_uses() {
    local o
    for o in "$@"; do nm -g --defined-only "$o" | awk -v f="$(basename "$o")" 'NF == 3 { print $3, f }'; done |
        LC_ALL=C sort -k1,1 >"$BATS_TEST_TMPDIR/defined"
    for o in "$@"; do nm -g --undefined-only "$o" | awk -v f="$(basename "$o")" '{ print $NF, f }'; done |
        LC_ALL=C sort -k1,1 >"$BATS_TEST_TMPDIR/used"
    LC_ALL=C join "$BATS_TEST_TMPDIR/used" "$BATS_TEST_TMPDIR/defined" | awk '$2 != $3 { print $2, $3 }' | sort -u
}

# file_cycles OBJ...: the objects that stand on each other around a cycle (tsort's report of
# each loop, one object a line); nothing when the files form layers.
file_cycles() {
    file_uses "$@" | tsort 2>&1 >/dev/null | sed -n 's/^tsort: \([^-].*\)$/\1/p'
}

@test "course: every solution and every student lesson is built" {
    # the lessons this machine cannot build (NCCL missing): make says so on its first line
    unbuildable=$(make -s -C "$ROOT" nccl-status 2>/dev/null | sed -n 's/.*: \(.*\) not built$/\1/p')
    for dir in "$ROOT"/solutions/[0-9][0-9]_*; do
        name=$(basename "$dir")
        [[ " $unbuildable " == *" $name "* ]] && continue
        [ -x "$BUILT/solutions/$name" ] || fail "$BUILT/solutions/$name is missing: run make"
        [ -x "$BUILT/lessons/$name" ] || fail "$BUILT/lessons/$name is missing: run make"
    done
}

@test "course: lessons/ is exactly what 'make lessons' generates from solutions/" {
    for src in "$ROOT"/solutions/[0-9][0-9]_*/*.cu "$ROOT"/solutions/[0-9][0-9]_*/*.h; do
        [ -f "$src" ] || continue
        rel=${src#"$ROOT"/solutions/}
        "$ROOT/tools/gen-lesson" "$src" >"$BATS_TEST_TMPDIR/gen.cu"
        diff -u "$ROOT/lessons/$rel" "$BATS_TEST_TMPDIR/gen.cu" >"$BATS_TEST_TMPDIR/diff" ||
            fail "lessons/$rel differs from its solution's student version (run make lessons): $(head -20 "$BATS_TEST_TMPDIR/diff")"
    done
    for dst in "$ROOT"/lessons/[0-9][0-9]_*/*.cu "$ROOT"/lessons/[0-9][0-9]_*/*.h; do
        [ -f "$dst" ] || continue
        rel=${dst#"$ROOT"/lessons/}
        [ -f "$ROOT/solutions/$rel" ] || fail "lessons/$rel has no solution"
    done
}

@test "course: every exercise region has a hint (no line of it over 100 columns), and every lesson has at least one" {
    for dir in "$ROOT"/solutions/[0-9][0-9]_*; do
        grep -q "BEGIN SOLUTION(" "$dir"/*.cu || fail "$dir has no exercise"
    done
    for src in "$ROOT"/solutions/[0-9][0-9]_*/*.cu; do
        if grep "BEGIN SOLUTION" "$src" | grep -vqE "BEGIN SOLUTION\([0-9]{2}-[a-z-]+\): .{20,}"; then
            fail "$src: an exercise without an id or a hint: $(grep "BEGIN SOLUTION" "$src" | grep -vE "BEGIN SOLUTION\([0-9]{2}-[a-z-]+\): .{20,}")"
        fi
        # a long hint goes on over the comment lines after its BEGIN line: none wider than 100 columns
        long=$(awk 'length($0) > 100 && /BEGIN SOLUTION\(/ { print FILENAME ":" FNR }' "$src")
        [ -z "$long" ] || fail "a hint line wider than 100 columns (wrap it over the comment lines after it): $long"
    done
}

@test "course: every exercise has a scored check (ex:ID), and every ex: tag names an exercise of its lesson" {
    ids=$(sed -n 's/^[ \t]*\/\/ BEGIN SOLUTION(\([^)]*\)).*/\1/p' "$ROOT"/solutions/[0-9][0-9]_*/*.cu | sort -u)
    tagged=$("$ROOT/tools/grade" --list-tags | cut -f2 | tr ',' '\n' | sed -n 's/^ex://p' | sort -u)
    missing=$(comm -23 <(echo "$ids") <(echo "$tagged"))
    [ -z "$missing" ] || fail "exercises with no check tagged ex:ID: $missing"
    unknown=$(comm -13 <(echo "$ids") <(echo "$tagged"))
    [ -z "$unknown" ] || fail "ex: tags that name no exercise region: $unknown"
    # a check tagged ex:NN-... is in lesson NN's test file
    while IFS=$'\t' read -r name tags; do
        for id in $(tr ',' '\n' <<<"$tags" | sed -n 's/^ex://p'); do
            [ "${id:0:2}" = "${name:0:2}" ] || fail "'$name' is tagged ex:$id, an exercise of another lesson"
        done
    done < <("$ROOT/tools/grade" --list-tags)
}

# untagged_gpu_checks FILE.bats...: "FILE: NAME" for every check that needs a GPU and is not
# tagged gpu: its body calls need_gpu, need_sanitizer, need_overlap, need_nccl_gpu,
# need_separate_gpus or sanitizer_check, or a function of its file that does (two calls deep).
# tools/gpu-check runs the suite's checks tagged gpu, and leaves the others to make test without one.
untagged_gpu_checks() {
    local f
    for f in "$@"; do
        awk -v file="$f" '
        function calls(body, name) { return body ~ ("(^|\n|[{;&|(]) *" name "( |;|}|\n|$)") }
        function needs(body,   k) {
            if (calls(body, "(need_gpu|need_sanitizer|need_overlap|need_nccl_gpu|need_separate_gpus|sanitizer_check)")) return 1
            for (k in gpufn) if (calls(body, k)) return 1
            return 0
        }
        { line = $0; gsub(/\t/, " ", line) }
        line ~ /^ *# *bats +file_tags=/ { ft = line; sub(/.*file_tags=/, "", ft); next }
        line ~ /^ *# *bats +test_tags=/ { pend = line; sub(/.*test_tags=/, "", pend); next }
        line ~ /^[a-z_][a-z0-9_]*\(\) *\{/ { fn = line; sub(/\(.*/, "", fn); inf = 1; fb = ""; next }
        inf && line ~ /^}/ { body[fn] = fb; inf = 0; next }
        inf { fb = fb "\n" line; next }
        line ~ /^@test / {
            n = line; sub(/^@test "/, "", n); sub(/" \{.*$/, "", n); t[++nt] = n; tg[nt] = ft "," pend; pend = ""
            rest = line; sub(/^@test "[^"]*" \{/, "", rest); tb[nt] = rest; intest = (rest !~ /} *$/); next
        }
        intest && line ~ /^}/ { intest = 0; next }
        intest { tb[nt] = tb[nt] "\n" line }
        END {
            for (pass = 0; pass < 2; pass++) for (k in body) if (needs(body[k])) gpufn[k] = 1
            for (i = 1; i <= nt; i++) if (needs(tb[i]) && ("," tg[i] ",") !~ /,gpu,/) print file ": " t[i]
        }' "$f"
    done
}

@test "course: the gpu-tag scan finds a check that needs a GPU untagged, through a helper too, and passes tagged ones" {
    f=$BATS_TEST_TMPDIR/planted.bats
    {
        # (the names through %s: this check's own body calls none of them)
        printf 'heavy() {\n    %s\n}\n' need_nccl_gpu
        printf '# bats test_tags=gpu\n@test "tagged" { %s; }\n' need_gpu
        printf '@test "untagged, direct" {\n    %s\n}\n' need_sanitizer
        printf '@test "untagged, one line" { %s copy-engines; }\n' need_overlap
        printf '@test "untagged, through heavy" {\n    x=1 && heavy\n}\n'
        printf '@test "needs none" { echo %s_not; true; }\n' need_gpu
        printf '# bats test_tags=ranks,gpu\n@test "tagged, through heavy" {\n    heavy\n}\n'
    } >"$f"
    run untagged_gpu_checks "$f"
    assert_success
    assert_equal "$output" "$f: untagged, direct"$'\n'"$f: untagged, one line"$'\n'"$f: untagged, through heavy"
}

@test "course: every check that needs a GPU is tagged gpu (tools/gpu-check runs those, make test without one the rest)" {
    run untagged_gpu_checks "$ROOT"/tests/*.bats
    assert_success
    [ -z "$output" ] || fail "checks that need a GPU and are not tagged gpu: $output"
}

@test "course: the generator turns a region into its hint and stand-in, and rejects broken markers" {
    printf 'a\n  // BEGIN SOLUTION(99-x): do the thing\n  secret();\n  //| stub();\n  // END SOLUTION\nb\n' >"$BATS_TEST_TMPDIR/s.cu"
    run "$ROOT/tools/gen-lesson" "$BATS_TEST_TMPDIR/s.cu"
    assert_success
    assert_line --index 3 "  // TODO(99-x): do the thing"
    assert_line --index 4 "  stub();"
    refute_output --partial "secret"
    printf '// BEGIN SOLUTION(99-x): never ends\n' >"$BATS_TEST_TMPDIR/bad.cu"
    run "$ROOT/tools/gen-lesson" "$BATS_TEST_TMPDIR/bad.cu"
    assert_failure
}

@test "course: the generator wraps a long hint at 120 columns and carries on a hint over its comment lines" {
    hint="wait for the copy of batch i before the step reads it, and for the step of batch i-2 before the slot is refilled: $(printf 'word%d ' $(seq 1 30))end"
    printf '    // BEGIN SOLUTION(99-x): %s\n    // and more of the hint, on a line of its own\n    secret();\n    // a comment of the solution\n    //| stub();\n    // END SOLUTION\n' \
        "$hint" >"$BATS_TEST_TMPDIR/s.cu"
    run "$ROOT/tools/gen-lesson" "$BATS_TEST_TMPDIR/s.cu"
    assert_success
    [ "$(awk 'length($0) > 120' <<<"$output")" = "" ] || fail "lines over 120 columns: $output"
    assert_line --index 2 --partial "    // TODO(99-x): wait for the copy"
    # the hint, read back over its lines, is the solution's, word for word
    read_back=$(sed -n '3,$p' <<<"$output" | sed '/^    \/\/ and more/,$d' | sed 's|^    // TODO(99-x): ||; s|^    // ||' | tr '\n' ' ')
    assert_equal "$read_back" "$hint "
    assert_line "    // and more of the hint, on a line of its own"
    assert_line "    stub();"
    refute_output --partial "secret"
    refute_output --partial "a comment of the solution"
}

@test "course: no line of any lesson (the student's version and the solution) or of common/ is longer than 120 columns" {
    run awk 'length($0) > 120 { print FILENAME ":" FNR ": " length($0) " columns" }' \
        "$ROOT"/lessons/[0-9][0-9]_*/* "$ROOT"/solutions/[0-9][0-9]_*/* "$ROOT"/common/*/*
    assert_success
    assert_output ""
}

# Each exercise's answer by its key call (an ERE on a line of code, comments and strings left
# out): it stands in the solution, and nowhere in the student's lesson, where only the TODO
# says it. A scaffold that types the answer elsewhere (a reference path, a profile) tells it.
EXERCISE_KEY_CALLS='
05-kernel-wait        cudaStreamWaitEvent\(p->compute_stream, p->in_ready
05-copy-out-wait      cudaStreamWaitEvent\(p->copy_stream, p->kernel_done
05-priority           cudaStreamCreateWithPriority\(&high[^;]*priority_greatest
06-copy-sync          cudaStreamSynchronize\(t->copy_stream
06-step-sync          cudaStreamSynchronize\(t->compute_stream
07-copy-event         cudaEventRecord\(sync->copied
07-step-event         cudaEventSynchronize\(sync->stepped
08-device-slot        cudaStreamWaitEvent\(t->copy_stream, sync->stepped
08-interval           HOST_SYNC\(t, ring_wait\(r, r->ready\[upto
09-backward-wait      cudaStreamWaitEvent\(p->backward, p->forwarded
09-host-slot          SLOT_WAIT\(t, cudaEventSynchronize\(p->copied
11-fork               cudaStreamWaitEvent\(g->forward, g->landed
11-join               cudaStreamWaitEvent\(g->origin, g->stepped
11-backward-wait      cudaStreamWaitEvent\(g->backward, g->forwarded
11-capture            cudaGraphInstantiate
11-launch             cudaGraphLaunch\(g->exec\[i
12-device-slot        cudaStreamWaitEvent\(t->copy_stream, dp->stepped
12-ready              cudaEventRecord\(dp->grads_ready
12-allreduce          ncclAllReduce\([^,]*d_grads
12-update-wait        cudaStreamWaitEvent\([^,]*, dp->reduced
13-send-after-forward cudaStreamWaitEvent\(up->stream, slot->forwarded
13-recv-wait          cudaStreamWaitEvent\([^,]*, slot->received
13-slot-return        cudaEventRecord\(slot->freed
14-ring               cudaEventRecord\(r->done\[slot
14-events             cudaEventQuery\(r->done
15-capture            cudaStreamBeginCapture\(compute
15-loss-event         cudaEventRecordWithFlags\(dp->losses.ready
15-replay             cudaGraphLaunch\(g->exec\[i
16-atomic             fsync\(fileno
16-resume             cudaMemcpy\(t->model.d_params
16-snapshot           cudaStreamWaitEvent\(t->compute_stream, s->copied
'

@test "course: no exercise's answer in lessons/: its key call stands in the solution, not in the student's files" {
    ids=$(sed -n 's/^[ \t]*\/\/ BEGIN SOLUTION(\([^)]*\)).*/\1/p' "$ROOT"/solutions/[0-9][0-9]_*/*.cu | sort -u)
    while read -r id call; do
        [ -n "$id" ] || continue
        grep -qx "$id" <<<"$ids" || fail "the table names $id, which is no exercise"
        dir=$(echo "$ROOT"/solutions/"${id:0:2}"_*)
        lesson=$ROOT/lessons/$(basename "$dir")
        c_code "$dir"/*.cu "$dir"/*.h 2>/dev/null | grep -qE "$call" || fail "$id: '$call' is not in its solution"
        found=$(c_code "$lesson"/*.cu "$lesson"/*.h 2>/dev/null | grep -E "$call" | sed "s|^$ROOT/||") || true
        [ -z "$found" ] || fail "$id's answer is in the student's files: $found"
    done <<<"$EXERCISE_KEY_CALLS"
}

@test "course: a lesson stands on an earlier one by linking its library (LIBRARY, STANDS_ON), never a copy of its answers" {
    stands=$(sed -n 's/^STANDS_ON\.\([0-9][0-9]_[a-z_]*\) := \(.*\)$/\1 \2/p' "$ROOT/Makefile")
    [ -n "$stands" ] || fail "no STANDS_ON in the Makefile"
    while read -r lesson earlier_ones; do
        [ -d "$ROOT/solutions/$lesson" ] || fail "STANDS_ON.$lesson: no lesson $lesson"
        for earlier in $earlier_ones; do
            [ "${earlier:0:2}" \< "${lesson:0:2}" ] || fail "STANDS_ON.$lesson names $earlier, which is not an earlier lesson"
            files=$(sed -n "s/^LIBRARY\.$earlier := //p" "$ROOT/Makefile")
            [ -n "$files" ] || fail "STANDS_ON.$lesson names $earlier, which has no LIBRARY.$earlier"
            for f in $files; do
                [ -f "$ROOT/solutions/$earlier/$f" ] || fail "LIBRARY.$earlier names $f, which is not in solutions/$earlier"
                ! c_code "$ROOT/solutions/$earlier/$f" | grep -qE '(^|[^A-Za-z0-9_])main\(' ||
                    fail "LIBRARY.$earlier holds $f, which defines main"
            done
            # the headers a later lesson includes (and a handout carries in lib/) hold no exercise
            ! grep -l 'BEGIN SOLUTION' "$ROOT/solutions/$earlier"/*.h 2>/dev/null ||
                fail "a header of lesson $earlier holds an exercise region"
            while read -r id call; do
                [ "${id:0:2}" = "${earlier:0:2}" ] || continue
                found=$(c_code "$ROOT/solutions/$lesson"/* "$ROOT/lessons/$lesson"/* | grep -E "$call" |
                    sed "s|^$ROOT/||") || true
                [ -z "$found" ] || fail "$id's answer is typed again outside lesson $earlier: $found"
            done <<<"$EXERCISE_KEY_CALLS"
        done
    done <<<"$stands"
}

# foreign_includes ROOT: "FILE: NAME" for each include, in ROOT's solutions/ and lessons/, of another
# lesson's header that is not that lesson's face (the Makefile's FACE.NN), one a line
foreign_includes() {
    local root=$1 f lesson inc other header face
    for f in "$root"/solutions/[0-9][0-9]_*/* "$root"/lessons/[0-9][0-9]_*/*; do
        [ -f "$f" ] || continue
        lesson=$(basename "$(dirname "$f")")
        while read -r inc; do
            other=${inc%%/*} header=${inc#*/}
            [ "$other" != "$lesson" ] || continue
            face=$(sed -n "s/^FACE\.$other := //p" "$root/Makefile")
            [ "$header" = "$face" ] || echo "${f#"$root"/}: $inc (lesson $other's face: ${face:-none})"
        done < <(sed -n 's/^#include "\([0-9][0-9]_[a-z_]*\/[A-Za-z0-9_.]*\)".*/\1/p' "$f")
    done
}

@test "course: a lesson includes no header of another lesson but its library's face (FACE.NN)" {
    run foreign_includes "$ROOT"
    assert_output ""
    # the check can fail: 15 including 12's own header, in a copy
    tree=$BATS_TEST_TMPDIR/tree
    mkdir -p "$tree/solutions/15_graph_data_parallel"
    cp "$ROOT/Makefile" "$tree/"
    printf '#include "12_data_parallel_overlap/data_parallel.h"\n' >"$tree/solutions/15_graph_data_parallel/x.h"
    run foreign_includes "$tree"
    assert_output "solutions/15_graph_data_parallel/x.h: 12_data_parallel_overlap/data_parallel.h (lesson 12_data_parallel_overlap's face: ddp.h)"
}

@test "course: common/ holds no lesson's answer and no lesson's step (its files name no exercise, type no key call)" {
    found=$(grep -rlE 'BEGIN SOLUTION|handout-answer' "$ROOT/common" | sed "s|^$ROOT/||") || true
    [ -z "$found" ] || fail "common/ files that hold an exercise: $found"
    while read -r id call; do
        [ -n "$id" ] || continue
        found=$(c_code "$ROOT"/common/*/* | grep -E "$call" | sed "s|^$ROOT/||") || true
        [ -z "$found" ] || fail "$id's key call is in common/: $found"
    done <<<"$EXERCISE_KEY_CALLS"
}

# long_functions MAX FILE...: "FILE:LINE: NAME (N lines)" for every function whose body, from its
# opening brace at column 0 (the course's style) to its closing one, holds more than MAX lines.
long_functions() {
    awk -v max="$1" '
    FNR == 1 { inbody = 0; prev = "" }
    /^\{/ && !inbody { inbody = 1; start = FNR; name = prev; next }
    /^\}/ && inbody { inbody = 0; n = FNR - start - 1; if (n > max) printf "%s:%d: %s (%d lines)\n", FILENAME, start, name, n; next }
    !inbody && /[^ \t]/ { prev = $0 }' "${@:2}"
}

@test "course: the defines: scan finds a name its header lacks, one never used and one used but not listed" {
    mkdir -p "$BATS_TEST_TMPDIR/c/common/x" "$BATS_TEST_TMPDIR/c/solutions/99_x"
    printf '#include "inner.h"\nint alpha(int x);\nint delta(void);\n#define BETA 1\n' >"$BATS_TEST_TMPDIR/c/common/x/a.h"
    printf 'int gamma_of(int x);\n' >"$BATS_TEST_TMPDIR/c/common/x/inner.h"
    cat >"$BATS_TEST_TMPDIR/c/solutions/99_x/m.cu" <<'EOF2'
#include "common/x/a.h"  // defines: alpha, gamma_of,
                         //          delta, epsilon
static int own(void) { return alpha(BETA) + gamma_of(2); }
EOF2
    run stale_defines "$BATS_TEST_TMPDIR/c" 99_x "$BATS_TEST_TMPDIR/c/solutions/99_x/m.cu"
    assert_success
    assert_equal "$output" "solutions/99_x/m.cu: delta is listed for common/x/a.h, never used
solutions/99_x/m.cu: common/x/a.h declares no epsilon
solutions/99_x/m.cu: epsilon is listed for common/x/a.h, never used
99_x: uses common's BETA, named by no defines: list"
}

@test "course: the defines: lists beside the includes of common/ stay true: declared there, used, and every use named" {
    for dir in "$ROOT"/solutions/[0-9][0-9]_*; do
        files=("$dir"/*.cu)
        for h in "$dir"/*.h; do [ -e "$h" ] && files+=("$h"); done
        stale_defines "$ROOT" "$(basename "$dir")" "${files[@]}"
    done >"$BATS_TEST_TMPDIR/stale"
    for tool in "$ROOT"/tools/*.c; do stale_defines "$ROOT" "tools/$(basename "$tool")" "$tool"; done >>"$BATS_TEST_TMPDIR/stale"
    [ ! -s "$BATS_TEST_TMPDIR/stale" ] || fail "stale defines: lists: $(cat "$BATS_TEST_TMPDIR/stale")"
}

@test "course: the layer scan finds two files that use each other, and passes a file that only uses another" {
    cd "$BATS_TEST_TMPDIR"
    printf 'int b(void);\nint a(void) { return b(); }\n' >a.c
    printf 'int a(void);\nint b(void) { return a() + 1; }\n' >b.c
    printf 'int a(void);\nint c(void) { return a(); }\n' >c.c
    for f in a b c; do gcc -c "$f.c" -o "$f.o"; done
    run file_cycles a.o b.o c.o
    assert_success
    assert_equal "$(sort <<<"$output" | tr '\n' ' ')" "a.o b.o "
    run file_cycles a.o c.o
    assert_output ""
}

# The layers of common/: each folder, and the folders its files may include (its own, and those
# below it). Anything else is an include running up, or sideways between two that stand apart.
COMMON_LAYERS='
base     base
gpu      base gpu
model    base gpu model
trace    base trace
recovery base recovery
dist     base gpu dist
train    base gpu model trace train
'

# layer_problems DIR: "FILE: what is wrong" for every file of DIR/common that is in no folder of
# COMMON_LAYERS, every folder that is in none of its rows, and every include of DIR/common/F/...
# that its folder's row does not allow
layer_problems() {
    local dir=$1 f folder inc target
    for f in "$dir"/common/*; do
        [ -d "$f" ] || { echo "${f#"$dir"/}: a file of common/ in no folder of a layer"; continue; }
        awk -v d="$(basename "$f")" '$1 == d { found = 1 } END { exit !found }' <<<"$COMMON_LAYERS" ||
            echo "${f#"$dir"/}: a folder that COMMON_LAYERS does not name"
    done
    for f in "$dir"/common/*/*; do
        folder=$(basename "$(dirname "$f")")
        while IFS= read -r inc; do
            target=${inc#common/}
            target=${target%%/*}
            awk -v d="$folder" -v t="$target" '$1 == d { for (i = 2; i <= NF; i++) if ($i == t) ok = 1 } END { exit !ok }' \
                <<<"$COMMON_LAYERS" || echo "${f#"$dir"/}: includes $inc ($folder may include $(awk -v d="$folder" \
                '$1 == d { $1 = ""; print substr($0, 2) }' <<<"$COMMON_LAYERS"))"
        done < <(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\(common\/[^"]*\)".*/\1/p' "$f")
    done
}

@test "course: the layer scan finds an include running up, a folder of no layer, a file outside the folders" {
    c=$BATS_TEST_TMPDIR/c
    mkdir -p "$c/common/base" "$c/common/gpu" "$c/common/extra"
    printf '#include "common/base/a.h"\n' >"$c/common/gpu/m.c"       # down: allowed
    printf '#include "common/gpu/m.h"\n' >"$c/common/base/t.c"       # up: not
    touch "$c/common/loose.c" "$c/common/extra/x.c"
    run layer_problems "$c"
    assert_equal "$output" "common/extra: a folder that COMMON_LAYERS does not name
common/loose.c: a file of common/ in no folder of a layer
common/base/t.c: includes common/gpu/m.h (base may include base)"
}

@test "course: common/ in layers: its folders include only the layers below them (COMMON_LAYERS), no cycle among its files" {
    run layer_problems "$ROOT"
    assert_success
    [ -z "$output" ] || fail "common/ out of its layers: $output"
    # and through the objects (what calls what): no two files stand on each other, round a cycle
    objects=()  # the objects of common's present sources (an old build may hold others)
    for src in "$ROOT"/common/*/*.c "$ROOT"/common/*/*.cu; do
        rel=${src#"$ROOT"/common/}
        o=$BUILT/common/${rel%.c}.o
        [[ "$rel" == *.cu ]] && o=$BUILT/common/$rel.o
        [ -e "$o" ] && objects+=("$o")
    done
    [ "${#objects[@]}" -gt 10 ] || fail "too few objects in $BUILT/common: run make"
    run file_cycles "${objects[@]}"
    assert_success
    [ -z "$output" ] || fail "files of common/ that use each other around a cycle: $(tr '\n' ' ' <<<"$output")"
}

@test "course: the function-length scan finds a long function and passes a short one" {
    { printf 'static int short_one(void)\n{\n    return 1;\n}\n\nint long_one(int x)\n{\n'
      for i in $(seq 1 81); do printf '    x += %d;\n' "$i"; done
      printf '    return x;\n}\n'; } >"$BATS_TEST_TMPDIR/f.c"
    run long_functions 80 "$BATS_TEST_TMPDIR/f.c"
    assert_output "$BATS_TEST_TMPDIR/f.c:7: int long_one(int x) (82 lines)"
}

@test "course: one idea per file: no file of common/ or solutions/ over 350 lines, no function over 80 (tools' too)" {
    run awk 'FNR == 1 && NR > 1 && n > 350 { print prev ": " n " lines" } FNR == 1 { n = 0 } { n++; prev = FILENAME }
             END { if (n > 350) print prev ": " n " lines" }' "$ROOT"/common/*/* "$ROOT"/solutions/*/*
    assert_output ""
    run long_functions 80 "$ROOT"/common/*/*.c "$ROOT"/common/*/*.cu "$ROOT"/common/*/*.h "$ROOT"/solutions/*/*.cu \
        "$ROOT"/solutions/*/*.h "$ROOT"/tools/*.c
    assert_output ""
}

@test "course: make lessons keeps a copy of a lesson edited by hand, and only of that one" {
    mkdir -p "$BATS_TEST_TMPDIR/c/tools" "$BATS_TEST_TMPDIR/c/solutions/99_x"
    cp "$ROOT/tools/gen-lesson" "$ROOT/tools/make-lessons" "$BATS_TEST_TMPDIR/c/tools/"
    printf '// BEGIN SOLUTION(99-x): do the thing, at some length\nsecret();\n// END SOLUTION\n' >"$BATS_TEST_TMPDIR/c/solutions/99_x/a.cu"
    cp "$BATS_TEST_TMPDIR/c/solutions/99_x/a.cu" "$BATS_TEST_TMPDIR/c/solutions/99_x/b.cu"
    "$BATS_TEST_TMPDIR/c/tools/make-lessons" >/dev/null
    echo "// the student's work" >>"$BATS_TEST_TMPDIR/c/lessons/99_x/a.cu"
    echo "// changed" >>"$BATS_TEST_TMPDIR/c/solutions/99_x/a.cu"
    echo "// changed" >>"$BATS_TEST_TMPDIR/c/solutions/99_x/b.cu"
    run "$BATS_TEST_TMPDIR/c/tools/make-lessons"
    assert_success
    assert_output --partial "lessons/99_x/a.cu had been edited"
    refute_output --partial "b.cu had been edited"
    [ -f "$BATS_TEST_TMPDIR/c/lessons/99_x/a.cu.orig" ] || fail "no copy of the edited lesson"
    [ ! -f "$BATS_TEST_TMPDIR/c/lessons/99_x/b.cu.orig" ] || fail "a copy of a lesson that was not edited"
}

@test "course: gen-lesson --only ID stubs that exercise alone (the mutants of make dev-check)" {
    printf '// BEGIN SOLUTION(99-a): first\nsolved_a();\n//| stub_a();\n// END SOLUTION\n// BEGIN SOLUTION(99-b): second\nsolved_b();\n// END SOLUTION\n' >"$BATS_TEST_TMPDIR/s.cu"
    run "$ROOT/tools/gen-lesson" --only 99-b "$BATS_TEST_TMPDIR/s.cu"
    assert_success
    assert_line "solved_a();"
    refute_line "stub_a();"
    assert_line "// TODO(99-b): second"
    refute_line "solved_b();"
    run "$ROOT/tools/gen-lesson" --only 99-c "$BATS_TEST_TMPDIR/s.cu"
    assert_failure
    assert_output --partial "no exercise region 99-c"
}

@test "course: every check's name states its claim within 120 characters" {
    run awk 'FNR == 1 { f = FILENAME } /^@test "/ { n = $0; sub(/^@test "/, "", n); sub(/" \{$/, "", n)
        if (length(n) > 120) print f ": " length(n) ": " n }' "$ROOT"/tests/*.bats
    assert_output ""
}

@test "course: every lesson has its note in notes/" {
    for dir in "$ROOT"/solutions/[0-9][0-9]_*; do
        name=$(basename "$dir")
        [ -s "$ROOT/notes/$name.md" ] || fail "notes/$name.md is missing"
    done
}

@test "course: the host-only helpers build as C11 with gcc, warnings as errors" {
    for src in "$ROOT"/common/*/*.c; do
        gcc -std=c11 -Wall -Wextra -Werror -I"$ROOT" -I"${CUDA_HOME:-/usr/local/cuda}/include" \
            -c "$src" -o "$BATS_TEST_TMPDIR/x.o" || fail "$src does not build with gcc -std=c11"
    done
}

# Several ranks share one stderr (tools/launch): a message written in pieces is spliced with
# another rank's (issue 43, on two H200: glibc 2.37 and later write one fprintf to unbuffered
# stderr 128 bytes at a time). common/base/stderr_line.c writes a line in one write.
@test "course: a rank's message is one write: 8 processes' lines through one pipe come back whole, past PIPE_BUF cut" {
    gcc -std=c11 -Wall -Wextra -Werror -I"$ROOT" "$ROOT/tests/stderr-line.c" "$ROOT/common/base/stderr_line.c" \
        -o "$BATS_TEST_TMPDIR/stderr-line" || fail "tests/stderr-line.c does not build"
    run "$BATS_TEST_TMPDIR/stderr-line"
    assert_success
    assert_output "stderr-line: 8 writers, 200 lines each, every line whole"
}

# rank_stderr_writes FILE...: "FILE:LINE: text" for every use of stderr or perror outside comments: the
# ways of writing a message in pieces (stdio), where stderr_line writes it whole
rank_stderr_writes() {
    local f
    for f in "$@"; do
        sed 's#//.*##' "$f" | grep -nwE 'stderr|perror' | sed "s#^#${f#"$ROOT"/}:#"
    done
}

@test "course: the stderr scan finds a message printed in pieces, a FILE set to stderr, perror, and passes stderr_line" {
    d=$BATS_TEST_TMPDIR
    printf 'void f(void)\n{\n    fprintf(stderr, "%%s: ", name);  // a prefix\n}\n' >"$d/a.c"
    printf 'FILE *out = json ? stderr : stdout;\nvoid g(void) { perror("open"); }\n' >"$d/b.c"
    printf 'void h(void) { stderr_line("%%s: %%s", name, why); }  // on stderr\nFILE *o = stderr_by_lines();\n' >"$d/c.c"
    run rank_stderr_writes "$d/a.c" "$d/b.c" "$d/c.c"
    assert_output "$(printf '%s\n' "$d/a.c:3:    fprintf(stderr, \"%s: \", name);  " "$d/b.c:1:FILE *out = json ? stderr : stdout;" \
        "$d/b.c:2:void g(void) { perror(\"open\"); }")"
}

@test "course: what a rank runs writes stderr through stderr_line alone (common/, lessons 08 and 12-16, sm-share)" {
    files=()
    for f in "$ROOT"/common/*/*.[ch] "$ROOT"/common/*/*.cu "$ROOT"/solutions/08_*/* "$ROOT"/solutions/1[2-9]_*/* \
        "$ROOT"/tools/sm-share.cu; do
        [ "$f" = "$ROOT/common/base/stderr_line.c" ] || files+=("$f")  # the one place that writes it
    done
    run rank_stderr_writes "${files[@]}"
    assert_output ""
}

@test "course: the host-only tools (tools/*.c) need no CUDA header, directly or through common/" {
    for src in "$ROOT"/tools/*.c; do
        [ -f "$src" ] || continue
        deps=$(gcc -std=c11 -MM -I"$ROOT" -I"${CUDA_HOME:-/usr/local/cuda}/include" "$src") || fail "$src: gcc -MM failed"
        if grep -qE 'cuda_runtime(_api)?\.h|/cuda\.h|cupti|cublas' <<<"$deps"; then
            fail "$src needs a CUDA header: $(tr ' \\' '\n\n' <<<"$deps" | grep -E 'cuda|cupti|cublas' | head -n 3)"
        fi
    done
}

@test "course: the C files are C style: no classes, templates, namespaces, lambdas, auto, new, casts or std::" {
    run c_code "$ROOT"/common/*/*.c "$ROOT"/common/*/*.cu "$ROOT"/common/*/*.h "$ROOT"/solutions/*/*.cu "$ROOT"/solutions/*/*.h
    assert_success
    printf '%s\n' "$output" >"$BATS_TEST_TMPDIR/code.txt"
    run grep -nE ":[^:]*(^|[^A-Za-z0-9_])(class|template|namespace|typename|nullptr|operator|delete|auto)([^A-Za-z0-9_]|$)|std::|(static|reinterpret|const|dynamic)_cast|[^A-Za-z0-9_]new [A-Za-z_]|\[\]\s*\(|\[&\]|\[=\]" \
        "$BATS_TEST_TMPDIR/code.txt"
    assert_failure
    # and no C++ header (C's headers end in .h)
    run grep -nE '^\s*#\s*include\s*<[a-z_]+>' "$ROOT"/common/*/* "$ROOT"/solutions/*/*
    assert_failure
}

@test "course: the file-scope scan finds mutable state and passes types, functions and consts" {
    cat >"$BATS_TEST_TMPDIR/sample.cu" <<'EOF'
#define MACRO(x) do { static int inside_macro; } while (0)
// static int in_comment;
/* static int
   in_block_comment; */
static const int N = 4;
static const char *const NAMES[] = {"a{", "b};"};
static int counter;
int global_no_static = 3;
static float table[3] = {1, 2, 3};
__device__ int device_flag;
static struct { int a; } grouped = {1};
typedef struct { int x; } point;
struct named { int y; };
enum { A, B };
static void helper(int x);
static __global__ void one_kernel(float *p) { static int not_file_scope; p[0] = 1; }
static int
split_function(int a)
{
    int local = a;
    return local;
}
__global__ void two_kernel(int *p) { *p = '{'; }
extern int elsewhere;
EOF
    run file_scope_state "$BATS_TEST_TMPDIR/sample.cu"
    assert_equal "$(printf '%s\n' "$output" | sed 's/^[^:]*:\([0-9]*\): .*/\1/' | tr '\n' ' ')" "7 8 9 10 11 "
}

@test "course: no solution keeps mutable state at file scope (a lesson's state lives in its structs)" {
    run file_scope_state "$ROOT"/solutions/*/*.cu "$ROOT"/solutions/*/*.h
    assert_success
    [ -z "$output" ] || fail "file-scope variables (pass state through a struct instead): $output"
}

@test "course: the link check finds a broken relative link, and passes good ones, web links and anchors" {
    mkdir -p "$BATS_TEST_TMPDIR/doc/img"
    touch "$BATS_TEST_TMPDIR/doc/img/there.svg" "$BATS_TEST_TMPDIR/doc/other.md"
    cat >"$BATS_TEST_TMPDIR/doc/page.md" <<'EOF'
A [good link](other.md), [with an anchor](other.md#part), an ![image](img/there.svg "title"),
a [web link](https://example.org/x.md), [this page's anchor](#top), a [folder](img/),
and a ![missing picture](img/missing.svg) and a [missing note](notes/none.md#a).
EOF
    run broken_links "$BATS_TEST_TMPDIR/doc/page.md"
    assert_success
    assert_equal "$output" "$BATS_TEST_TMPDIR/doc/page.md: img/missing.svg
$BATS_TEST_TMPDIR/doc/page.md: notes/none.md#a"
}

@test "course: every relative link in README.md, docs/ and notes/ (measurements too) points at a file" {
    run broken_links "$ROOT/README.md" "$ROOT"/docs/*.md "$ROOT"/notes/*.md "$ROOT"/notes/measurements/*.md
    assert_success
    [ -z "$output" ] || fail "broken links: $output"
}

@test "course: the path check finds a path that names no file, by its source for a built program" {
    mkdir -p "$BATS_TEST_TMPDIR/c/common/dist" "$BATS_TEST_TMPDIR/c/tools"
    touch "$BATS_TEST_TMPDIR/c/common/dist/dist_env.c" "$BATS_TEST_TMPDIR/c/tools/flight-report.c"
    printf '%s\n' 'See `common/dist/dist_env.c` and `common/dist.c`, run `build/tools/flight-report DIR`,' \
        'not `tools/flight-report` or `build/tools/nothing`; `lessons/NN_topic/` is a pattern.' >"$BATS_TEST_TMPDIR/c/a.md"
    run cited_paths "$BATS_TEST_TMPDIR/c" "$BATS_TEST_TMPDIR/c/a.md"
    assert_equal "$(cut -d' ' -f2 <<<"$output" | tr '\n' ' ')" "build/tools/nothing common/dist.c tools/flight-report "
}

@test "course: every file README.md, docs/ and the notes name in backticks is there (a built program by its source)" {
    run cited_paths "$ROOT" "$ROOT/README.md" "$ROOT"/docs/*.md "$ROOT"/notes/*.md
    assert_success
    [ -z "$output" ] || fail "paths that name no file: $output"
}

# detect_with TOOLS REF_BIN: what detect_gpu decides with that gpu-probe and that course's 05, in a
# shell of its own: "HAVE_GPU|GPUS|GPU_WHY"
detect_with() {
    (
        set -e  # as in a file's setup_file, where detect_gpu runs: a failed start must not end it
        unset HAVE_GPU GPU_WHY GPUS
        TOOLS=$1 REF_BIN=$2
        detect_gpu
        echo "$HAVE_GPU|$GPUS|$GPU_WHY"
    )
}

@test "course: GPU checks skip only where the course's 05 cannot run: a failed start tried again, a skip saying why" {
    d=$BATS_TEST_TMPDIR
    mkdir -p "$d/tools" "$d/ref"
    printf '#!/bin/sh\necho gpus=1\n' >"$d/tools/gpu-probe"
    # fake05 CODE...: a 05 whose Nth start exits with the Nth code (the last one after), counting its starts
    fake05() {
        printf '#!/bin/sh\nn=$(cat %s/starts 2>/dev/null || echo 0); echo $((n + 1)) >%s/starts\n' "$d" "$d" >"$d/ref/05_stream_overlap"
        printf 'set -- %s\nshift $((n < $# ? n : $# - 1))\n' "$*" >>"$d/ref/05_stream_overlap"
        printf '[ "$1" -ne 3 ] || echo "05_stream_overlap: no usable GPU: none here" >&2\nexit "$1"\n' >>"$d/ref/05_stream_overlap"
        chmod +x "$d/tools/gpu-probe" "$d/ref/05_stream_overlap"
        rm -f "$d/starts"
    }
    fake05 1 0  # one start fails, without a word, on a busy GPU; the next runs
    assert_equal "$(detect_with "$d/tools" "$d/ref")" "1|1|"
    assert_equal "$(cat "$d/starts")" 2
    fake05 1  # every start fails: skipped, saying so
    assert_equal "$(detect_with "$d/tools" "$d/ref")" \
        "0|1|the course's 05_stream_overlap --only 1 exited with code 1, saying nothing (3 starts of the course's 05 failed)"
    assert_equal "$(cat "$d/starts")" 3
    fake05 3  # no usable GPU, as it says: once
    assert_equal "$(detect_with "$d/tools" "$d/ref")" "0|1|05_stream_overlap: no usable GPU: none here"
    assert_equal "$(cat "$d/starts")" 1
}

# a_user_make ARGS...: make as a user types it, not as the test runner's make passes it down
a_user_make() {
    a_user make "$@"
}

@test "course: a_user's nested bats runs through /bin/sh, as make's recipes do, and sees none of this run's variables" {
    d=$BATS_TEST_TMPDIR
    printf '@test "passes" { true; }\n' >"$d/one.bats"
    run a_user sh -c 'bats --tap "$0"' "$d/one.bats"
    assert_success
    assert_output "$(printf '1..1\nok 1 passes')"
    run a_user BATS_FILTER_TAGS=mine sh -c env
    refute_line --regexp '^(BATS_(TEST_NAME|RUN_TMPDIR|LIBEXEC|ROOT)|MAKEFLAGS|MAKELEVEL)='
    assert_line "BATS_TEST_TIMEOUT="
    assert_line "BATS_FILTER_TAGS=mine"
    refute_line --regexp "^PATH=(.*:)?$BATS_LIBEXEC(:|$)"
}

@test "course: make runs as many jobs as the CPUs by default, and a -j given wins" {
    run a_user_make -C "$ROOT" -p -q nccl-status
    assert_line --regexp "^MAKEFLAGS = .*-j$(nproc)( |$)"
    run a_user_make -C "$ROOT" -p -q -j1 nccl-status
    assert_line --regexp "^MAKEFLAGS = .*-j1( |$)"
    refute_line --regexp "^MAKEFLAGS = .*-j$(nproc) "
}

@test "course: a lesson that does not compile stops nothing else: make names it, builds the rest and fails; demo goes on" {
    tree=$BATS_TEST_TMPDIR/course
    mkdir -p "$tree"
    (cd "$ROOT" && cp -a Makefile common solutions lessons tools tests "$tree/")
    cp -a "$BUILT" "$tree/build"
    printf 'this line is not C;\n' >>"$tree/lessons/08_interval_sync/train.cu"
    # what must still be built after the broken lesson: a solution, a tool, another lesson
    rm -f "$tree/build/solutions/07_event_sync" "$tree/build/tools/tracestat" "$tree/build/lessons/06_per_batch_sync"
    run a_user_make -C "$tree" ARCH=90
    assert_failure
    assert_output --regexp "lessons/08_interval_sync/train\.cu\([0-9]+\): error"
    assert_line --partial "make: lessons that do not build: 08_interval_sync ("
    for f in solutions/07_event_sync tools/tracestat lessons/06_per_batch_sync; do
        [ -x "$tree/build/$f" ] || fail "build/$f was not built beside the broken lesson"
    done
    [ ! -e "$tree/build/lessons/08_interval_sync" ] || fail "the broken lesson's old binary is still there"
    run a_user_make -C "$tree" ARCH=90 demo DEMO_ARGS="--only 1 --size-mib 1"
    assert_line --partial "make: lessons that do not build: 08_interval_sync ("
    assert_output --regexp "05_stream_overlap: no usable GPU|all checks passed"
}

@test "course: make test ends with its summary line; when a check failed, make's own error line comes after it" {
    d=$BATS_TEST_TMPDIR
    printf '@test "passes" { true; }\n@test "skips" { skip "no reason"; }\n' >"$d/good.bats"
    printf '@test "passes" { true; }\n@test "fails" { false; }\n' >"$d/bad.bats"
    # its own TAP_OUT: the results folder of the run this check is part of must stay
    run a_user_make -s -C "$ROOT" BUILD="$BUILT" test TESTS="$d/good.bats" TAP_OUT="$d/good.tap"
    assert_success
    assert_equal "${lines[-1]}" "1 passed, 0 failed, 1 skipped"
    run a_user_make -s -C "$ROOT" BUILD="$BUILT" test TESTS="$d/bad.bats" TAP_OUT="$d/bad.tap"
    assert_equal "$status" 2
    assert_equal "${lines[-2]}" "1 passed, 1 failed, 0 skipped"
    [[ "${lines[-1]}" == "make: *** [Makefile:"*": test] Error 1" ]] || fail "the last line: ${lines[-1]}"
}

# small_course DIR: a course of three stand-in lessons (05; 08, with its library; 09, which stands
# on it) under the course's own Makefile and test tools: it builds in seconds
small_course() {
    local d=$1 l k
    mkdir -p "$d/tools" "$d/common/base" "$d/build"  # (build/: no object of common/ makes it)
    cp "$ROOT/Makefile" "$d/"
    cp "$ROOT"/tools/{setup-bats,run-tests,bats-pool,grade} "$d/tools/"
    : >"$d/common/base/stand_in.h"
    for l in 05_stream_overlap 08_interval_sync 09_four_stream_pipeline; do
        for k in solutions lessons; do
            mkdir -p "$d/$k/$l"
            printf '#include <stdio.h>\nint main(void) { printf("%s ran\\n"); return 0; }\n' "$l" >"$d/$k/$l/main.cu"
        done
    done
    printf 'int loss_ring_stand_in(void) { return 1; }\n' >"$d/solutions/08_interval_sync/loss_ring.cu"
    cp "$d/solutions/08_interval_sync/loss_ring.cu" "$d/lessons/08_interval_sync/"
    printf '@test "passes" { true; }\n' >"$d/tiny.bats"
}

# no_bats_path BIN: BIN, a folder of links to every command of PATH but bats and jq, with a
# stand-in apt-get (and sudo) whose install takes 3 s, then links the real bats and jq into BIN
no_bats_path() {
    local bin=$1 dir f real_bats real_jq
    real_bats=$(command -v bats) real_jq=$(command -v jq)
    mkdir -p "$bin"
    local IFS=:
    for dir in $PATH; do
        for f in "$dir"/*; do
            [ -x "$f" ] && [ ! -d "$f" ] || continue
            case ${f##*/} in bats | jq | apt-get | sudo) continue ;; esac
            [ -e "$bin/${f##*/}" ] || ln -s "$f" "$bin/${f##*/}"
        done
    done
    printf '#!/bin/sh\n[ "$1" = install ] || exit 0\nsleep 3\nln -s %s %s/bats && ln -s %s %s/jq\n' \
        "$real_bats" "$bin" "$real_jq" "$bin" >"$bin/apt-get"
    printf '#!/bin/sh\nexec "$@"\n' >"$bin/sudo"
    chmod +x "$bin/apt-get" "$bin/sudo"
}

@test "course: make setup test on a machine without Bats or jq installs them before any test starts, whatever -j" {
    d=$BATS_TEST_TMPDIR/course
    small_course "$d"
    run a_user_make -C "$d"  # built: nothing but setup keeps the tests from starting at once
    assert_success
    no_bats_path "$BATS_TEST_TMPDIR/bin"
    cd "$d"  # (make -C would add its own last line, "Leaving directory")
    for j in "" -j1 -j8; do
        rm -f "$BATS_TEST_TMPDIR/bin/bats" "$BATS_TEST_TMPDIR/bin/jq"
        run env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS -u BATS_FILTER_TAGS PATH="$BATS_TEST_TMPDIR/bin" \
            make $j setup test TESTS=tiny.bats
        assert_success
        assert_line "setup: installing bats jq with apt-get"
        refute_output --partial "not installed"
        assert_equal "${lines[-1]}" "1 passed, 0 failed, 0 skipped"
    done
}

@test "course: make test's last line is its summary where make built a library's objects; make demo built says no lesson's name" {
    d=$BATS_TEST_TMPDIR/course
    small_course "$d"
    cd "$d"  # (make -C would add its own last line, "Leaving directory")
    # the first build: lesson 08's library, from its object
    run env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS -u BATS_FILTER_TAGS make test TESTS=tiny.bats
    assert_success
    assert_equal "${lines[-1]}" "1 passed, 0 failed, 0 skipped"
    [ -f build/lib/08_interval_sync/loss_ring.o ] || fail "the library's object was removed"
    run env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make demo
    assert_success
    refute_output --partial "up to date"
    assert_equal "${lines[-2]}" "build/solutions/05_stream_overlap "
    assert_equal "${lines[-1]}" "05_stream_overlap ran"
}

@test "course: make's first line has no run of blanks, whether lessons need NCCL or none does, NCCL found or not" {
    small_course "$BATS_TEST_TMPDIR/course"  # no lesson of it needs NCCL
    for tree in "$ROOT" "$BATS_TEST_TMPDIR/course"; do
        for home in "" "$BATS_TEST_TMPDIR/no-nccl"; do
            run a_user_make -s -C "$tree" arch NCCL_HOME="$home"
            assert_success
            [[ "$output" != *"  "* ]] || fail "a run of blanks in: $output"
            [[ "$output" =~ (_[a-z]+ (not )?built|: no lesson here needs it)$ ]] || fail "it ends: $output"
        done
    done
}

@test "course: make format-check says it skipped where clang-format is missing, and .clang-format parses where it is installed" {
    run make -s -C "$ROOT" format-check CLANG_FORMAT=no-such-clang-format
    assert_success
    assert_output "format-check: skipped: clang-format not found"
    command -v clang-format >/dev/null || return 0
    (cd "$ROOT" && clang-format --style=file --dump-config >/dev/null) || fail ".clang-format does not parse"
}
