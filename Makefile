# The course's build. `make` builds every solution and every student lesson into build/.
#
#   make                 build everything (solutions, lessons, tools), in parallel
#   make demo            build, then run lesson 05's solution (the main demo)
#   make setup test      install Bats if it is missing, then run the whole test suite
#   make lessons         regenerate lessons/ from solutions/ (keeps a .orig of any edited file)
#   make handout LESSONS=05-08   a student's copy of those lessons, without their answers
#   make bench           the benchmark table (needs a GPU)
#   make format-check    does the C follow .clang-format? (changes nothing)
#   make ARCH="80 90"    build for these compute capabilities instead of the detected one
#
# Student and instructor targets (check, next, grade) are described in docs/students.md and
# docs/instructors.md. The same
# Makefile serves a handout (tools/make-handout), a tree without solutions/: there it
# builds the student's lessons and the tools, and the checks compare with the prebuilt
# reference programs in reference/.
#
# Jobs: as many as the CPUs (-j1 or any -j on the command line wins). A student's lesson
# that does not compile stops nothing else: the solutions, the tools and every other
# lesson are built, make names the lesson, and `make` fails at the end (demo and test go on).
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null))
ifeq ($(CUDA_HOME),)
CUDA_HOME := /usr/local/cuda
endif
NVCC := $(CUDA_HOME)/bin/nvcc
CC ?= gcc
BUILD := build
comma := ,
space := $(subst ,, )
# A tool a target runs (the tests, the grader, dev-check, make-handout) builds with make of its own,
# as a user typing it would: not as a sub-make of this one (whose job server it cannot use: GNU make
# warns "jobserver unavailable", and a -j of the tool's own would reset it).
AS_A_USER := env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS

# GPU targets: ARCH= wins; else the GPU present; else (no GPU: the build is a check that it
# compiles, and the tests that need no GPU) ARCH=ptx, PTX of compute capability 7.5 alone, which
# any GPU from Turing on compiles at a program's first run: a third of the time of machine code for
# several architectures. FIXED_ARCH, machine code from Turing (T4) through Ampere, Ada (L4, L20,
# RTX 40), Hopper (H100, H200), Blackwell (B200) and RTX 50, plus PTX of the newest so that later
# GPUs can JIT it, is what a handout's prebuilt programs carry (tools/make-handout).
FIXED_ARCH := 75 80 86 89 90 100 120
ifeq ($(origin ARCH),undefined)
DETECTED_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
ifneq ($(DETECTED_ARCH),)
ARCH := $(DETECTED_ARCH)
ARCH_WHY := the GPU present
else
ARCH := ptx
ARCH_WHY := no GPU found: PTX of 7.5 alone, which a GPU compiles at a program's first run
endif
else
ARCH_WHY := set by ARCH=
endif
ifeq ($(ARCH),ptx)
GENCODE := -gencode arch=compute_75,code=compute_75
else
GENCODE := $(foreach a,$(ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
           -gencode arch=compute_$(lastword $(ARCH)),code=compute_$(lastword $(ARCH))
endif

CUDA_INC := -I$(CUDA_HOME)/include $(addprefix -I,$(wildcard $(CUDA_HOME)/extras/CUPTI/include))
CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib $(CUDA_HOME)/extras/CUPTI/lib64)
# -Wno-missing-field-initializers: a designated initialiser leaves the other fields
# zero, as C says; g++ (under nvcc) would warn about every one of them.
NVCCFLAGS := -O2 -std=c++17 -lineinfo -I. $(CUDA_INC) -Werror all-warnings \
             -Xcompiler -Wall,-Wextra,-Wno-missing-field-initializers,-Werror $(GENCODE)
CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -I. $(CUDA_INC)
LDLIBS := $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Xlinker -rpath=,$(CUDA_LIBDIRS)) \
          -lcublas -lcupti -lpthread -ldl -lm

# SAN=address (or thread, or a list: address,undefined) builds everything with those
# sanitizers, for the host side; use a build folder of its own: make SAN=address BUILD=build/asan.
# nvcc splits an -Xcompiler value at its commas: one -fsanitize= each for the host compiler.
ifdef SAN
SAN_FLAGS := $(addprefix -fsanitize=,$(subst $(comma), ,$(SAN)))
CFLAGS += $(SAN_FLAGS) -fno-omit-frame-pointer
NVCCFLAGS += $(addprefix -Xcompiler ,$(SAN_FLAGS) -fno-omit-frame-pointer)
LDLIBS += $(addprefix -Xcompiler ,$(SAN_FLAGS))
endif

