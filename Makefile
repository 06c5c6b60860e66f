# timewrite: build every variant in the mechanism registry, run the tests, run the report.
#
#   make                 build every variant into build/
#   make list-variants   print the variant names, one per line
#   make deb             build/timewrite_<version>_amd64.deb, reproducibly (docs/packaging.md)
#   make check           the fast tests: unit, parser, statistics, fixtures (no build)
#   make test            install what is missing (as root), build, run every test
#   make report          install what is missing (as root), build, measure, report
#                        (on a machine without make: ./tw-make test, ./tw-make report)
#   make bench           the benchmark of the benchmark: the matrix twice and how it reproduces
#                        (both figures), the peers side by side, and what tw ab detects
#   make bench-ab        only the last: a build a little slower per call, found by tw ab, and A/A
#   make bench-fleet     tw fleet over 1000 synthetic results directories: wall time, peak memory
#   make bench-sweeps    the seed and TLPI sweeps twice (tw run --only ...) and how they reproduce
#   make bench-factors   what a run holds fixed (CPU, environment, path, ASLR, layout), each varied
#   make bench-census    tw census's int 0x80 counts against the programs' own (root)
#   make bench-walls     tw ab --wall against walls/seccomp_ab.c, an independent libseccomp
#                        program, and a name-only profile against a one-instruction filter
#
# The variants live in variants/registry (the mechanism registry); this file
# only expands the rows variants/rows.awk reads from it.  Objects are built
# once per flavour, bits plus syscall ABI (64-x86_64, 64-i386, 32-i386): the
# 64-bit int80 variant is 64-bit code that must use i386 numbers.

SHELL      := /bin/bash
BUILD      := build
OBJ        := $(BUILD)/obj
CC         ?= cc
NASM       ?= nasm
# nasm -g records the source's absolute folder, and nasm has no prefix map: make deb, whose
# programs are stripped of debug sections anyway, builds with NASM_DEBUG= (reproducible).
NASM_DEBUG ?= -g
PYTHON     ?= python3
VENV       := .venv
VPY        := $(VENV)/bin/python
CFLAGS     ?= -O2 -g
TW_CFLAGS  := -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Itimewrite
LDFLAGS    ?=

# Flavour-specific flags.  32-bit links are -no-pie: vdso.asm loads
# tw_vsyscall by absolute address, which a PIE would need a text relocation for.
FLAGS_64-x86_64 := -m64
FLAGS_64-i386   := -m64 -DTW_ABI32
FLAGS_32-i386   := -m32 -DTW_ABI32 -no-pie -fno-pie
NASMFMT_64      := elf64
NASMFMT_32      := elf32

# A known extra cost for the issue's detection test: N dependent multiplies in
# the 64-bit syscall stub's call, before the entry (asm/64/syscall.asm).  Build
# it apart, e.g. `make binaries BUILD=build-x TW_EXTRA_WORK=4`; 0 is the plain
# code.  TW_EXTRA_CHAIN=0 makes the N multiplies independent of each other in
# instructions of the same length: the baseline of the same layout.  The values are kept in
# $(OBJ)/tw_extra_work so that changing one rebuilds.
TW_EXTRA_WORK ?= 0
TW_EXTRA_CHAIN ?= 1
ifeq ($(shell echo '$(TW_EXTRA_WORK)' | grep -Ex '[0-9]{1,4}'),)
$(error TW_EXTRA_WORK must be a whole number from 0 to 9999, not '$(TW_EXTRA_WORK)')
endif
ifeq ($(filter $(TW_EXTRA_CHAIN),0 1),)
$(error TW_EXTRA_CHAIN must be 0 or 1, not '$(TW_EXTRA_CHAIN)')
endif

PROGRAMS := timewrite syscost legs
# Programs that measure libc's own buffering and writev; no mechanism stub.
LIBC_PROGRAMS := wvbench

# Rows of the registry as bits:abi:mechanism:write:obj1:obj2..., from the one
# awk program that reads it (variants/rows.awk; tests/test_registry_readers.py
# checks it against twtools.machine.registry).  write is "w" for the variants
# timewrite is built for: those whose ops include write-file.
# (.SHELLSTATUS is GNU make 4.2's; an older make still stops on no rows at all.)
ROWS := $(shell awk -f variants/rows.awk variants/registry)
ifneq ($(filter-out 0,$(.SHELLSTATUS))$(if $(ROWS),,empty),)
$(error variants/registry could not be read (variants/rows.awk said why, above))
endif

