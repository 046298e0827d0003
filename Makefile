# ccl build. GNU make, no generator.
#
#   make                 libccl.so (versioned soname), libccl.a, ccl-perf
#   make run             build, then ccl-perf on local ranks (the README's first command)
#   make test            build everything and run the whole test suite
#   make install PREFIX=/usr/local
#   make clean
#   make MPI=1           ccl-perf shares the unique id through MPI when run under mpirun
#   make SANITIZE=address   build everything with AddressSanitizer (in build/address)
#   make CUDA=0          host-only library, even where nvcc exists (in build/nocuda)
#   make CUDA_ARCH="80 90"  GPU architectures compiled (SASS each, plus PTX of the highest)
#
# CUDA: when nvcc is found ($(CUDA_HOME)/bin/nvcc, else on PATH) the library
# also holds the device path (src/device/*.cu and the CUDA runtime, linked
# statically as NCCL does: libccl needs the driver at run time, and only
# when device buffers are used). A machine without a driver or GPU runs the
# host path unchanged.
#
# Sources are discovered by folder, so adding a file needs no edit here:
#   src/<layer>/*.c        -> the library
#   src/<layer>/*.cu       -> the library too, when CUDA=1 (nvcc)
#   perf/ccl_perf*.c       -> build/bin/ccl-perf
#   perf/mpi_bench.c       -> build/bin/mpi-bench (needs mpicc)
#   perf/memcpy_bench.c    -> build/bin/memcpy-bench
#   perf/net_bench.c       -> build/bin/net-bench (net plugin vs one TCP stream)
#   tests/unit/*.c         -> build/tests/unit/<name> (cmocka, may use internals)
#   tests/plugins/net_example.c -> build/tests/net-plugins/libccl-net-*.so
#                             (a third-party net plugin the unit tests load)
#   tests/sim/*.c          -> build/tests/sim/<name> (schedule simulator, internals)
#   tests/mp/*.c           -> build/tests/mp/<name> (multi-process, public API)
#   tests/mpi/*.c          -> build/tests/mpi/<name> (Open MPI cross-checks, mpicc)
#   tools/ccl_info.c       -> build/bin/ccl-info (prints the topology)
#   tests/gpu/*.c          -> build/tests/gpu/<name> (CUDA=1 only; run by tests/gpu/run.sh)

PREFIX   ?= /usr/local
SANITIZE ?=
MPI      ?= 0
CUDA_HOME ?= /usr/local/cuda
ifndef NVCC
NVCC     := $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
endif
# Sanitizer builds are host-only unless asked: AddressSanitizer's shadow
# memory and the CUDA driver's address reservations do not mix.
CUDA     ?= $(if $(SANITIZE),0,$(if $(NVCC),1,0))
CUDA_ARCH ?= 80 90
# Builds with other flags get their own folder, so switching never reuses
# objects compiled differently. CUDA=0 gets one where nvcc exists
# (elsewhere every build is host-only), and so does CUDA=1 in a sanitizer
# build.
BUILD    ?= build$(if $(SANITIZE),/$(SANITIZE))$(if $(filter 1,$(MPI)),/mpi)$(if $(SANITIZE),$(if $(filter 1,$(CUDA)),/cuda),$(if $(NVCC),$(if $(filter 0,$(CUDA)),/nocuda)))
CC       ?= cc
MPICC    ?= mpicc
OPT      ?= -O3

SOMAJOR := 0
VERSION := 0.1.0

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
               -fPIC -pthread -Iinclude -Isrc -fvisibility=hidden
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
LDFLAGS_SAN := -fsanitize=$(SANITIZE)
endif
ifeq ($(CUDA),1)
ifeq ($(NVCC),)
$(error CUDA=1 but no nvcc in $(CUDA_HOME)/bin or on PATH: set CUDA_HOME, or build host-only with CUDA=0)
endif
CUDA_ROOT := $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_ROOT)/lib64/libcudart_static.a \
                   $(CUDA_ROOT)/targets/*/lib/libcudart_static.a))))
ifeq ($(CUDA_LIBDIR),)
$(error CUDA=1 but $(CUDA_ROOT) has no libcudart_static.a)
endif
# SASS for every architecture of CUDA_ARCH, and PTX of the highest so that
# newer GPUs can compile it at load time.
CUDA_PTX := $(shell printf '%s\n' $(CUDA_ARCH) | sort -n | tail -n 1)
NVCC_GENCODE := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
# No C++ runtime in libccl: no exceptions, no guarded statics. The fatbin
# is left uncompressed so tests/gpu/check_fatbin.sh can list its kernels.
# -fmad=false: no a*b+c contracted into one rounding, so the kernels give
# the host path's bits (the same reduce_ops.h operators).
NVCC_FLAGS := -std=c++17 -O3 -g -fmad=false $(NVCC_GENCODE) -no-compress -Iinclude -Isrc -DCCL_HAVE_CUDA=1 \
              -Xcompiler -fPIC,-fvisibility=hidden,-fno-exceptions,-fno-threadsafe-statics,-Wall
CUDA_CFLAGS := -DCCL_HAVE_CUDA=1 -I$(CUDA_ROOT)/include
# cudart_static dlopens libcuda.so.1 when first used; it needs -ldl -lrt.
CUDA_LIBS := -L$(CUDA_LIBDIR) -lcudart_static
LIB_CU   := $(sort $(wildcard src/*/*.cu))
endif
# hwloc 2.x is required (src/topo); pkg-config finds a non-system install.
HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
HWLOC_LIBS   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
CFLAGS  := $(CFLAGS_BASE) $(CUDA_CFLAGS) $(HWLOC_CFLAGS) $(CFLAGS_EXTRA)
LDLIBS  := $(CUDA_LIBS) $(HWLOC_LIBS) -pthread -lrt -lm -ldl