# The lessons: every folder of solutions/, or in a handout (no solutions/) of lessons/. Not
# named LESSONS: `make handout LESSONS=05-08` sets that one.
HANDOUT_TREE := $(if $(wildcard solutions/[0-9][0-9]_*),,1)
LESSON_DIRS := $(notdir $(wildcard $(if $(HANDOUT_TREE),lessons,solutions)/[0-9][0-9]_*))

# Lesson libraries: one way for a lesson to stand on an earlier one. A lesson's answers and its own
# step live in its folder only; a later lesson links the earlier lesson's library, the files of its
# solution that LIBRARY.NN names (its step, its options, its setup, never its main), built from
# solutions/ (never from a student's lessons/: a grade never depends on another lesson of theirs)
# into BUILD/lib/NN.a. Their headers are included as "NN_topic/file.h" (-I solutions). A handout
# (tools/make-handout) carries the library of every lesson its lessons stand on prebuilt, without
# call text, lib/NN_topic.a, and its headers in lib/NN_topic/ (-I lib). STANDS_ON.NN: the lessons
# whose libraries lesson NN links, the later first (the order the linker needs).
LIBRARY.08_interval_sync := loss_ring.cu
# FACE.NN: the one header of lesson NN's library that a later lesson includes (tests/00_course.bats:
# no lesson includes another lesson's other headers)
FACE.08_interval_sync := loss_ring.h
FACE.12_data_parallel_overlap := ddp.h
LIBRARY.12_data_parallel_overlap := ddp.cu ddp_plan.cu buckets.cu options.cu train.cu checks.cu
STANDS_ON.09_four_stream_pipeline := 08_interval_sync
STANDS_ON.10_async_loader_pipeline := 08_interval_sync
STANDS_ON.11_cuda_graph_step := 08_interval_sync
STANDS_ON.12_data_parallel_overlap := 08_interval_sync
STANDS_ON.14_fault_tolerance := 12_data_parallel_overlap 08_interval_sync
STANDS_ON.15_graph_data_parallel := 12_data_parallel_overlap 08_interval_sync
STANDS_ON.16_checkpoint_restart := 12_data_parallel_overlap 08_interval_sync
LIB_HOME := $(if $(HANDOUT_TREE),lib,solutions)
lib_archive = $(if $(HANDOUT_TREE),lib/$(1).a,$(BUILD)/lib/$(1).a)
lib_archives = $(foreach l,$(STANDS_ON.$(1)),$(call lib_archive,$(l)))
# the libraries some lesson of this tree links
LIBRARIES := $(sort $(foreach l,$(LESSON_DIRS),$(STANDS_ON.$(l))))
LESSON_INC := -I$(LIB_HOME)

