# ccl build. GNU make, no generator.
#
#   make                 libccl.so (versioned soname), libccl.a, ccl-perf, libnccl.so.2 (docs/nccl.md)
#   make run             build, then ccl-perf on local ranks (the README's first command)
#   make test            build everything and run the whole test suite, plus a
#                        short AddressSanitizer pass (ASAN_PASS=0: without it)
#   make soak            1000 init/destroy cycles per way of making a comm (leak checks)
#   make install PREFIX=/usr/local
#   make clean
#   make MPI=1           ccl-perf shares the unique id through MPI when run under mpirun
#   make SANITIZE=address   build everything with AddressSanitizer (in build/address)
#   make fuzz            build the libFuzzer targets with clang, run each FUZZ_SECONDS (60)
#   make CUDA=0          host-only library, even where nvcc exists (in build/nocuda)
#   make LTO=0           no link-time optimisation (in build/nolto; sanitizer builds have none)
#   make CUDA_ARCH="80 90"  GPU architectures compiled (SASS each, plus PTX of the highest)
#   make CUDA=mock       the CUDA path against the mock GPU of tests/mock_cuda (in
#                        build/mockcuda; needs the CUDA headers only): docs/gpu.md
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
#   perf/page_probe.c      -> build/bin/page-probe (per-page costs after single copy)
#   perf/core_rtt.c        -> build/bin/core-rtt (where the vCPUs sit: a cache line's round trip)
#   tests/unit/*.c         -> build/tests/unit/<name> (cmocka, may use internals)
#   tests/plugins/net_example.c -> build/tests/net-plugins/libccl-net-*.so
#                             (a third-party net plugin the unit tests load;
#                             libccl-net-socket.so beside it is the built-in one)
#   tests/sim/*.c          -> build/tests/sim/<name> (schedule simulator, internals)
#   tests/mp/*.c           -> build/tests/mp/<name> (multi-process, public API)
#   tests/mpi/*.c          -> build/tests/mpi/<name> (Open MPI cross-checks, mpicc)
#   tests/cluster/*.c      -> build/tests/cluster/<name> (rank programs that the
#                             namespace-cluster scripts start; not tests themselves)
#   tools/ccl_info.c       -> build/bin/ccl-info (prints the topology)
#   tests/fuzz/fuzz_*.c    -> build/fuzz/bin/<name> (libFuzzer, clang only; `make fuzz`)
#   tests/gpu/*.c          -> build/tests/gpu/<name> (CUDA=1 only; run by tests/gpu/run.sh)
#   src/nccl/*.c           -> build/lib/libnccl.so.2, NCCL's ABI over ccl (not in libccl)
#   tests/nccl/*.c         -> build/tests/nccl/<name> (against NVIDIA's nccl.h, run by tests/nccl/run.sh)

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
BUILD    ?= build$(if $(SANITIZE),/$(SANITIZE),$(if $(filter 0,$(LTO)),/nolto))$(if $(filter 1,$(MPI)),/mpi)$(if $(SANITIZE),$(if $(filter 1,$(CUDA)),/cuda),$(if $(NVCC),$(if $(filter 0,$(CUDA)),/nocuda)))$(if $(filter mock,$(CUDA)),/mockcuda)
CC       ?= cc
MPICC    ?= mpicc
OPT      ?= -O3

SOMAJOR := 0
VERSION := 0.1.0