row_field = $(word $2,$(subst :, ,$1))
row_bits  = $(call row_field,$1,1)
row_abi   = $(call row_field,$1,2)
row_mech  = $(call row_field,$1,3)
row_write = $(call row_field,$1,4)
row_objs  = $(wordlist 5,99,$(subst :, ,$1))
row_flav  = $(call row_bits,$1)-$(call row_abi,$1)
row_name  = $(call row_bits,$1)-$(call row_mech,$1)
# asm/64/syscall -> build/obj/64-x86_64/asm/syscall.o; libc -> build/obj/<flav>/libc.o
obj_path = $(if $(filter asm/%,$2),$(OBJ)/$1/asm/$(notdir $2).o,$(OBJ)/$1/$2.o)

VARIANTS := $(foreach r,$(ROWS),$(call row_name,$r))
# timewrite copies its input with write(2), so it is built only for the
# mechanisms that can write.  The vsyscall page and the 64-bit vDSO cannot;
# they get syscost only, since a timewrite that could not write would have
# nothing to time.
WRITE_VARIANTS := $(foreach r,$(ROWS),$(if $(filter w,$(call row_write,$r)),$(call row_name,$r)))
# tw watch's BPF programs (watch/*.bpf.c) and their loader (watch/watchbpf.c): compiled once
# here, by clang for the BPF target and against libbpf, for any x86-64 kernel with BTF (CO-RE:
# watch/kernel.h says why no vmlinux.h).  The UAPI headers' asm/ lives in the multiarch folder.
WATCH_BINARIES := $(BUILD)/watchbpf $(BUILD)/watch/exec.bpf.o $(BUILD)/watch/window.bpf.o
# tw ab --wall tracer:raw_syscalls's program and its loader (walls/tracer*.c), built the same way.
WALL_BINARIES := $(BUILD)/tracerbpf $(BUILD)/walls/tracer.bpf.o
BPF_CLANG ?= clang
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_x86 -Wall \
	-I/usr/include/$(shell $(CC) -print-multiarch 2>/dev/null) -Iwatch
BINARIES := $(addprefix $(BUILD)/timewrite-,$(WRITE_VARIANTS)) \
            $(addprefix $(BUILD)/syscost-,$(VARIANTS)) \
            $(addprefix $(BUILD)/legs-,$(VARIANTS)) \
            $(foreach p,$(LIBC_PROGRAMS),$(BUILD)/$p-64 $(BUILD)/$p-32) \
            $(BUILD)/hostclock $(BUILD)/neighbour $(BUILD)/timewrite $(WATCH_BINARIES) \
            $(WALL_BINARIES)

.PHONY: FORCE all binaries watch-binaries list-variants list-write-variants deps build-deps test-deps venv deb go-test \
	check test report bench bench-ab bench-fleet bench-sweeps bench-factors bench-walls bench-census clean distclean
# `make` first checks (and as root installs) the compilers, then builds.
all: build-deps
	@$(MAKE) --no-print-directory binaries
binaries: $(BINARIES)
# What tw watch needs on a host (fleet/roles/timewrite_watch): its programs and loader, and
# syscost, with which a window measures its own cost and --measure prices the entry paths.
watch-binaries: $(WATCH_BINARIES) $(addprefix $(BUILD)/syscost-,$(VARIANTS))

list-variants:
	@for v in $(VARIANTS); do echo "$$v"; done
# The variants timewrite is built for (those that can write).
list-write-variants:
	@for v in $(WRITE_VARIANTS); do echo "$$v"; done

# One link rule per program and registry row.  A program links, in this order,
# its own objects, the C pieces every program shares, and the row's objects
# (its stub or C file, and its allocator).  syscost's own pieces are its operations' tables, options,
# clock, disturbance counters, speculation control, output and CPU pinning
# (syscost/*.c); legs shares the pinning.
OWN_OBJS_timewrite := timewrite
OWN_OBJS_syscost   := syscost ops options clock disturb speculation wall output cpu
OWN_OBJS_legs      := legs cpu
SHARED_OBJS := probe json_out tw_cli tw_stats
link_objs = $(foreach o,$(OWN_OBJS_$2) $(SHARED_OBJS),$(OBJ)/$(call row_flav,$1)/$o.o) \
	$(foreach o,$(call row_objs,$1),$(call obj_path,$(call row_flav,$1),$o))