# The bootstrap of several ranks needs NCCL: built below
DIST_C := $(wildcard common/dist/dist_*.c)
COMMON_C := $(filter-out $(DIST_C),$(wildcard common/*/*.c))
COMMON_CU := $(wildcard common/*/*.cu)
HOST_OBJ := $(patsubst common/%.c,$(BUILD)/common/%.o,$(COMMON_C))
COMMON_OBJ := $(HOST_OBJ) $(patsubst common/%.cu,$(BUILD)/common/%.cu.o,$(COMMON_CU))
COMMON_LIB := $(BUILD)/libcourse.a
HOST_LIB := $(BUILD)/libcourse-host.a  # common/'s host-only C, all the tools link: no nvcc needed for them
SOLUTION_BINS := $(if $(HANDOUT_TREE),,$(addprefix $(BUILD)/solutions/,$(LESSON_DIRS)))
LESSON_BINS := $(addprefix $(BUILD)/lessons/,$(LESSON_DIRS))
TOOLS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(wildcard tools/*.c))
NCCL_TOOLS := $(patsubst tools/%.cu,$(BUILD)/tools/%,$(wildcard tools/*.cu))

# NCCL, for the lessons that train on several GPUs (12 to 16): nccl.h and libnccl under
# NCCL_HOME when it is set (e.g. the nvidia-nccl-cu13 wheel's nvidia/nccl folder), else
# in the CUDA toolkit, else in the system's folders (NVIDIA's libnccl2 and libnccl-dev
# packages). Where it is missing those lessons are not built, `make` says so on its
# first line, and their tests skip with the reason `make -s nccl-status` prints.
# A lesson needs NCCL when its code, or the library of a lesson it stands on, includes the
# bootstrap of several ranks (common/dist/dist.h) or nccl.h.
NCCL_LESSONS := $(strip $(foreach l,$(LESSON_DIRS),$(if $(shell grep -lsE '"common/dist/dist\.h"|<nccl\.h>' \
                  $(if $(HANDOUT_TREE),lessons,solutions)/$(l)/* $(foreach e,$(STANDS_ON.$(l)),$(LIB_HOME)/$(e)/*.h)),$(l))))
NCCL_INC_DIRS := $(if $(NCCL_HOME),$(NCCL_HOME)/include,$(CUDA_HOME)/include /usr/include)
NCCL_LIB_DIRS := $(if $(NCCL_HOME),$(NCCL_HOME)/lib $(NCCL_HOME)/lib64,$(CUDA_HOME)/lib64 $(CUDA_HOME)/lib \
                   /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib)
NCCL_H := $(firstword $(wildcard $(addsuffix /nccl.h,$(NCCL_INC_DIRS))))
# the wheel ships libnccl.so.2 alone, without the libnccl.so link that -lnccl needs
NCCL_SO := $(firstword $(wildcard $(addsuffix /libnccl.so,$(NCCL_LIB_DIRS)) $(addsuffix /libnccl.so.2,$(NCCL_LIB_DIRS))))
ifneq ($(and $(NCCL_H),$(NCCL_SO)),)
NCCL_VERSION := $(shell awk '/^\#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $$3} END {print v}' $(NCCL_H))
NCCL_LIB_DIR := $(patsubst %/,%,$(dir $(NCCL_SO)))
NCCL_CFLAGS := $(addprefix -I,$(filter-out /usr/include $(CUDA_HOME)/include,$(patsubst %/,%,$(dir $(NCCL_H)))))
# the library by its path: a -L of a system folder would lead nvcc's device linker to
# the static libraries there (seen: "nvlink fatal: elfLink internal error" on libpthread.a)
NCCL_LDLIBS := $(NCCL_SO) $(if $(filter /usr/lib%,$(NCCL_LIB_DIR)),,-Xlinker -rpath=$(NCCL_LIB_DIR))
NCCL_STATUS := NCCL $(NCCL_VERSION) ($(NCCL_SO)): $(if $(NCCL_LESSONS),$(NCCL_LESSONS) built,no lesson here needs it)
else
NCCL_MISSING := $(NCCL_LESSONS)
NCCL_STATUS := NCCL not found ($(if $(NCCL_H),no libnccl.so,no nccl.h) in $(if $(NCCL_HOME),NCCL_HOME=$(NCCL_HOME),$(CUDA_HOME) or /usr); \
               set NCCL_HOME): $(if $(NCCL_LESSONS),$(NCCL_LESSONS) not built,no lesson here needs it)
SOLUTION_BINS := $(filter-out $(addprefix $(BUILD)/solutions/,$(NCCL_MISSING)),$(SOLUTION_BINS))
NCCL_TOOLS :=
LESSON_BINS := $(filter-out $(addprefix $(BUILD)/lessons/,$(NCCL_MISSING)),$(LESSON_BINS))
endif
DIST_OBJ := $(patsubst common/%.c,$(BUILD)/common/%.o,$(DIST_C))

.PHONY: all build-all solutions lesson-deps lesson-bins tools lessons demo test setup bench timelines check next grade dev-check \
        clean arch format-check handout grade-class
.DEFAULT_GOAL := all

# `all` fails, naming them, when lessons do not build; demo and test go on without them.
all: build-all
	@$(call report_broken_lessons,exit 1)
build-all: arch solutions lesson-bins tools
solutions: $(SOLUTION_BINS)
tools: $(TOOLS) $(NCCL_TOOLS)

# The lessons, each on its own and with -k: one that does not compile (a student's) is named
# and stops neither the other lessons nor the rest. After what they all link (lesson-deps, which
# tools/grade builds before its makes of one lesson each): a make of its own must find it built,
# not build it a second time beside the first.
lesson-deps: $(COMMON_LIB) $(if $(NCCL_MISSING),,$(DIST_OBJ)) $(foreach l,$(LIBRARIES),$(if $(filter $(l),$(NCCL_MISSING)),,$(call lib_archive,$(l))))
lesson-bins: lesson-deps
	@[ -z "$(LESSON_BINS)" ] || $(MAKE) --no-print-directory -k lesson-bins-each || true
# the lessons as one goal of that make, whose recipe says nothing: given as goals, each lesson already
# built would be a line of its own ("make[1]: 'build/lessons/05_stream_overlap' is up to date.")
.PHONY: lesson-bins-each
lesson-bins-each: $(LESSON_BINS)
	@:

# report_broken_lessons,THEN: names the lessons that are not built (a lesson's binary is removed
# before it is built: one whose build failed has none), then runs THEN
define report_broken_lessons
broken=$$(for b in $(LESSON_BINS); do [ -x "$$b" ] || printf ' %s' "$${b##*/}"; done); \
if [ -n "$$broken" ]; then \
    echo "make: lessons that do not build:$$broken (the compiler's errors above; the solutions, the tools and the other lessons are built)" >&2; \
    $(1); \
fi
endef

arch:
	@echo "make: building for $(if $(filter ptx,$(ARCH)),PTX,compute capability $(ARCH)) ($(ARCH_WHY)); $(NCCL_STATUS)"

.PHONY: nccl-status lesson-info
nccl-status:
	@echo "$(NCCL_STATUS)"

# One line per lesson, for tools (make-handout): "NN_topic nccl=0|1 stands_on=A,B" (the libraries
# it links, the later first).
lesson-info:
	@$(foreach l,$(LESSON_DIRS),echo "$(l) nccl=$(if $(filter $(l),$(NCCL_LESSONS)),1,0) stands_on=$(subst $(space),$(comma),$(strip $(STANDS_ON.$(l))))";)

$(BUILD)/common/%.o: common/%.c common/*/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/%.cu.o: common/%.cu common/*/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(HOST_LIB): $(HOST_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The solutions' own code, and so the lessons' libraries, is compiled without the text of the
# calls its checks print (check.h's CALL_TEXT): a handout ships them prebuilt (tools/make-handout),
# and the text of an exercise's call is its answer. A failed check there names its file and line.
SOLUTION_FLAGS := -DCOURSE_NO_CALL_TEXT

# One binary per lesson folder, from its .cu files, in solutions/ and in lessons/, linking the
# libraries of the lessons it stands on.
.SECONDEXPANSION:
$(BUILD)/solutions/%: $$(wildcard solutions/$$*/*.cu solutions/$$*/*.h) $$(call lib_archives,$$*) $(COMMON_LIB) \
        common/*/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(SOLUTION_FLAGS) $(LESSON_INC) $(filter %.cu,$^) $(call lib_archives,$*) $(COMMON_LIB) \
	    $(LDLIBS) -o $@

# A student version leaves state unused until its exercises are written: no error for that.
LESSON_FLAGS := -diag-suppress 177,550 -Xcompiler -Wno-unused-variable,-Wno-unused-but-set-variable
# (its old binary removed first: no binary of an earlier good build may pass for a lesson that
# no longer compiles)
$(BUILD)/lessons/%: $$(wildcard lessons/$$*/*.cu lessons/$$*/*.h) $$(call lib_archives,$$*) $(COMMON_LIB) common/*/*.h
	@mkdir -p $(@D) && rm -f $@
	$(NVCC) $(NVCCFLAGS) $(LESSON_FLAGS) $(LESSON_INC) $(filter %.cu,$^) $(call lib_archives,$*) $(COMMON_LIB) \
	    $(LDLIBS) -o $@

# A library: its files of the solution, each compiled on its own (with NCCL's flags: 12's needs them)
ifeq ($(HANDOUT_TREE),)
lib_objects = $(addprefix $(BUILD)/lib/$(1)/,$(LIBRARY.$(1):.cu=.o))
$(BUILD)/lib/%.a: $$(call lib_objects,$$*)
	@rm -f $@
	ar rcs $@ $^
# The objects are kept: as intermediate files make would remove them once everything else is done
# (printing `rm ...` after the tests' summary), and build them all again when one source changes.
.SECONDARY: $(foreach l,$(LIBRARIES),$(call lib_objects,$(l)))
$(BUILD)/lib/%.o: solutions/%.cu $$(wildcard solutions/$$(*D)/*.h $$(addprefix solutions/,$$(addsuffix /*.h,$$(STANDS_ON.$$(*D))))) \
        common/*/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(SOLUTION_FLAGS) $(LESSON_INC) $(NCCL_CFLAGS) -c $< -o $@
endif

# The NCCL lessons also link common/dist/dist_*.c (the bootstrap: ranks, rendezvous, communicator) and
# NCCL.
ifeq ($(NCCL_MISSING),)
$(DIST_OBJ): $(BUILD)/common/%.o: common/%.c common/*/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(NCCL_CFLAGS) -c $< -o $@

$(addprefix $(BUILD)/solutions/,$(NCCL_LESSONS)): $(BUILD)/solutions/%: $$(wildcard solutions/$$*/*.cu solutions/$$*/*.h) \
        $$(call lib_archives,$$*) $(DIST_OBJ) $(COMMON_LIB) common/*/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(SOLUTION_FLAGS) $(LESSON_INC) $(NCCL_CFLAGS) $(filter %.cu,$^) $(call lib_archives,$*) \
	    $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) $(NCCL_LDLIBS) -o $@

$(addprefix $(BUILD)/lessons/,$(NCCL_LESSONS)): $(BUILD)/lessons/%: $$(wildcard lessons/$$*/*.cu lessons/$$*/*.h) \
        $$(call lib_archives,$$*) $(DIST_OBJ) $(COMMON_LIB) common/*/*.h
	@mkdir -p $(@D) && rm -f $@
	$(NVCC) $(NVCCFLAGS) $(LESSON_FLAGS) $(LESSON_INC) $(NCCL_CFLAGS) $(filter %.cu,$^) $(call lib_archives,$*) \
	    $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) $(NCCL_LDLIBS) -o $@
# The tools that run ranks of their own (tools/*.cu: sm-share) build like the NCCL lessons.
$(BUILD)/tools/%: tools/%.cu $(DIST_OBJ) $(COMMON_LIB) common/*/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(NCCL_CFLAGS) $< $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) $(NCCL_LDLIBS) -o $@
else
$(addprefix $(BUILD)/solutions/,$(NCCL_MISSING)) $(addprefix $(BUILD)/lessons/,$(NCCL_MISSING)):
	@echo "make: $(@F) needs NCCL: $(NCCL_STATUS)" >&2; exit 1
endif

# Host-only tools (trace analysis, JSON check, grading): plain C11, no GPU needed.
$(BUILD)/tools/%: tools/%.c $(HOST_LIB) common/*/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< $(HOST_LIB) $(TOOL_LIBS) -lm $(SAN_FLAGS) -o $@

# gpu-probe asks the CUDA runtime (cudaGetDeviceCount): the one tool that links it
$(BUILD)/tools/gpu-probe: TOOL_LIBS = $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath=,$(CUDA_LIBDIRS)) -lcudart -ldl

# What needs the solutions: a handout has none (its lessons are the student's own).
ifneq ($(HANDOUT_TREE),)
lessons handout bench timelines grade-class dev-check gpu-check:
	@echo "make $@: not in a student's copy of the course (it needs solutions/); the instructor's course has it" >&2; exit 2
# the prebuilt reference programs were linked where the instructor's libraries are: here, these
export LD_LIBRARY_PATH := $(subst $(space),:,$(strip $(CUDA_LIBDIRS) $(NCCL_LIB_DIR)))$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
else
# lessons/ is generated from solutions/: each BEGIN/END SOLUTION region becomes a TODO.
lessons:
	@tools/make-lessons

# A student's copy of lessons LESSONS (05-08, "05 06", default all): the folder and a .tar.gz in
# build/handout/ (HANDOUT_OUT=DIR elsewhere), its reference programs built for FIXED_ARCH.
handout:
	@$(AS_A_USER) tools/make-handout $(if $(LESSONS),--lessons "$(LESSONS)") $(if $(HANDOUT_OUT),--out $(HANDOUT_OUT))

bench: all
	@$(AS_A_USER) tools/bench

timelines: all
	@$(AS_A_USER) tools/timelines

# CLASS=DIR: one folder per student; TIME_LIMIT: per student (default 15m); GRADE_LESSONS="05 06"
.PHONY: grade-class
grade-class:
	@test -n "$(CLASS)" || { echo "make grade-class: say which folder holds the students' copies, e.g. make grade-class CLASS=~/class" >&2; exit 2; }
	@$(AS_A_USER) tools/grade-class --build $(BUILD) $(if $(TIME_LIMIT),--time-limit $(TIME_LIMIT)) $(if $(GRADE_LESSONS),--lessons "$(GRADE_LESSONS)") $(CLASS)

# Needs a GPU. PARTS="solutions unsolved mutants" (the default) or a subset; LESSON=NN; LANES=1:
# every lesson side by side, one GPU each (tools/dev-check --lanes).
dev-check:
	@$(AS_A_USER) tools/dev-check --build $(BUILD) $(if $(LESSON),--lesson $(LESSON)) $(if $(LANES),--lanes) $(PARTS)

# Needs a GPU: everything that compiles first, then every check a GPU proves, the mutants' and
# the handouts' with the suite's, over every GPU (tools/gpu-check); its results in BUILD/gpu-check,
# or GPU_CHECK_OUT=DIR. LESSONS=12-16: those lessons alone; RESUME=1 continues a run cut short.
.PHONY: gpu-check
gpu-check: build-all
	@$(AS_A_USER) tools/gpu-check --build $(BUILD) $(if $(GPU_CHECK_OUT),--out $(GPU_CHECK_OUT)) \
	    $(if $(LESSONS),--lessons "$(LESSONS)") $(if $(RESUME),--resume)
endif

# The demo: lesson 05's solution; in a handout, the prebuilt reference of its first lesson.
# DEMO_ARGS: its options (e.g. --help).
DEMO := $(if $(HANDOUT_TREE),reference/solutions/$(firstword $(LESSON_DIRS)),$(BUILD)/solutions/05_stream_overlap)
demo: build-all
	@$(call report_broken_lessons,true)
	$(DEMO) $(DEMO_ARGS)

setup:
	@tools/setup-bats

# `make setup test` (or setup with any other goal): setup installs what the other goals use (Bats,
# jq), so it ends before any of them starts, under any -j; they still build beside it.
ifneq ($(filter setup,$(MAKECMDGOALS)),)
$(filter-out setup,$(MAKECMDGOALS)): | setup
endif

# TESTS: the Bats files or folders to run (default tests/). The last line of the output is
# run-tests' "N passed, N failed, N skipped", unless a check failed: then make adds its own.
test: build-all
	@$(call report_broken_lessons,true)
	@$(AS_A_USER) tools/run-tests $(or $(TESTS),tests)

.PHONY: fixed-arch
fixed-arch:
	@echo "$(FIXED_ARCH)"

# One file compiled as the course compiles it, alone, for the claims' mutants (tools/dev-check
# build-claims, tests/claims.bats): `make compile-one SRC=FILE OUT=OBJ ARCH=90` (.c with gcc and
# NCCL's headers, .cu with nvcc). `make -s host-includes`: the include flags a host-only build of
# a lesson's .cu needs (tests/14's build of recorder.cu under ASan, tests/16's of its writer under TSan).
.PHONY: compile-one host-includes
compile-one:
	@test -n "$(SRC)" -a -n "$(OUT)" || { echo "make compile-one: give SRC=FILE and OUT=OBJECT" >&2; exit 2; }
	@mkdir -p $(dir $(OUT))
	$(if $(filter %.cu,$(SRC)),$(NVCC) $(NVCCFLAGS) $(SOLUTION_FLAGS) $(LESSON_INC),$(CC) $(CFLAGS)) $(NCCL_CFLAGS) -c $(SRC) -o $(OUT)
host-includes:
	@echo "-I. $(LESSON_INC) $(CUDA_INC) $(NCCL_CFLAGS)"

# For students and instructors (docs/students.md, docs/instructors.md): check one lesson, find the next, grade one
# student or a class. The grader builds what it needs (each lesson on its own, so one
# that does not build fails alone) and exits non-zero unless every lesson was graded
# and passed: without a GPU the lessons are "not graded".
check:
	@test -n "$(LESSON)" || { echo "make check: say which lesson, e.g. make check LESSON=07" >&2; exit 2; }
	@$(AS_A_USER) tools/grade --build $(BUILD) --lesson $(LESSON)

next:
	@$(AS_A_USER) tools/grade --build $(BUILD) --next

grade:
	@$(AS_A_USER) tools/grade --build $(BUILD) $(if $(STUDENT),--student $(STUDENT)) $(if $(GRADE_LESSONS),--lessons "$(GRADE_LESSONS)")

# The C style (.clang-format, written for clang-format 14): fails, naming each line, where
# clang-format would change a file of common/, solutions/ or tools/; rewrites nothing.
CLANG_FORMAT ?= clang-format
FORMAT_FILES := $(wildcard common/*/*.c common/*/*.h common/*/*.cu solutions/*/*.cu solutions/*/*.h tools/*.c tools/*.cu)
format-check:
	@if command -v $(CLANG_FORMAT) >/dev/null 2>&1; then \
	    $(CLANG_FORMAT) --style=file --dry-run -Werror $(FORMAT_FILES); \
	else \
	    echo "format-check: skipped: clang-format not found"; \
	fi

clean:
	rm -rf $(BUILD)