# Link-time optimisation: a small collective crosses a dozen files (entry,
# checks, tuner, executor, board), each step a call of a few instructions,
# and on these cores a 2-rank 8-byte broadcast is bound by those
# instructions: inlined across files it took 0.055 instead of 0.08 us
# (perf/RESULTS.md). The objects are fat (LTO bytecode and plain code), so
# libccl.a also links without LTO. libccl.so and ccl-perf are linked with
# it; tests and tools link the plain code (NO_LTO), as a non-LTO static
# user would: an LTO link of the whole library per test binary would
# multiply the build time by six.
# GCC only: its fat objects are what lets libccl.a link without LTO too.
CC_IS_GCC := $(shell $(CC) -v 2>&1 | grep -q '^gcc version' && echo 1)
LTO ?= $(if $(SANITIZE),0,$(if $(CC_IS_GCC),1,0))
ifeq ($(LTO),1)
LTO_FLAGS := -flto=auto -ffat-lto-objects
NO_LTO    := -fno-lto
endif

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE $(OPT) $(LTO_FLAGS) -g -Wall -Wextra -Wshadow -Wno-unused-parameter \
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
# CUDA=mock: the library compiled exactly as with CUDA=1 (same headers,
# CCL_HAVE_CUDA), but src/device/*.cu replaced by host kernels and
# libcudart_static by the mock runtime, both from tests/mock_cuda and
# linked into libccl as the real runtime is. The mock loads a stand-in
# libcuda.so.1 (MOCK_DRIVER) where the real runtime loads the driver, so
# ccl's "is the driver loaded?" sees a driver (docs/gpu.md, "The mock GPU").
ifeq ($(CUDA),mock)
CUDA_ROOT := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(NVCC)),$(CUDA_HOME))
ifeq ($(wildcard $(CUDA_ROOT)/include/cuda_runtime_api.h),)
$(error CUDA=mock needs the CUDA headers, and $(CUDA_ROOT)/include has no cuda_runtime_api.h: set CUDA_HOME)
endif
CUDA_CFLAGS := -DCCL_HAVE_CUDA=1 -I$(CUDA_ROOT)/include
MOCK_DRIVER := $(BUILD)/lib/mockdriver/libcuda.so.1
LIB_MOCK := $(filter-out tests/mock_cuda/libcuda_standin.c,$(sort $(wildcard tests/mock_cuda/*.c)))
$(BUILD)/obj/tests/mock_cuda/mock_runtime.o: CFLAGS += -DMOCKCUDA_DRIVER_PATH='"$(abspath $(MOCK_DRIVER))"'
endif
# hwloc 2.x is required (src/topo); pkg-config finds a non-system install.
HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
HWLOC_LIBS   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
CFLAGS  := $(CFLAGS_BASE) $(CUDA_CFLAGS) $(HWLOC_CFLAGS) $(CFLAGS_EXTRA)
LDLIBS  := $(CUDA_LIBS) $(HWLOC_LIBS) -pthread -lrt -lm -ldl

# src/nccl/ is a layer above the public API with a library of its own
# (libnccl.so.2, below), not part of libccl.
LIB_SRC  := $(sort $(filter-out src/nccl/%,$(wildcard src/*/*.c))) $(LIB_MOCK)
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
ifneq ($(filter 1 mock,$(CUDA)),)
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
CLUSTER_SRC := $(sort $(wildcard tests/cluster/*.c))
CLUSTER_BIN := $(CLUSTER_SRC:tests/cluster/%.c=$(BUILD)/tests/cluster/%)
NET_TEST_SRC := $(sort $(wildcard tests/net/*.c))
NET_TEST_BIN := $(NET_TEST_SRC:tests/net/%.c=$(BUILD)/tests/net/%)
TEST_HELPERS := $(sort $(wildcard tests/common/*.c))
ifeq ($(CUDA),1)
NCCL_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_ROOT)/lib64/libnccl.so $(CUDA_ROOT)/lib/libnccl.so \
                   /usr/lib/x86_64-linux-gnu/libnccl.so))))
HAVE_NCCL := $(if $(and $(NCCL_LIBDIR),$(wildcard $(CUDA_ROOT)/include/nccl.h /usr/include/nccl.h)),1)
endif
ifneq ($(filter 1 mock,$(CUDA)),)
GPU_SRC  := $(filter-out $(if $(HAVE_NCCL),,tests/gpu/nccl_ref.c),$(sort $(wildcard tests/gpu/*.c)))
GPU_BIN  := $(GPU_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
endif

HAVE_MPICC := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)
HAVE_CMOCKA := $(shell echo 'int main(void){return 0;}' | $(CC) -x c -include stdarg.h -include stddef.h -include setjmp.h -include cmocka.h - -lcmocka -o /dev/null 2>/dev/null && echo 1)

.PHONY: all lib perf tools tests run test run-tests soak install clean deps deps-rdma fuzz fuzz-build gpu-tests

all: lib perf tools

lib: $(LIB_SO) $(LIB_A) $(MOCK_DRIVER)

ifeq ($(CUDA),mock)
$(MOCK_DRIVER): tests/mock_cuda/libcuda_standin.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -Wl,-soname,libcuda.so.1 -o $@ $<
endif

# Objects depend on the compiler and flags they were made with: a change
# (LTO, OPT, CFLAGS_EXTRA) rebuilds them, rather than linking old objects
# into a library that looks new. The stamp is rewritten only when they differ.
FLAGS_STAMP := $(BUILD)/flags
FLAGS_NOW   := $(CC) $(CFLAGS)
ifneq ($(FLAGS_NOW),$(file <$(FLAGS_STAMP)))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
endif

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(BUILD)/hwloc-ok
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
	$(CC) -shared $(OPT) $(LTO_FLAGS) -Wl,-soname,libccl.so.$(SOMAJOR) -Wl,--no-undefined -Wl,--exclude-libs,ALL $(LDFLAGS_SAN) \
	    -o $@ $^ $(LDLIBS)
	ln -sf libccl.so.$(VERSION) $(BUILD)/lib/libccl.so.$(SOMAJOR)
	ln -sf libccl.so.$(SOMAJOR) $(BUILD)/lib/libccl.so

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# libnccl.so.2 (src/nccl/, docs/nccl.md): NCCL 2.28's ABI over ccl's public
# API, so programs built against NVIDIA's nccl.h run on ccl. libccl.a is
# linked into it: a drop-in is one file an application finds through
# LD_LIBRARY_PATH in place of NVIDIA's, with no libccl.so.0 to find beside
# it. The version script exports nccl* and pnccl* unversioned, as NVIDIA's
# library does, and hides the rest (ccl_*, the CUDA runtime).
NCCL_SRC := $(sort $(wildcard src/nccl/*.c))
NCCL_OBJ := $(NCCL_SRC:%.c=$(BUILD)/obj/%.o)
NCCL_SO  := $(BUILD)/lib/libnccl.so.2
lib: $(NCCL_SO)
$(NCCL_SO): $(NCCL_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	printf '{ global: nccl*; pnccl*; local: *; };\n' >$@.map
	$(CC) -shared $(OPT) $(NO_LTO) -Wl,-soname,libnccl.so.2 -Wl,--no-undefined -Wl,--exclude-libs,ALL \
	    -Wl,--version-script=$@.map $(LDFLAGS_SAN) -o $@ $(NCCL_OBJ) $(LIB_A) $(LDLIBS)
	ln -sf libnccl.so.2 $(BUILD)/lib/libnccl.so
# Tests of the ABI: compiled against NVIDIA's nccl.h (types and prototypes
# only; nothing of NVIDIA's is linked) and linked to ours, with an RPATH
# (not RUNPATH: LD_LIBRARY_PATH cannot put NVIDIA's library first) to
# build/lib. Built where CUDA's headers are.
NCCL_H_DIR := $(firstword $(patsubst %/nccl.h,%,$(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h)))
NCCL_TEST_SRC := $(sort $(wildcard tests/nccl/test_*.c))
NCCL_TEST_HELPERS := $(filter-out $(NCCL_TEST_SRC),$(sort $(wildcard tests/nccl/*.c)))
NCCL_TEST_BIN := $(if $(NCCL_H_DIR),$(NCCL_TEST_SRC:tests/nccl/%.c=$(BUILD)/tests/nccl/%))
tests: $(NCCL_TEST_BIN)
$(BUILD)/tests/nccl/%: tests/nccl/%.c $(NCCL_TEST_HELPERS) $(wildcard tests/nccl/*.h) $(NCCL_SO)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Wno-unused-parameter -pthread -I$(NCCL_H_DIR) \
	    -I$(CUDA_HOME)/include $(filter -fsanitize=%,$(CFLAGS)) $(LDFLAGS_SAN) -o $@ $< $(NCCL_TEST_HELPERS) \
	    -L$(BUILD)/lib -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN/../../lib' -lnccl -lm

# Binaries link the static library so they run from the build tree without
# LD_LIBRARY_PATH; installed users link either.
perf: $(PERF_BIN)
$(PERF_BIN): $(PERF_SRC) $(wildcard perf/ccl_perf*.h) $(LIB_A) include/ccl.h src/base/params.def
	@mkdir -p $(dir $@)
	$(PERF_CC) $(PERF_CFLAGS) $(LDFLAGS_SAN) -o $@ $(PERF_SRC) $(LIB_A) $(LDLIBS)

tools: $(BUILD)/bin/memcpy-bench $(if $(HAVE_MPICC),$(BUILD)/bin/mpi-bench)
$(BUILD)/bin/memcpy-bench: perf/memcpy_bench.c perf/bench_size.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -o $@ $< $(LDLIBS)
$(BUILD)/bin/mpi-bench: perf/mpi_bench.c perf/bench_size.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) $(NO_LTO) -o $@ $< $(LDLIBS)
# reduce-bench (perf/reduce_bench.c) times the library's host reduction
# kernels at each SIMD level against memcpy.
tools: $(BUILD)/bin/reduce-bench
$(BUILD)/bin/reduce-bench: perf/reduce_bench.c perf/bench_size.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# ccl-info (tools/ccl_info.c) prints the topology of this machine or of
# CCL_TOPO_FILE without running a job.
tools: $(BUILD)/bin/ccl-info
$(BUILD)/bin/ccl-info: tools/ccl_info.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# page-probe (perf/page_probe.c): what a rank pays per page of its own
# buffers after single-copy collectives (perf/RESULTS.md).
tools: $(BUILD)/bin/page-probe
$(BUILD)/bin/page-probe: perf/page_probe.c perf/bench_time.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# core-rtt (perf/core_rtt.c): a cache line's round trip between two CPUs,
# which tells where the hypervisor put the vCPUs (perf/compare.sh records it).
tools: $(BUILD)/bin/core-rtt
$(BUILD)/bin/core-rtt: perf/core_rtt.c perf/bench_time.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -o $@ $<

# net-bench (perf/net_bench.c): the net plugin's throughput between two
# processes against one plain TCP stream in the same run.
tools: $(BUILD)/bin/net-bench
$(BUILD)/bin/net-bench: perf/net_bench.c perf/bench_size.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

tests: lib $(if $(HAVE_CMOCKA),$(UNIT_BIN) $(NET_PLUGINS)) $(SIM_BIN) $(MP_BIN) $(if $(HAVE_MPICC),$(MPI_BIN)) \
       $(CLUSTER_BIN) $(NET_TEST_BIN) \
       $(GPU_BIN)
# What tests/gpu/run.sh runs, and no more (its --mock build, which also
# runs test_cuda_rt's refusals with the mock's driver or devices taken away).
gpu-tests: lib perf $(GPU_BIN) $(if $(and $(filter mock,$(CUDA)),$(HAVE_CMOCKA)),$(BUILD)/tests/unit/test_cuda_rt)

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) -lcmocka $(LDLIBS)
# Net plugins for test_net_plugin, outside tests/unit so run_all.sh does
# not take them for tests: the example plugin as v1 and as v2, two builds
# of it that ccl must refuse (a wrong version field; only a v3 symbol), and
# the built-in socket plugin as an external one.
NET_PLUGIN_DIR := $(BUILD)/tests/net-plugins
NET_PLUGINS := $(NET_PLUGIN_DIR)/libccl-net-example.so $(NET_PLUGIN_DIR)/libccl-net-example2.so \
               $(NET_PLUGIN_DIR)/libccl-net-badversion.so $(NET_PLUGIN_DIR)/libccl-net-onlyv3.so
$(BUILD)/tests/unit/test_net_plugin: | $(NET_PLUGINS) $(NET_PLUGIN_DIR)/libccl-net-socket.so
$(NET_PLUGIN_DIR)/libccl-net-example.so: NET_EXAMPLE_FLAGS :=
$(NET_PLUGIN_DIR)/libccl-net-example2.so: NET_EXAMPLE_FLAGS := -DNET_EXAMPLE_V2
$(NET_PLUGIN_DIR)/libccl-net-badversion.so: NET_EXAMPLE_FLAGS := -DNET_EXAMPLE_VERSION=3
$(NET_PLUGIN_DIR)/libccl-net-onlyv3.so: NET_EXAMPLE_FLAGS := -DNET_EXAMPLE_ONLY_V3
$(NET_PLUGINS): tests/plugins/net_example.c include/ccl_net.h include/ccl.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(NET_EXAMPLE_FLAGS) -shared $(LDFLAGS_SAN) -o $@ $< -pthread
# libccl-net-socket.so: the built-in TCP plugin as an external one, from the
# same sources plus the ground floor they use (src/base, bootstrap/socket.c),
# exporting only ccl_net_plugin_v2 (the version script hides the rest);
# CCL_NET_PLUGIN=<path> loads it.
NET_SOCKET_SO_SRC := src/transport/net_socket.c src/transport/net_socket_conn.c src/transport/net_socket_io.c src/transport/net_socket_io_crc.c src/bootstrap/socket.c \
                     src/base/crc32c.c src/base/err.c src/base/log.c src/base/param.c src/base/wait.c
tests: $(NET_PLUGIN_DIR)/libccl-net-socket.so
$(NET_PLUGIN_DIR)/libccl-net-socket.so: $(NET_SOCKET_SO_SRC) $(wildcard src/base/*.h src/base/*.def src/transport/net_socket*.h) \
                                        src/bootstrap/socket.h include/ccl_net.h include/ccl.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	printf '{ global: ccl_net_plugin_v2; local: *; };\n' >$@.map
	$(CC) $(CFLAGS) $(NO_LTO) -DNET_SOCKET_PLUGIN_SO -shared -Wl,--no-undefined -Wl,--version-script=$@.map \
	    $(LDFLAGS_SAN) -o $@ $(NET_SOCKET_SO_SRC) -pthread -lrt -ldl
$(BUILD)/tests/sim/%: tests/sim/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
$(BUILD)/tests/mp/%: tests/mp/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
# GPU programs (tests/gpu/run.sh runs them where a GPU is): built with
# every CUDA build, so a change that breaks them fails `make tests` on
# machines without a GPU too. nccl_ref (NCCL's figures for comparison) is
# built only where NCCL is installed beside CUDA.
$(BUILD)/tests/gpu/%: tests/gpu/%.c tests/gpu/gpu_test.h $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
$(BUILD)/tests/gpu/nccl_ref: tests/gpu/nccl_ref.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) -o $@ $< -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl $(LDLIBS)
$(BUILD)/tests/mpi/%: tests/mpi/%.c $(LIB_A) $(TEST_HELPERS)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) $(NO_LTO) -Itests/common $(LDFLAGS_SAN) -o $@ $< $(TEST_HELPERS) $(LIB_A) $(LDLIBS)
$(BUILD)/tests/cluster/%: tests/cluster/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)
$(BUILD)/tests/net/%: tests/net/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(NO_LTO) $(LDFLAGS_SAN) -o $@ $< $(LIB_A) $(LDLIBS)

# Fuzzing: every wire parser has a libFuzzer target in tests/fuzz/. They
# need clang (libFuzzer ships with it), so they have their own objects in
# $(BUILD)/fuzz, built with ASan and UBSan; a machine without clang builds
# and tests everything else. `make fuzz` runs each target FUZZ_SECONDS;
# `make test` runs each over its seed corpus for a few seconds.
FUZZ_CC      ?= $(firstword $(shell command -v clang clang-14 clang-15 clang-16 2>/dev/null))
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/bin/%)
# The parsers live in these layers; the rest of the library is not needed
# (an undefined symbol at link time means a parser grew a new dependency).
FUZZ_LIB_SRC := $(sort $(wildcard src/bootstrap/*.c src/transport/*.c)) \
                $(addprefix src/base/,crc32c.c err.c log.c mem.c param.c wait.c)
FUZZ_OBJ     := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := $(filter-out -O3 -fsanitize=% $(LTO_FLAGS),$(CFLAGS)) -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link
# Recursive: only `make fuzz` and `make test` pay for the probe.
HAVE_FUZZ     = $(if $(FUZZ_CC),$(shell echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' | \
                  $(FUZZ_CC) -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null && echo 1))

$(FUZZ_DIR)/obj/%.o: %.c | $(BUILD)/hwloc-ok
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(FUZZ_DIR)/libccl-fuzz.a: $(FUZZ_OBJ)
	rm -f $@
	ar rcs $@ $^
$(FUZZ_DIR)/bin/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(FUZZ_DIR)/libccl-fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libccl-fuzz.a $(LDLIBS)

fuzz-build:
	@if [ -z "$(HAVE_FUZZ)" ]; then \
	    echo "error: the fuzz targets need clang with libFuzzer (-fsanitize=fuzzer), and$(if $(FUZZ_CC), $(FUZZ_CC) cannot link one, no clang was found):" >&2; \
	    echo "       install clang (Debian/Ubuntu: apt-get install clang), or set FUZZ_CC=/path/to/clang" >&2; \
	    exit 1; fi
	@$(MAKE) --no-print-directory $(FUZZ_BIN)

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

# Installs missing Debian packages when root, or names them otherwise.
# Dependencies first, then a fresh make, so HAVE_MPICC / HAVE_CMOCKA see
# what deps.sh just installed.
deps:
	@bash scripts/deps.sh

# What the soft-RoCE VM tests need (qemu, a kernel with rdma_rxe, rdma-core,
# perftest): make test installs it, make run does not (tests/rdma/deps.sh).
deps-rdma:
	@bash tests/rdma/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(PERF_BIN) -b 8 -e 64M -f 4 -c 1 -C allreduce
	$(PERF_BIN) -b 8 -e 64M -f 4 -c 1 -C allgather

# The AddressSanitizer pass of a plain `make test`: the library and these
# multi-process tests built with -fsanitize=address into ASAN_BUILD (the
# folder `make SANITIZE=address` uses, so the two share objects), run by
# run_all.sh with LeakSanitizer on (peer death and abort, init/destroy
# cycles, every collective on a few small counts and on single-copy ones
# through ccl_mem_alloc buffers). A sanitizer build runs everything under
# its sanitizer instead.
ASAN_PASS  ?= 1
ASAN_TESTS := test_fault test_cycles test_lifecycle test_colls test_allgather test_allreduce
ASAN_BUILD := $(if $(SANITIZE),,$(if $(filter 1,$(ASAN_PASS)),$(BUILD)/address))

test: deps deps-rdma
	@$(MAKE) --no-print-directory all tests $(if $(HAVE_FUZZ),fuzz-build)
	$(if $(ASAN_BUILD),@$(MAKE) --no-print-directory SANITIZE=address BUILD=$(ASAN_BUILD) \
	    $(ASAN_TESTS:%=$(ASAN_BUILD)/tests/mp/%))
	@$(MAKE) --no-print-directory run-tests

run-tests:
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) HAVE_MPICC=$(HAVE_MPICC) HAVE_CMOCKA=$(HAVE_CMOCKA) HAVE_FUZZ=$(HAVE_FUZZ) \
	    CUDA=$(CUDA) CUDA_ARCH="$(CUDA_ARCH)" \
	    tests/run_all.sh

# test_cycles at full length (make test runs 100 cycles per case): 1000
# init / allreduce / destroy cycles on 4 shm ranks, on 2+2 ranks on fake
# nodes, and with ccl_comm_init_all, checking that no fd, thread, mapping,
# heap byte or /dev/shm entry piles up. About 3 minutes on the quiet 2-core
# VM (net 106 s, shm 30 s, init_all 34 s), mostly first-touch page faults
# of each new comm's FIFOs; several times that when the machine is busy.
# `make soak SANITIZE=address` runs it under AddressSanitizer.
soak: tests
	CCL_TEST_CYCLES=$${CCL_TEST_CYCLES:-1000} $(BUILD)/tests/mp/test_cycles

# The installed libccl.a loses its LTO bytecode (as Debian's packaging
# strips it): a -flto link with another GCC version would refuse the
# archive, and its plain code is the same library. libccl.so keeps what
# LTO made of it, and the build tree's libccl.a keeps both for ccl-perf.
LTO_STRIP := --remove-section='.gnu.lto_*' --remove-section='.gnu.debuglto_*' -N __gnu_lto_v1 -N __gnu_lto_slim
# The Python package (python/ccl, docs/python.md) goes where Debian's
# python3 looks under PREFIX (lib/python3.X/dist-packages); skipped without it.
PYTHON3 ?= /usr/bin/python3
PYTHON_SITE ?= $(shell $(PYTHON3) -c 'import sys; print("$(PREFIX)/lib/python%d.%d/dist-packages" % sys.version_info[:2])' 2>/dev/null)

install: lib perf $(BUILD)/bin/ccl-info
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 0644 include/ccl.h include/ccl_net.h $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libccl.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libccl.so.$(SOMAJOR)
	ln -sf libccl.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libccl.so
	install -m 0644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	$(if $(LTO_FLAGS),strip $(LTO_STRIP) $(DESTDIR)$(PREFIX)/lib/libccl.a)
	install -m 0755 $(PERF_BIN) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/bin/ccl-info $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@CUDA_LIBS@|$(if $(CUDA_LIBS), $(CUDA_LIBS))|' ccl.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ccl.pc
	install -m 0755 $(NCCL_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libnccl.so.2 $(DESTDIR)$(PREFIX)/lib/libnccl.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' ccl-nccl.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ccl-nccl.pc
	$(if $(PYTHON_SITE),install -d $(DESTDIR)$(PYTHON_SITE)/ccl)
	$(if $(PYTHON_SITE),install -m 0644 python/ccl/*.py $(DESTDIR)$(PYTHON_SITE)/ccl/)

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(NCCL_OBJ:.o=.d) $(wildcard $(FUZZ_DIR)/obj/src/*/*.d)