define VARIANT_RULES
$(BUILD)/$2-$(call row_name,$1): $(call link_objs,$1,$2)
	$$(CC) $$(FLAGS_$(call row_flav,$1)) $$(LDFLAGS) -o $$@ $$^ -lm
endef
$(foreach r,$(ROWS),$(foreach p,$(PROGRAMS),$(eval $(call VARIANT_RULES,$r,$p))))

$(BUILD)/timewrite: $(BUILD)/timewrite-64-libc
	ln -sf timewrite-64-libc $@

$(BUILD)/wvbench-64: $(OBJ)/64-x86_64/wvbench.o $(OBJ)/64-x86_64/json_out.o $(OBJ)/64-x86_64/tw_cli.o
	$(CC) $(FLAGS_64-x86_64) $(LDFLAGS) -o $@ $^ -lm
# The host's speed for user code, beside which the sweeps' moves are read: no stub, no
# kernel entry, so one 64-bit build serves every variant.
$(BUILD)/hostclock: $(OBJ)/64-x86_64/hostclock.o $(OBJ)/64-x86_64/json_out.o $(OBJ)/64-x86_64/tw_cli.o
	$(CC) $(FLAGS_64-x86_64) $(LDFLAGS) -o $@ $^ -lm
# A noisy neighbour on purpose (docs/syscost.md): cache and memory thrashing and TLB-shootdown
# interrupts in bursts, from the CPU syscost does not use.  One 64-bit build, like hostclock.
$(BUILD)/neighbour: $(OBJ)/64-x86_64/neighbour.o $(OBJ)/64-x86_64/cpu.o $(OBJ)/64-x86_64/tw_cli.o
	$(CC) $(FLAGS_64-x86_64) $(LDFLAGS) -pthread -o $@ $^ -lm
$(BUILD)/wvbench-32: $(OBJ)/32-i386/wvbench.o $(OBJ)/32-i386/json_out.o $(OBJ)/32-i386/tw_cli.o
	$(CC) $(FLAGS_32-i386) $(LDFLAGS) -o $@ $^ -lm

