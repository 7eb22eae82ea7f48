#!/bin/bash
# GPU checks on a machine that has a CUDA GPU but no MPI or UCX installed
# (e.g. a lent accelerator box).  Two steps:
#
#   here (Debian 12, built tree):  test/gpu/run-on-device.sh --prepare
#       downloads the runtime .debs of Debian's Open MPI and UCX into .debs/
#   there (same tree, .debs/ and the build carried along):
#       test/gpu/run-on-device.sh [OUTDIR]
#       unpacks the .debs into a private root, then runs the GPU kernel
#       tests, the MPI tests with device buffers at 2 and 4 ranks, and the
#       benchmark with device buffers; logs go to OUTDIR (default: .).
set -u
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --prepare ]; then
    set -e
    mkdir -p .debs
    # The runtime closure of Open MPI and UCX, without the base system
    # (libc and friends must come from the machine itself).
    pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
               --no-replaces --no-enhances openmpi-bin libopenmpi3 libucx0 ucx-utils |
           grep -E '^[a-z0-9]' | sort -u |
           grep -vE '^(libc6|libc-bin|libgcc-s1|libstdc\+\+6|gcc-.*-base|debconf.*|dpkg|perl.*|libperl.*|tar|coreutils|bash|dash|base-files|sensible-utils|libcrypt1|zlib1g|openssh-client|libssl3|libselinux1|libpcre2.*|libgfortran5|gfortran.*|libquadmath0|libgomp1|libcap2|libsystemd0|libudev1|libgcrypt20|libgpg-error0|liblzma5|libzstd1|liblz4-1|libbz2-1.0|adduser|passwd|libaudit.*|libsemanage.*|libsepol2|libpam.*|libdb5.3|libtinfo6|libedit2|libbsd0|libmd0|libkrb5.*|libgssapi.*|libk5crypto3|libkeyutils1|libcom-err2|libfido2-1|libcbor0.10|debianutils|mawk|init-system-helpers|cpp.*|binutils.*|libx11.*|libxcb.*|libxau6|libxdmcp6|libxext6|libxnvctrl0|ocl-icd.*|libcap-ng0|lsb-base|sysvinit-utils|procps|libprocps8|libncursesw6|libsmartcols1|libmount1|libblkid1|libuuid1|findutils|grep|sed|gzip|diffutils|hostname|login|util-linux.*|ncurses-bin|libsqlite3-0|libgmp10|libisl23|libmpc3|libmpfr6|libjansson4|libctf.*|libgprofng0|libsframe0)$')
    (cd .debs && apt-get download $pkgs)
    echo "run-on-device: $(ls .debs | wc -l) packages in .debs ($(du -sh .debs | cut -f1))"
    exit 0
fi
out=${1:-.}
mkdir -p "$out"
root=/tmp/nexar-debroot
mkdir -p "$root"
for d in .debs/*.deb; do dpkg -x "$d" "$root"; done
ml=$root/usr/lib/x86_64-linux-gnu
export PATH="$root/usr/bin:$PATH"
export LD_LIBRARY_PATH="$ml:$ml/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$root/usr" OPAL_LIBDIR="$ml/openmpi/lib" OPAL_DATADIR="$root/usr/share/openmpi"
export OPAL_PKGDATADIR="$root/usr/share/openmpi" OMPI_MCA_plm_rsh_agent=false
export UCX_MODULE_DIR="$ml/ucx"
export MPIRUN="$root/usr/bin/mpirun.openmpi" NEXAR_BUILDDIR="$PWD" NEXAR_CUDA_PLUGIN="$PWD/.libs/libnexar_pmpi_cuda.so"
export PMIX_MCA_pcompress_base_silence_warning=1
nvidia-smi -L 2>&1 | tee "$out/gpu.txt"
"$MPIRUN" --version 2>&1 | head -1
ucx_info -v 2>&1 | head -1
rc=0
echo "== GPU kernel tests"
test/gpu/nexar_gpu_tests 2>&1 | tee "$out/gpu-kernels.log" | tail -n 15; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "== MPI tests with device buffers"
test/gpu/run-gpu-mpi-tests.sh 2>&1 | tee "$out/gpu-mpi.log" | tail -n 30; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "== benchmark, device buffers, 2 ranks"
NEXAR_HOST_BUFFERS=0 bench/nexar-osu -np 2 --malloc default -d cuda -c -m 1048576:268435456 --csv "$out/bench-cuda.csv" \
    2>&1 | tee "$out/bench-cuda.log"
echo "run-on-device: $([ $rc = 0 ] && echo all GPU tests passed || echo GPU TESTS FAILED)"
exit $rc
