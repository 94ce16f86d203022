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
# Student and instructor targets (check, next, grade) are described in README.md. The same
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

# GPU targets: ARCH= wins; else the GPU present; else a fixed list from Turing
# (T4) through Ampere, Ada (L4, L20, RTX 40), Hopper (H100, H200), Blackwell
# (B200) and RTX 50, plus PTX of the newest so that later GPUs can JIT it.
FIXED_ARCH := 75 80 86 89 90 100 120
ifeq ($(origin ARCH),undefined)
DETECTED_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
ifneq ($(DETECTED_ARCH),)
ARCH := $(DETECTED_ARCH)
ARCH_WHY := the GPU present
else
ARCH := $(FIXED_ARCH)
ARCH_WHY := no GPU found, a fixed list
endif
else
ARCH_WHY := set by ARCH=
endif
GENCODE := $(foreach a,$(ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
           -gencode arch=compute_$(lastword $(ARCH)),code=compute_$(lastword $(ARCH))

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
# The bootstrap of several ranks and lesson 12's data-parallel step need NCCL: built below
DIST_C := $(wildcard common/dist_*.c common/ddp*.c)
COMMON_C := $(filter-out $(DIST_C),$(wildcard common/*.c))
COMMON_CU := $(wildcard common/*.cu)
HOST_OBJ := $(patsubst common/%.c,$(BUILD)/common/%.o,$(COMMON_C))
COMMON_OBJ := $(HOST_OBJ) $(patsubst common/%.cu,$(BUILD)/common/%.cu.o,$(COMMON_CU))
# In a handout, a file of common/ that holds the answer of an exercise handed out comes compiled
# (tools/make-handout): its object joins the library in place of its source.
COMMON_PREBUILT := $(wildcard common/prebuilt/*.o)
COMMON_LIB := $(BUILD)/libcourse.a
HOST_LIB := $(BUILD)/libcourse-host.a  # common/'s host-only C, all the tools link: no nvcc needed for them
SOLUTION_BINS := $(if $(HANDOUT_TREE),,$(addprefix $(BUILD)/solutions/,$(LESSON_DIRS)))
LESSON_BINS := $(addprefix $(BUILD)/lessons/,$(LESSON_DIRS))
TOOLS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(wildcard tools/*.c))
NCCL_TOOLS := $(patsubst tools/%.cu,$(BUILD)/tools/%,$(wildcard tools/*.cu))

# NCCL, for the lessons that train on several GPUs (12, 13, 14): nccl.h and libnccl under
# NCCL_HOME when it is set (e.g. the nvidia-nccl-cu13 wheel's nvidia/nccl folder), else
# in the CUDA toolkit, else in the system's folders (NVIDIA's libnccl2 and libnccl-dev
# packages). Where it is missing those lessons are not built, `make` says so on its
# first line, and their tests skip with the reason `make -s nccl-status` prints.
NCCL_LESSONS := $(filter 12_% 13_% 14_% 15_%,$(LESSON_DIRS))
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
NCCL_STATUS := NCCL $(NCCL_VERSION) ($(NCCL_SO)): $(NCCL_LESSONS) built
else
NCCL_MISSING := $(NCCL_LESSONS)
NCCL_STATUS := NCCL not found ($(if $(NCCL_H),no libnccl.so,no nccl.h) in $(if $(NCCL_HOME),NCCL_HOME=$(NCCL_HOME),$(CUDA_HOME) or /usr); \
               set NCCL_HOME): $(NCCL_LESSONS) not built
SOLUTION_BINS := $(filter-out $(addprefix $(BUILD)/solutions/,$(NCCL_MISSING)),$(SOLUTION_BINS))
NCCL_TOOLS :=
LESSON_BINS := $(filter-out $(addprefix $(BUILD)/lessons/,$(NCCL_MISSING)),$(LESSON_BINS))
endif
DIST_OBJ := $(patsubst common/%.c,$(BUILD)/common/%.o,$(DIST_C))

.PHONY: all build-all solutions lesson-bins tools lessons demo test setup bench timelines check next grade dev-check \
        clean arch format-check handout grade-class
.DEFAULT_GOAL := all

# `all` fails, naming them, when lessons do not build; demo and test go on without them.
all: build-all
	@$(call report_broken_lessons,exit 1)
build-all: arch solutions lesson-bins tools
solutions: $(SOLUTION_BINS)
tools: $(TOOLS) $(NCCL_TOOLS)

# The lessons, each on its own and with -k: one that does not compile (a student's) is named
# and stops neither the other lessons nor the rest. After the course's library: this make of
# its own must find it built, not build it a second time beside the first.
lesson-bins: $(COMMON_LIB) $(if $(NCCL_MISSING),,$(DIST_OBJ))
	@[ -z "$(LESSON_BINS)" ] || $(MAKE) --no-print-directory -k $(LESSON_BINS) || true

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
	@echo "make: building for compute capability $(ARCH) ($(ARCH_WHY)); $(NCCL_STATUS)"

.PHONY: nccl-status
nccl-status:
	@echo "$(NCCL_STATUS)"

$(BUILD)/common/%.o: common/%.c common/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/%.cu.o: common/%.cu common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJ) $(COMMON_PREBUILT)
	@rm -f $@
	ar rcs $@ $^

$(HOST_LIB): $(HOST_OBJ)
	@rm -f $@
	ar rcs $@ $^

# One binary per lesson folder, from its .cu files, in solutions/ and in lessons/.
.SECONDEXPANSION:
$(BUILD)/solutions/%: $$(wildcard solutions/$$*/*.cu solutions/$$*/*.h) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(filter %.cu,$^) $(COMMON_LIB) $(LDLIBS) -o $@

# A student version leaves state unused until its exercises are written: no error for that.
LESSON_FLAGS := -diag-suppress 177,550 -Xcompiler -Wno-unused-variable,-Wno-unused-but-set-variable
# (its old binary removed first: no binary of an earlier good build may pass for a lesson that
# no longer compiles)
$(BUILD)/lessons/%: $$(wildcard lessons/$$*/*.cu lessons/$$*/*.h) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D) && rm -f $@
	$(NVCC) $(NVCCFLAGS) $(LESSON_FLAGS) $(filter %.cu,$^) $(COMMON_LIB) $(LDLIBS) -o $@

# The NCCL lessons also link common/dist_*.c (the bootstrap: ranks, rendezvous, communicator),
# common/ddp*.c (lesson 12's data-parallel step) and NCCL. A lesson that stands on an earlier
# lesson's exercises links the course's own solution of them, in solutions/ (never a student's:
# a grade never depends on another lesson), as STANDS_ON.LESSON says: 14 calls 12's bucket plan and
# its buckets' all-reduces.
STANDS_ON.14_fault_tolerance := solutions/12_data_parallel_overlap/buckets.cu solutions/12_data_parallel_overlap/buckets.h
# 15 captures 12's step and replays it: it links the whole of 12 but its main.cu (how the ranks
# meet and stop, the buckets, 12's loop as its eager variant, the reference, the checks).
STANDS_ON.15_graph_data_parallel := solutions/12_data_parallel_overlap/buckets.cu solutions/12_data_parallel_overlap/buckets.h solutions/12_data_parallel_overlap/data_parallel.h solutions/12_data_parallel_overlap/meet.cu solutions/12_data_parallel_overlap/stop.cu solutions/12_data_parallel_overlap/train.cu solutions/12_data_parallel_overlap/report.cu
ifeq ($(NCCL_MISSING),)
$(DIST_OBJ): $(BUILD)/common/%.o: common/%.c common/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(NCCL_CFLAGS) -c $< -o $@

$(addprefix $(BUILD)/solutions/,$(NCCL_LESSONS)): $(BUILD)/solutions/%: $$(wildcard solutions/$$*/*.cu solutions/$$*/*.h) \
        $$(STANDS_ON.$$*) $(DIST_OBJ) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(NCCL_CFLAGS) $(filter %.cu,$^) $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) $(NCCL_LDLIBS) -o $@

$(addprefix $(BUILD)/lessons/,$(NCCL_LESSONS)): $(BUILD)/lessons/%: $$(wildcard lessons/$$*/*.cu lessons/$$*/*.h) \
        $$(STANDS_ON.$$*) $(DIST_OBJ) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D) && rm -f $@
	$(NVCC) $(NVCCFLAGS) $(LESSON_FLAGS) $(NCCL_CFLAGS) $(filter %.cu,$^) $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) \
	    $(NCCL_LDLIBS) -o $@
# The tools that run ranks of their own (tools/*.cu: sm-share) build like the NCCL lessons.
$(BUILD)/tools/%: tools/%.cu $(DIST_OBJ) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(NCCL_CFLAGS) $< $(DIST_OBJ) $(COMMON_LIB) $(LDLIBS) $(NCCL_LDLIBS) -o $@
else
$(addprefix $(BUILD)/solutions/,$(NCCL_MISSING)) $(addprefix $(BUILD)/lessons/,$(NCCL_MISSING)):
	@echo "make: $(@F) needs NCCL: $(NCCL_STATUS)" >&2; exit 1
endif

# Host-only tools (trace analysis, JSON check, grading): plain C11, no GPU needed.
$(BUILD)/tools/%: tools/%.c $(HOST_LIB) common/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< $(HOST_LIB) $(TOOL_LIBS) -lm $(SAN_FLAGS) -o $@

# gpu-probe asks the CUDA runtime (cudaGetDeviceCount): the one tool that links it
$(BUILD)/tools/gpu-probe: TOOL_LIBS = $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath=,$(CUDA_LIBDIRS)) -lcudart -ldl

# What needs the solutions: a handout has none (its lessons are the student's own).
ifneq ($(HANDOUT_TREE),)
lessons handout bench timelines grade-class dev-check:
	@echo "make $@: not in a student's copy of the course (it needs solutions/); the instructor's course has it" >&2; exit 2
# the prebuilt reference programs were linked where the instructor's libraries are: here, these
space := $(subst ,, )
export LD_LIBRARY_PATH := $(subst $(space),:,$(strip $(CUDA_LIBDIRS) $(NCCL_LIB_DIR)))$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
else
# lessons/ is generated from solutions/: each BEGIN/END SOLUTION region becomes a TODO.
lessons:
	@tools/make-lessons

# A student's copy of lessons LESSONS (05-08, "05 06", default all): the folder and a .tar.gz in
# build/handout/ (HANDOUT_OUT=DIR elsewhere), its reference programs built for FIXED_ARCH.
handout:
	@tools/make-handout $(if $(LESSONS),--lessons "$(LESSONS)") $(if $(HANDOUT_OUT),--out $(HANDOUT_OUT))

bench: all
	@tools/bench

timelines: all
	@tools/timelines

# CLASS=DIR: one folder per student; TIME_LIMIT: per student (default 15m); GRADE_LESSONS="05 06"
.PHONY: grade-class
grade-class:
	@test -n "$(CLASS)" || { echo "make grade-class: say which folder holds the students' copies, e.g. make grade-class CLASS=~/class" >&2; exit 2; }
	@tools/grade-class --build $(BUILD) $(if $(TIME_LIMIT),--time-limit $(TIME_LIMIT)) $(if $(GRADE_LESSONS),--lessons "$(GRADE_LESSONS)") $(CLASS)

# Needs a GPU. PARTS="solutions unsolved mutants" (the default) or a subset; LESSON=NN.
dev-check:
	@tools/dev-check --build $(BUILD) $(if $(LESSON),--lesson $(LESSON)) $(PARTS)
endif

# The demo: lesson 05's solution; in a handout, the prebuilt reference of its first lesson.
# DEMO_ARGS: its options (e.g. --help).
DEMO := $(if $(HANDOUT_TREE),reference/solutions/$(firstword $(LESSON_DIRS)),$(BUILD)/solutions/05_stream_overlap)
demo: build-all
	@$(call report_broken_lessons,true)
	$(DEMO) $(DEMO_ARGS)

setup:
	@tools/setup-bats

# TESTS: the Bats files or folders to run (default tests/). The last line of the output is
# run-tests' "N passed, N failed, N skipped", unless a check failed: then make adds its own.
test: build-all
	@$(call report_broken_lessons,true)
	@tools/run-tests $(or $(TESTS),tests)

.PHONY: fixed-arch
fixed-arch:
	@echo "$(FIXED_ARCH)"

# One file compiled as the course compiles it, alone, for the claims' mutants (tools/dev-check
# build-claims, tests/claims.bats): `make compile-one SRC=FILE OUT=OBJ ARCH=90` (.c with gcc and
# NCCL's headers, .cu with nvcc). `make -s host-includes`: the include flags a host-only build of
# a lesson's .cu needs (tests/14's build of recorder.cu under ASan).
.PHONY: compile-one host-includes
compile-one:
	@test -n "$(SRC)" -a -n "$(OUT)" || { echo "make compile-one: give SRC=FILE and OUT=OBJECT" >&2; exit 2; }
	@mkdir -p $(dir $(OUT))
	$(if $(filter %.cu,$(SRC)),$(NVCC) $(NVCCFLAGS),$(CC) $(CFLAGS)) $(NCCL_CFLAGS) -c $(SRC) -o $(OUT)
host-includes:
	@echo "-I. $(CUDA_INC) $(NCCL_CFLAGS)"

# For students and instructors (README): check one lesson, find the next, grade one
# student or a class. The grader builds what it needs (each lesson on its own, so one
# that does not build fails alone) and exits non-zero unless every lesson was graded
# and passed: without a GPU the lessons are "not graded".
check:
	@test -n "$(LESSON)" || { echo "make check: say which lesson, e.g. make check LESSON=07" >&2; exit 2; }
	@tools/grade --build $(BUILD) --lesson $(LESSON)

next:
	@tools/grade --build $(BUILD) --next

grade:
	@tools/grade --build $(BUILD) $(if $(STUDENT),--student $(STUDENT)) $(if $(GRADE_LESSONS),--lessons "$(GRADE_LESSONS)")

# The C style (.clang-format, written for clang-format 14): fails, naming each line, where
# clang-format would change a file of common/, solutions/ or tools/; rewrites nothing.
CLANG_FORMAT ?= clang-format
FORMAT_FILES := $(wildcard common/*.c common/*.h common/*.cu solutions/*/*.cu solutions/*/*.h tools/*.c tools/*.cu)
format-check:
	@if command -v $(CLANG_FORMAT) >/dev/null 2>&1; then \
	    $(CLANG_FORMAT) --style=file --dry-run -Werror $(FORMAT_FILES); \
	else \
	    echo "format-check: skipped: clang-format not found"; \
	fi

clean:
	rm -rf $(BUILD)