# Static pattern rules: each C source builds in every flavour.
HEADERS := $(wildcard timewrite/*.h syscost/*.h)
ASM_INCLUDES := $(wildcard asm/include/*.inc)
FLAVOURS := 64-x86_64 64-i386 32-i386
define FLAVOUR_RULES
$(OBJ)/$1/%.o: timewrite/%.c $(HEADERS) | $(OBJ)/$1/asm
	$$(CC) $$(CFLAGS) $$(TW_CFLAGS) $$(FLAGS_$1) -c -o $$@ $$<
$(OBJ)/$1/%.o: syscost/%.c $(HEADERS) | $(OBJ)/$1/asm
	$$(CC) $$(CFLAGS) $$(TW_CFLAGS) $$(FLAGS_$1) -c -o $$@ $$<
$(OBJ)/$1/asm/%.o: asm/$(firstword $(subst -, ,$1))/%.asm $(ASM_INCLUDES) | $(OBJ)/$1/asm
	$$(NASM) -f $$(NASMFMT_$(firstword $(subst -, ,$1))) $$(NASM_DEBUG) -Iasm/include/ -DTW_EXTRA_WORK=$$(TW_EXTRA_WORK) -DTW_EXTRA_CHAIN=$$(TW_EXTRA_CHAIN) -o $$@ $$<
$(OBJ)/$1/asm:
	mkdir -p $$@
endef
$(foreach f,$(FLAVOURS),$(eval $(call FLAVOUR_RULES,$f)))

# A BPF program of the tree, tw watch's (watch/) or the tracer wall's (walls/): its
# objects, compiled by clang from $1/%.bpf.c (headers $2), and its libbpf loader
# build/$3 from $1/$3.c (headers $4).
define BPF_RULES
$(BUILD)/$1/%.bpf.o: $1/%.bpf.c $2
	@mkdir -p $$(@D)
	$$(BPF_CLANG) $$(BPF_CFLAGS) $$(BPF_EXTRA_CFLAGS) -c -o $$@ $$<
$(BUILD)/$3: $1/$3.c $4
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) -std=gnu11 -Wall -Wextra $$(LDFLAGS) -o $$@ $$< -lbpf
endef
$(eval $(call BPF_RULES,watch,watch/kernel.h watch/maps.h,watchbpf,watch/maps.h))
$(eval $(call BPF_RULES,walls,walls/tracer.h watch/kernel.h,tracerbpf,walls/tracer.h))

# The stub that TW_EXTRA_WORK changes is rebuilt when the value changes: the
# file is rewritten only when it differs, so an unchanged value rebuilds nothing.
$(OBJ)/64-x86_64/asm/syscall.o: $(OBJ)/tw_extra_work
$(OBJ)/tw_extra_work: FORCE
	@mkdir -p $(@D) && { echo '$(TW_EXTRA_WORK) $(TW_EXTRA_CHAIN)' | cmp -s - $@ || echo '$(TW_EXTRA_WORK) $(TW_EXTRA_CHAIN)' >$@; }
FORCE:

# --- set-up, tests, report -------------------------------------------------

# scripts/deps.sh checks (and as root installs) what each step needs: `build` for
# compiling, `report` for measuring, `test` adds the browser and Go the tests use.
# ./tw-make runs it before make exists and passes TW_DEPS_CHECKED=1 so it runs once.
DEPS = $(if $(TW_DEPS_CHECKED),@:,@scripts/deps.sh)
deps:
	$(DEPS) report
build-deps:
	$(DEPS) build
test-deps:
	$(DEPS) test

# A venv whose pip works is kept; one without pip (python3-venv missing when it
# was made) is made again.  pip's output goes to a log, printed only on failure.
VENV_LOG := $(BUILD)/venv.log
$(VENV)/.stamp: requirements.txt
	@echo "timewrite: building $(VENV) from requirements.txt (PyPI) … (log: $(VENV_LOG))" >&2
	@mkdir -p $(BUILD) && : >$(VENV_LOG) && \
	{ $(VPY) -m pip --version >>$(VENV_LOG) 2>&1 || { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); } >>$(VENV_LOG) 2>&1; } && \
	$(VPY) -m pip install --disable-pip-version-check -r requirements.txt >>$(VENV_LOG) 2>&1 || \
	{ echo "timewrite: building $(VENV) failed; full log: $(VENV_LOG)" >&2; tail -n 3 $(VENV_LOG) >&2; exit 1; }
	@touch $@
# Then the toolkit's and the tests' Python is compiled to bytecode, once (about 0.4 s, and only
# what changed after that).  A test run starts hundreds of Python processes (pytest's workers,
# every `tw` a test runs), and where PYTHONDONTWRITEBYTECODE is set, as in some CI and
# container environments, each one compiled every module it imported from source again
# (`make check` in turn with the same tree without bytecode: 0.93 times the time and the CPU).
# The stamp keeps compileall from starting its pool of workers for nothing: that alone cost
# 0.18 s of every `make check` when no file had changed.
PY_SOURCES = $(shell find scripts tests -name '*.py' 2>/dev/null)
$(BUILD)/.compiled: $(VENV)/.stamp $(PY_SOURCES)
	@$(VPY) -m compileall -q -j 0 scripts tests || \
	{ echo "timewrite: compiling scripts/ and tests/ to bytecode failed" >&2; exit 1; }
	@touch $@
venv: deps $(VENV)/.stamp $(BUILD)/.compiled

# The Debian package, build/timewrite_<version>_amd64.deb (packaging/build-deb.sh,
# docs/packaging.md): the programs compiled afresh in build/deb/bin, the toolkit, the man page
# and bash completion drawn from the argparse parsers (so the venv), the unit.  The version is
# twtools.core.version's (git describe); SOURCE_DATE_EPOCH is the commit's time, so two builds of
# one commit give the same bytes.  The package's path is the last line on stdout.
DEB_DIR := $(BUILD)/deb
deb:
	$(DEPS) deb
	@$(MAKE) --no-print-directory $(VENV)/.stamp TW_DEPS_CHECKED=1
	@mkdir -p $(BUILD)
	@SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} \
	packaging/build-deb.sh $(DEB_DIR) "$$(cd scripts && ../$(VPY) -m twtools.core.version)" \
		$(abspath $(VPY)) >$(DEB_DIR).path && \
	deb=$$(cat $(DEB_DIR).path) && mv -f "$$deb" $(BUILD)/ && echo "$(BUILD)/$${deb##*/}"

