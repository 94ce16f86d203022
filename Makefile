# The course's build. `make` builds every solution and every student lesson into build/.
#
#   make                 build everything (solutions, lessons, tools)
#   make demo            build, then run lesson 05's solution (the main demo)
#   make setup test      install Bats if it is missing, then run the whole test suite
#   make lessons         regenerate lessons/ from solutions/ (keeps a .orig of any edited file)
#   make bench           the benchmark table (needs a GPU)
#   make ARCH="80 90"    build for these compute capabilities instead of the detected one
#
# Student and instructor targets (check, next, grade) are described in README.md.

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null))
ifeq ($(CUDA_HOME),)
CUDA_HOME := /usr/local/cuda
endif
NVCC := $(CUDA_HOME)/bin/nvcc
CC ?= gcc
BUILD := build

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

# SAN=address (or thread) builds everything with that sanitizer, for the host
# side; use a build folder of its own: make SAN=address BUILD=build/asan
ifdef SAN
CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer
NVCCFLAGS += -Xcompiler -fsanitize=$(SAN),-fno-omit-frame-pointer
LDLIBS += -Xcompiler -fsanitize=$(SAN)
endif

LESSONS := $(notdir $(wildcard solutions/[0-9][0-9]_*))
COMMON_C := $(wildcard common/*.c)
COMMON_CU := $(wildcard common/*.cu)
COMMON_OBJ := $(patsubst common/%.c,$(BUILD)/common/%.o,$(COMMON_C)) \
              $(patsubst common/%.cu,$(BUILD)/common/%.cu.o,$(COMMON_CU))
COMMON_LIB := $(BUILD)/libcourse.a
SOLUTION_BINS := $(addprefix $(BUILD)/solutions/,$(LESSONS))
LESSON_BINS := $(addprefix $(BUILD)/lessons/,$(LESSONS))
TOOLS := $(patsubst tools/%.c,$(BUILD)/tools/%,$(wildcard tools/*.c))

.PHONY: all solutions lesson-bins tools lessons demo test setup bench timelines check next grade dev-check clean arch
.DEFAULT_GOAL := all

all: arch solutions lesson-bins tools
solutions: $(SOLUTION_BINS)
lesson-bins: $(LESSON_BINS)
tools: $(TOOLS)

arch:
	@echo "make: building for compute capability $(ARCH) ($(ARCH_WHY))"

$(BUILD)/common/%.o: common/%.c common/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/common/%.cu.o: common/%.cu common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJ)
	@rm -f $@
	ar rcs $@ $^

# One binary per lesson folder, from its .cu files, in solutions/ and in lessons/.
.SECONDEXPANSION:
$(BUILD)/solutions/%: $$(wildcard solutions/$$*/*.cu solutions/$$*/*.h) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(filter %.cu,$^) $(COMMON_LIB) $(LDLIBS) -o $@

# A student version leaves state unused until its exercises are written: no error for that.
LESSON_FLAGS := -diag-suppress 177,550 -Xcompiler -Wno-unused-variable,-Wno-unused-but-set-variable
$(BUILD)/lessons/%: $$(wildcard lessons/$$*/*.cu lessons/$$*/*.h) $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(LESSON_FLAGS) $(filter %.cu,$^) $(COMMON_LIB) $(LDLIBS) -o $@

# Host-only tools (trace analysis, JSON check, grading): plain C11, no GPU needed.
$(BUILD)/tools/%: tools/%.c $(COMMON_LIB) common/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< $(COMMON_LIB) -lm $(if $(SAN),-fsanitize=$(SAN)) -o $@

# lessons/ is generated from solutions/: each BEGIN/END SOLUTION region becomes a TODO.
lessons:
	@tools/make-lessons

demo: all
	$(BUILD)/solutions/05_stream_overlap

setup:
	@tools/setup-bats

test: all
	@tools/run-tests tests

bench: all
	@tools/bench

timelines: all
	@tools/timelines

# For students and instructors (README): check one lesson, find the next, grade.
check: all
	@test -n "$(LESSON)" || { echo "make check: say which lesson, e.g. make check LESSON=07" >&2; exit 2; }
	@tools/grade --lesson $(LESSON)

next: all
	@tools/grade --next

grade:
	@tools/grade $(if $(STUDENT),--student $(STUDENT))

dev-check: all
	@tools/dev-check

clean:
	rm -rf $(BUILD)