LIB_SRC  := $(sort $(wildcard src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.cu.o)

LIB_SO   := $(BUILD)/lib/libccl.so.$(VERSION)
LIB_A    := $(BUILD)/lib/libccl.a

PERF_SRC := $(sort $(wildcard perf/ccl_perf*.c))
PERF_BIN := $(BUILD)/bin/ccl-perf
PERF_CFLAGS := $(CFLAGS)
PERF_CC := $(CC)
ifeq ($(MPI),1)
PERF_CC := $(MPICC)
PERF_CFLAGS += -DCCL_PERF_WITH_MPI=1
endif
ifeq ($(CUDA),1)
PERF_CFLAGS += -DCCL_PERF_WITH_CUDA=1
endif

UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
SIM_SRC  := $(sort $(wildcard tests/sim/*.c))
MP_SRC   := $(sort $(wildcard tests/mp/*.c))
MPI_SRC  := $(sort $(wildcard tests/mpi/*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
SIM_BIN  := $(SIM_SRC:tests/sim/%.c=$(BUILD)/tests/sim/%)
MP_BIN   := $(MP_SRC:tests/mp/%.c=$(BUILD)/tests/mp/%)
MPI_BIN  := $(MPI_SRC:tests/mpi/%.c=$(BUILD)/tests/mpi/%)
TEST_HELPERS := $(sort $(wildcard tests/common/*.c))
ifeq ($(CUDA),1)
NCCL_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_ROOT)/lib64/libnccl.so $(CUDA_ROOT)/lib/libnccl.so \
                   /usr/lib/x86_64-linux-gnu/libnccl.so))))
HAVE_NCCL := $(if $(and $(NCCL_LIBDIR),$(wildcard $(CUDA_ROOT)/include/nccl.h /usr/include/nccl.h)),1)
GPU_SRC  := $(filter-out $(if $(HAVE_NCCL),,tests/gpu/nccl_ref.c),$(sort $(wildcard tests/gpu/*.c)))
GPU_BIN  := $(GPU_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
endif

HAVE_MPICC := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
HAVE_CMOCKA := $(shell echo 'int main(void){return 0;}' | $(CC) -x c -include stdarg.h -include stddef.h -include setjmp.h -include cmocka.h - -lcmocka -o /dev/null 2>/dev/null && echo 1)

.PHONY: all lib perf tools tests run test run-tests install clean deps

all: lib perf tools

lib: $(LIB_SO) $(LIB_A)

$(BUILD)/obj/%.o: %.c | $(BUILD)/hwloc-ok
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# Checked when something is compiled, not when this file is read, so that
# `make deps` (which installs it) still runs on a machine without it.
$(BUILD)/hwloc-ok:
	@printf '#include <hwloc.h>\nint main(void) { hwloc_topology_t t; return hwloc_topology_init(&t); }\n' | \
	    $(CC) $(HWLOC_CFLAGS) -x c - -o /dev/null $(HWLOC_LIBS) 2>/dev/null || { \
	    echo "error: ccl needs hwloc 2.x (hwloc.h and libhwloc): install libhwloc-dev (Debian/Ubuntu)," >&2; \
	    echo "       hwloc-devel (Fedora/RHEL), or run 'make deps'; a custom install is found by pkg-config" >&2; \
	    exit 1; }
	@mkdir -p $(dir $@) && touch $@

$(BUILD)/obj/%.cu.o: %.cu | $(BUILD)/hwloc-ok
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# --exclude-libs: the CUDA runtime inside libccl stays private, so it never
# stands in for the application's own libcudart.
$(LIB_SO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libccl.so.$(SOMAJOR) -Wl,--no-undefined -Wl,--exclude-libs,ALL $(LDFLAGS_SAN) \
	    -o $@ $^ $(LDLIBS)
	ln -sf libccl.so.$(VERSION) $(BUILD)/lib/libccl.so.$(SOMAJOR)
	ln -sf libccl.so.$(SOMAJOR) $(BUILD)/lib/libccl.so

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# Binaries link the static library so they run from the build tree without
# LD_LIBRARY_PATH; installed users link either.
perf: $(PERF_BIN)
$(PERF_BIN): $(PERF_SRC) $(wildcard perf/ccl_perf*.h) $(LIB_A) include/ccl.h src/core/params.def
	@mkdir -p $(dir $@)
	$(PERF_CC) $(PERF_CFLAGS) $(LDFLAGS_SAN) -o $@ $(PERF_SRC) $(LIB_A) $(LDLIBS)

tools: $(BUILD)/bin/memcpy-bench $(if $(HAVE_MPICC),$(BUILD)/bin/mpi-bench)
$(BUILD)/bin/memcpy-bench: perf/memcpy_bench.c perf/bench_size.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
$(BUILD)/bin/mpi-bench: perf/mpi_bench.c perf/bench_size.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -o $@ $< $(LDLIBS)
# reduce-bench (perf/reduce_bench.c) times the library's host reduction
# kernels at each SIMD level against memcpy.
tools: $(BUILD)/bin/reduce-bench
$(BUILD)/bin/reduce-bench: perf/reduce_bench.c perf/bench_size.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# ccl-info (tools/ccl_info.c) prints the topology of this machine or of
# CCL_TOPO_FILE without running a job.
tools: $(BUILD)/bin/ccl-info
$(BUILD)/bin/ccl-info: tools/ccl_info.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# net-bench (perf/net_bench.c): the net plugin's throughput between two
# processes against one plain TCP stream in the same run.
tools: $(BUILD)/bin/net-bench
$(BUILD)/bin/net-bench: perf/net_bench.c perf/bench_size.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

tests: lib $(if $(HAVE_CMOCKA),$(UNIT_BIN) $(NET_PLUGINS)) $(SIM_BIN) $(MP_BIN) $(if $(HAVE_MPICC),$(MPI_BIN)) \
       $(GPU_BIN)

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) -lcmocka $(LDLIBS)
# Net plugins for test_net_plugin, outside tests/unit so run_all.sh does
# not take them for tests: the example plugin, and two builds of it that
# ccl must refuse (a wrong version field; only a v2 symbol).
NET_PLUGIN_DIR := $(BUILD)/tests/net-plugins
NET_PLUGINS := $(NET_PLUGIN_DIR)/libccl-net-example.so $(NET_PLUGIN_DIR)/libccl-net-badversion.so \
               $(NET_PLUGIN_DIR)/libccl-net-onlyv2.so
$(BUILD)/tests/unit/test_net_plugin: | $(NET_PLUGINS)
$(NET_PLUGIN_DIR)/libccl-net-example.so: NET_EXAMPLE_FLAGS :=
$(NET_PLUGIN_DIR)/libccl-net-badversion.so: NET_EXAMPLE_FLAGS := -DNET_EXAMPLE_VERSION=2
$(NET_PLUGIN_DIR)/libccl-net-onlyv2.so: NET_EXAMPLE_FLAGS := -DNET_EXAMPLE_ONLY_V2
$(NET_PLUGINS): tests/plugins/net_example.c include/ccl_net.h include/ccl.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NET_EXAMPLE_FLAGS) -shared $(LDFLAGS_SAN) -o $@ $< -pthread
$(BUILD)/tests/sim/%: tests/sim/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
$(BUILD)/tests/mp/%: tests/mp/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
# GPU programs (tests/gpu/run.sh runs them where a GPU is): built with
# every CUDA build, so a change that breaks them fails `make tests` on
# machines without a GPU too. nccl_ref (NCCL's figures for comparison) is
# built only where NCCL is installed beside CUDA.
$(BUILD)/tests/gpu/%: tests/gpu/%.c tests/gpu/gpu_test.h $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
$(BUILD)/tests/gpu/nccl_ref: tests/gpu/nccl_ref.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl $(LDLIBS)
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)

# Installs missing Debian packages when root, or names them otherwise.
# Dependencies first, then a fresh make, so HAVE_MPICC / HAVE_CMOCKA see
# what deps.sh just installed.
deps:
	@bash scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(PERF_BIN) -b 8 -e 64M -f 4 -c 1 -C allreduce
	$(PERF_BIN) -b 8 -e 64M -f 4 -c 1 -C allgather

test: deps
	@$(MAKE) --no-print-directory all tests
	@$(MAKE) --no-print-directory run-tests

run-tests:
	@BUILD=$(BUILD) HAVE_MPICC=$(HAVE_MPICC) HAVE_CMOCKA=$(HAVE_CMOCKA) CUDA=$(CUDA) CUDA_ARCH="$(CUDA_ARCH)" \
	    tests/run_all.sh

install: lib perf $(BUILD)/bin/ccl-info
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 0644 include/ccl.h include/ccl_net.h $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libccl.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libccl.so.$(SOMAJOR)
	ln -sf libccl.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libccl.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(PERF_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/bin/ccl-info $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@CUDA_LIBS@|$(if $(CUDA_LIBS), $(CUDA_LIBS))|' ccl.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ccl.pc

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d)