# pytest-xdist's workers: `make test` runs the serial group (tests/conftest.py SERIAL: live
# measurement and root tracing, one at a time) on one worker and the other files, each whole,
# on the rest (conftest's pytest_xdist_make_scheduler);
# `make check` has no serial file.  TEST_JOBS=1 CHECK_JOBS=1 run everything in one process.
TEST_JOBS ?= 3
CHECK_JOBS ?= 2

# Two tiers.  `make check`: the unit, parser, statistics and fixture tests
# (tests/conftest.py, CHECK_TIER), without building the variants or tracing, for
# the edit-test loop.  `make test`: every test, after building everything; CI
# runs it (.ci/run).
# The test runs keep Python's bytecode even where PYTHONDONTWRITEBYTECODE is set: pytest then
# keeps each test file as it rewrote it for its asserts (tests/__pycache__, ignored by git) instead
# of rewriting all of them in every worker, every run (make check: 32 s against 36 s here).
# One OpenBLAS thread, as scripts/tw sets for itself: the test processes and the Python
# programs the tests start import numpy too, and each would spin a thread a CPU at import.
TEST_ENV := PYTHONDONTWRITEBYTECODE= OPENBLAS_NUM_THREADS=1
# The fast tier's temporary files go to a folder of its own (emptied when it starts): in the
# shared /tmp/pytest-of-USER, pytest keeps the three newest runs and deletes the oldest as a
# run ends, and after a `make test` that is a tree of some 25 000 files for `make check` to
# delete on its way out.
check: deps
	@$(MAKE) --no-print-directory venv TW_DEPS_CHECKED=1
	$(TEST_ENV) $(VPY) -m pytest -n $(CHECK_JOBS) --basetemp=$(BUILD)/pytest-check -m check tests $(PYTEST_ARGS)

# The set-up's steps run side by side (SETUP_JOBS, one per CPU): the venv waits on PyPI while
# the compilers build, and `make test` also builds the Go programs the tests trace
# (twtools.measure.goprog, into build/go-test: the costliest compile of the suite, which each
# worker that needed one did in turn while the tests ran).  Without Go there is none to build:
# the tests that need it say so.
SETUP_JOBS ?= $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
go-test:
	@$(PYTHON) -c 'import sys; sys.path.insert(0, "scripts"); from twtools.measure import goprog; \
	[goprog.build(a) for a in ("386", "amd64") if goprog.find_go()]' >/dev/null || \
	{ echo "timewrite: building the tests' Go programs failed (the tests that need them will say why)" >&2; true; }

test: test-deps
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) all venv go-test TW_DEPS_CHECKED=1
	$(TEST_ENV) $(VPY) -m pytest -n $(TEST_JOBS) tests $(PYTEST_ARGS)

report: deps
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) all venv TW_DEPS_CHECKED=1
	@# the field example's Go program is built with the rest (cached in build/go-test), so
	@# that the report's time is measuring, not compiling: 11 s cold on an AMD EPYC guest;
	@# without Go the stage says why
	@$(VPY) -c 'import sys; sys.path.insert(0, "scripts"); from twtools.measure import goprog; goprog.build()' || true
	$(VPY) scripts/tw run $(REPORT_ARGS)

bench: deps
	@$(MAKE) --no-print-directory all venv TW_DEPS_CHECKED=1
	$(VPY) scripts/tw bench --selfcheck $(BENCH_ARGS)
	$(VPY) scripts/tw bench --peers
	@$(MAKE) --no-print-directory bench-ab TW_DEPS_CHECKED=1

