#!/bin/bash
# Installs the Debian packages nexar-pmpi needs to build, test and benchmark,
# when they are missing.  Needs root (or sudo) only when something is missing.
set -eu
packages=(
    g++ make autoconf automake libtool pkg-config   # build
    libopenmpi-dev openmpi-bin                       # MPI (mpicc, mpirun, libmpi)
    mpich libmpich-dev                               # the MPICH lane of the tests (mpicc.mpich, mpiexec.mpich)
    xz-utils libucx0 libhwloc15 libnuma1 libnl-3-200 libudev1
        libevent-core-2.1-7 libevent-pthreads-2.1-7  # the Open MPI 5 lane: unpacking its tarball, and what it runs on
    libucx-dev                                       # UCX (ucp)
    libgtest-dev                                     # unit tests
    libbenchmark-dev                                 # make bench
    gfortran                                         # Fortran tests
    gnuplot-nox                                      # the benchmark's --plot
    iproute2                                         # the simulated cluster (ip netns, tc)
    python3-mpi4py python3-numpy                     # bench/nexar-mpi4py-bench (for /usr/bin/python3)
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "install-deps: all packages present"; exit 0; }
echo "install-deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
