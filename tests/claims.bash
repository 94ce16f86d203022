# claims.bash: the claims table (tests/claims.tsv) and its mutants, for tools/dev-check's claims
# parts (on a GPU) and tests/claims.bats (without one). A mutant is a tree of links to the
# course, with the one file it breaks copied and changed: its build and its checks use that
# tree's Makefile, sources, tools and tests, and leave the course alone.
#
#   claims_rows COURSE [LESSON] [ID...]    the table's rows (tab-separated), of a lesson, or named
#   claim_tree COURSE TREE FILE BREAK      the mutant's tree; 1 and why on stderr when BREAK
#                                          no longer changes FILE (the table has rotted)
#   claim_compile TREE FILE OUT            FILE of the tree compiled alone as the course compiles
#                                          it (ARCH, default 90: one architecture); a script: bash -n
#   claim_build BUILD TREE LESSON          the lesson's program and the host tools, in TREE/build,
#                                          from copies of BUILD's objects (only what changed is rebuilt)
#   claim_checks TREE BUILD TAG TESTS OUT  runs the checks of TREE/tests/TESTS.bats tagged TAG
#                                          against the mutant's build, TAP into OUT

claims_rows() {
    local course=$1 lesson=${2:-}
    shift 2 2>/dev/null || shift $#
    awk -F'\t' -v lesson="$lesson" -v ids="$*" '
        BEGIN { k = split(ids, a, " "); for (i = 1; i <= k; i++) want[a[i]] = 1 }
        /^#/ || NF == 0 { next }
        (lesson == "" || $1 == lesson) && (k == 0 || ($2 in want)) { print }' "$course/tests/claims.tsv"
}

# mirror SRC DST KEEP: DST a folder of links to every entry of SRC but KEEP (made by the caller)
mirror() {
    local e
    mkdir -p "$2"
    for e in "$1"/* "$1"/.[!.]*; do
        [ -e "$e" ] || [ -L "$e" ] || continue
        [ "$(basename "$e")" = "$3" ] && continue
        ln -s "$e" "$2/$(basename "$e")"
    done
}

# apply_break COURSE FILE BREAK OUT: FILE broken as BREAK says into OUT; 1 and why when it is not
apply_break() {
    local course=$1 file=$2 brk=$3 out=$4 expr id rest
    if [[ "$brk" == exercise:* ]]; then
        id=${brk#exercise:}
        grep -q "BEGIN SOLUTION($id)" "$course/$file" || { echo "$file holds no region $id" >&2; return 1; }
        "$course/tools/gen-lesson" --only "$id" "$course/$file" >"$out" || return 1
        return 0
    fi
    cp "$course/$file" "$out"
    rest=$brk
    while [ -n "$rest" ]; do
        expr=${rest%% ;; *}
        [ "$expr" = "$rest" ] && rest="" || rest=${rest#* ;; }
        # each expression alone must change today's file: one that matches nothing has rotted
        if sed -e "$expr" "$course/$file" | cmp -s - "$course/$file"; then
            echo "$file: '$expr' changes nothing: the code it breaks has changed (update tests/claims.tsv)" >&2
            return 1
        fi
        sed -i -e "$expr" "$out" || return 1
    done
}

claim_tree() {
    local course=$1 tree=$2 file=$3 brk=$4 dir sub top
    rm -rf "$tree"
    mkdir -p "$tree"
    dir=$(dirname "$file")
    top=${dir%%/*}
    for sub in "$course"/*; do  # the course's top folders and files: links, but the one holding FILE
        [ "$(basename "$sub")" = "$top" ] && continue
        [ "$(basename "$sub")" = build ] && continue
        ln -s "$sub" "$tree/$(basename "$sub")"
    done
    ln -s "$course/.clang-format" "$tree/.clang-format" 2>/dev/null
    if [ "$dir" = "$top" ]; then
        mirror "$course/$top" "$tree/$top" "$(basename "$file")"
    else  # two levels: solutions/NN_topic/FILE
        mirror "$course/$top" "$tree/$top" "${dir#*/}"
        mirror "$course/$dir" "$tree/$dir" "$(basename "$file")"
    fi
    # the tests' folder of links too: a check finds its course (ROOT) through its own folder
    if [ "$top" != tests ]; then
        rm "$tree/tests"
        mirror "$course/tests" "$tree/tests" ""
    fi
    apply_break "$course" "$file" "$brk" "$tree/$file"
}

claim_compile() {
    local tree=$1 file=$2 out=$3
    case $file in
    *.c | *.cu) make -s --no-print-directory -C "$tree" ARCH="${ARCH:-90}" compile-one SRC="$file" OUT="$out" ;;
    *) bash -n "$tree/$file" ;;
    esac
}

claim_build() {
    local build=$1 tree=$2 lesson=$3 l targets=() t
    l=$(cd "$tree/solutions" && echo "$lesson"_*)
    mkdir -p "$tree/build/solutions"
    cp -a "$build/common" "$build/libcourse.a" "$build/libcourse-host.a" "$build/tools" "$tree/build/"
    [ -d "$build/lib" ] && cp -a "$build/lib" "$tree/build/"  # the lessons' libraries (STANDS_ON)
    [ -x "$build/solutions/$l" ] && cp -a "$build/solutions/$l" "$tree/build/solutions/"
    for t in "$tree"/tools/*.c; do targets+=("build/tools/$(basename "$t" .c)"); done
    make -s --no-print-directory -C "$tree" BUILD=build ${ARCH:+"ARCH=$ARCH"} "build/solutions/$l" "${targets[@]}"
}

claim_checks() {
    local tree=$1 build=$2 tag=$3 tests=$4 out=$5
    COURSE_BIN=$tree/build/solutions COURSE_REF_BIN=$build/solutions COURSE_TOOLS=$tree/build/tools \
        bats --tap --filter-tags "$tag" "$tree/tests/$tests.bats" >"$out" 2>&1 </dev/null
}