# What tw ab can detect: two builds of the 64-bit syscall stub that differ only in whether
# BENCH_AB_WORK multiplies before the entry wait for each other (TW_EXTRA_CHAIN=1 for B, 0
# for A): the same instructions' length, so the same layout, and a difference of a few
# cycles per call.  First the difference is calibrated with many rounds, then tw ab's default
# run is asked to find it BENCH_AB_REPEAT times, then tw ab's own A/A self-check (A against
# byte-identical fresh copies of itself, BENCH_AB_AA runs) counts the runs that called a
# difference against what chance allows, and fails the target when there are more.  Every
# tw ab run draws its own fresh copies of each side's binary (measure/ab.py): the same bytes
# cost about 1% more or less depending on where their file landed.  The directories' names
# are of one length: a program's path is on its stack, and shifts where the stack starts.
# What two chained multiplies cost depends on the CPU, hence the calibration.
BENCH_AB_WORK   ?= 2
BENCH_AB_REPEAT ?= 3
BENCH_AB_AA     ?= 20
BENCH_AB_A := $(BUILD)/ab-a
BENCH_AB_B := $(BUILD)/ab-b
TW_AB := $(VPY) scripts/tw ab --variants 64-syscall --ops null --build-a $(BENCH_AB_A)
bench-ab: deps
	@$(MAKE) --no-print-directory all venv TW_DEPS_CHECKED=1
	@$(MAKE) --no-print-directory BUILD=$(BENCH_AB_A) TW_EXTRA_WORK=$(BENCH_AB_WORK) TW_EXTRA_CHAIN=0 TW_DEPS_CHECKED=1 $(BENCH_AB_A)/syscost-64-syscall
	@$(MAKE) --no-print-directory BUILD=$(BENCH_AB_B) TW_EXTRA_WORK=$(BENCH_AB_WORK) TW_EXTRA_CHAIN=1 TW_DEPS_CHECKED=1 $(BENCH_AB_B)/syscost-64-syscall
	@echo "bench-ab: calibration, 2000 rounds: what waiting for $(BENCH_AB_WORK) multiplies costs per null call"
	$(TW_AB) --build-b $(BENCH_AB_B) --rounds 2000 --out $(BUILD)/bench-ab-calibration-$$$$
	@for i in $$(seq $(BENCH_AB_REPEAT)); do \
	  echo "bench-ab: detection $$i of $(BENCH_AB_REPEAT), tw ab's default run"; \
	  $(TW_AB) --build-b $(BENCH_AB_B) --out $(BUILD)/bench-ab-detection-$$$$-$$i || exit 1; done
	@echo "bench-ab: A/A, $(BENCH_AB_AA) runs of A against fresh copies of itself: no difference is the right answer"
	$(TW_AB) --selfcheck $(BENCH_AB_AA) --out $(BUILD)/bench-ab-same-$$$$

# The fleet view's scale benchmark: 1000 synthetic results directories from the atlas.
# FLEET_BIG=100000 adds the view of a database of that many synthetic digests (minutes).
bench-fleet: venv
	FLEET_BIG=$(FLEET_BIG) $(VPY) scripts/tw fleet --bench $(or $(FLEET_N),1000)

# The sweeps' benchmark: two back-to-back tw run --only doctor,variants,seed-sweep,tlpi-sweep
# and their cells compared (half-widths, overlap, move, fits' r2), each beside its target.
bench-sweeps: deps
	@$(MAKE) --no-print-directory all venv TW_DEPS_CHECKED=1
	$(VPY) scripts/tw sweep --selfcheck $(SWEEP_ARGS) --out $(BUILD)/bench-sweeps-$$$$

# What a run holds fixed: each factor varied on purpose in X Y X Y runs of a small matrix, and
# its effect on the undisturbed figure beside the same setting against itself (a few minutes).
bench-factors: deps
	@$(MAKE) --no-print-directory all venv TW_DEPS_CHECKED=1
	$(VPY) scripts/bench_factors.py --out $(BUILD)/bench-factors-$$$$

# tw ab --wall's own check (scripts/bench_walls.py; twtools/drivers/wallbench.py): root for
# the seccomp filters is not needed, libseccomp-dev is (make test installs it).
$(BUILD)/seccomp_ab: walls/seccomp_ab.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -std=gnu11 -Wall -Wextra $(LDFLAGS) -o $@ $< -lseccomp
bench-walls: deps
	@$(MAKE) --no-print-directory all venv $(BUILD)/seccomp_ab TW_DEPS_CHECKED=1
	$(VPY) scripts/bench_walls.py --out $(BUILD)/bench-walls-$$$$

# tw census's int 0x80 counts against four loops' own counts, read from their memory
# (scripts/bench_census.py; twtools/drivers/censusbench.py): root, nasm.  BENCH_ARGS passes
# options on (--beside-bench, --runs N, --seconds S).
bench-census: deps
	@$(MAKE) --no-print-directory all venv TW_DEPS_CHECKED=1
	$(VPY) scripts/bench_census.py --out $(BUILD)/bench-census-$$$$ $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) build-layout
distclean: clean
	rm -rf $(VENV)
