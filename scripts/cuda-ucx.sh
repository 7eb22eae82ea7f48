#!/bin/bash
# cuda-ucx.sh: a UCX built with CUDA, as GPU clusters have it (HPC-X, a
# Spack ucx+cuda), for nexar's direct device path: UCX moves device memory
# itself (cuda_copy and cuda_ipc inside a node, GPUDirect RDMA between
# nodes).  Debian's UCX (1.13) has no CUDA.  nexar as built against
# Debian's UCX runs on this one through LD_LIBRARY_PATH (UCX keeps its ucp
# ABI within 1.x); nothing is rebuilt.
#
#   scripts/cuda-ucx.sh [--from-source] [--prefix]
#
# Puts UCX 1.20.1 built with CUDA into build/ucx-cuda/ once (later runs
# find it there) and prints how to run on it.  By default from the prebuilt,
# relocatable copy beside the checkout (../shared/ucx/ucx-*-cuda-*.tar.xz;
# NEXAR_CUDA_UCX_TARBALL names another).  --from-source builds it from
# ../shared/ucx/ucx-*-src.tar.xz (NEXAR_CUDA_UCX_SOURCE names another) as
# that copy was built: the CUDA toolkit of /usr/local/cuda (CUDA_HOME), and
# NVML's header and library from Debian's non-free libnvidia-ml-dev, which it
# installs (a GPU is not needed: the toolkit's stub libcuda serves the
# link); about 15 minutes on 2 cores, in build/ucx-cuda-src/.
# --prefix prints only the folder (for scripts).
#
# NEXAR_CUDA_UCX_DIR: where to put it (default build/ucx-cuda of this tree).
# Exit status 77, with one line saying why, where neither the prebuilt copy
# nor the source can be found.
#
# Run on it:
#   LD_LIBRARY_PATH=build/ucx-cuda/lib:$LD_LIBRARY_PATH UCX_MODULE_DIR=build/ucx-cuda/lib/ucx mpirun ...
# On a machine with a GPU and its driver, `nexar-info -p` then says
# ucx_moves_cuda=yes and device_path=direct (CUDA-aware UCX); without one
# UCX skips its CUDA transport and carries host memory as any UCX does.
set -eu -o pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
from_source=0 prefix_only=0
for a in "$@"; do
    case $a in
        --from-source) from_source=1 ;;
        --prefix) prefix_only=1 ;;
        -h|--help) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) echo "cuda-ucx: unknown option $a (see --help)" >&2; exit 2 ;;
    esac
done
dest=${NEXAR_CUDA_UCX_DIR:-$top/build/ucx-cuda}
case $dest in /*) ;; *) dest=$PWD/$dest ;; esac
say() { [ "$prefix_only" = 1 ] && echo "cuda-ucx: $*" >&2 || echo "cuda-ucx: $*"; }
shared=$(cd "$top/.." && pwd)/shared/ucx
first() { local f; for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 0; }
tarball=${NEXAR_CUDA_UCX_TARBALL:-$(first "$shared"/ucx-*-cuda-*.tar.xz)}
source_tar=${NEXAR_CUDA_UCX_SOURCE:-$(first "$shared"/ucx-*-src.tar.xz)}

# One run at a time puts a copy in place (test scripts may ask at once).
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
tmp=""
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

# What is in $dest, and from what: the marker names its origin.
want=$([ "$from_source" = 1 ] && echo "source $(basename "${source_tar:-none}")" || echo "prebuilt $(basename "${tarball:-none}")")
if [ -x "$dest/bin/ucx_info" ] && [ -f "$dest/lib/libucp.so.0" ] && [ "$(cat "$dest/.nexar-origin" 2>/dev/null)" = "$want" ]; then
    :
elif [ "$from_source" = 0 ]; then
    [ -n "$tarball" ] && [ -f "$tarball" ] ||
        { say "no prebuilt UCX with CUDA: looked for $shared/ucx-*-cuda-*.tar.xz (NEXAR_CUDA_UCX_TARBALL names one; --from-source builds one)"; exit 77; }
    # Unpacked beside and moved into place whole: a run that stops half
    # way leaves no half copy that looks done.
    tmp=$(mktemp -d "$dest.tmp.XXXXXX")
    tar -xJf "$tarball" -C "$tmp" --strip-components=1
    echo "$want" >"$tmp/.nexar-origin"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    tmp=""
else
    [ -n "$source_tar" ] && [ -f "$source_tar" ] ||
        { say "no UCX source: looked for $shared/ucx-*-src.tar.xz (NEXAR_CUDA_UCX_SOURCE names one)"; exit 77; }
    cuda=${CUDA_HOME:-/usr/local/cuda}
    [ -x "$cuda/bin/nvcc" ] || { echo "cuda-ucx: no CUDA toolkit in $cuda (CUDA_HOME)" >&2; exit 1; }
    # UCX's configure wants NVML, which the toolkit lacks: Debian's non-free
    # libnvidia-ml-dev (a copy of the Debian source entry with non-free added).
    if ! dpkg-query -W -f='${Status}' libnvidia-ml-dev 2>/dev/null | grep -q "install ok installed"; then
        sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
        list=/etc/apt/sources.list.d/nexar-non-free.sources
        if [ ! -f "$list" ]; then
            base=$( (ls /etc/apt/sources.list.d/debian.sources 2>/dev/null || true) | head -n 1)
            [ -n "$base" ] || { echo "cuda-ucx: no /etc/apt/sources.list.d/debian.sources to copy for non-free" >&2; exit 1; }
            sed 's/^Components:.*/Components: main contrib non-free non-free-firmware/' "$base" | "${sudo[@]}" tee "$list" >/dev/null
        fi
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends libnvidia-ml-dev
    fi
    work=$top/build/ucx-cuda-src
    rm -rf "$work" "$dest"
    mkdir -p "$work"
    tar -xJf "$source_tar" -C "$work" --strip-components=1
    say "building $(basename "$source_tar") with CUDA from $cuda into $dest (log: $work/build.log)"
    (cd "$work" && ./autogen.sh &&
        ./configure --prefix="$dest" --with-cuda="$cuda" --without-go --without-java --disable-logging \
            --disable-debug --disable-assertions --disable-params-check &&
        make -j"$(nproc)" && make install) >"$work/build.log" 2>&1 ||
        { tail -n 20 "$work/build.log" >&2; echo "cuda-ucx: the build failed (log: $work/build.log)" >&2; exit 1; }
    echo "$want" >"$dest/.nexar-origin"
fi

version=$( (LD_LIBRARY_PATH="$dest/lib" UCX_MODULE_DIR="$dest/lib/ucx" "$dest/bin/ucx_info" -v 2>/dev/null || true) |
          sed -n 's/.*[Ll]ibrary version: *\([0-9.]*\).*/\1/p' | head -n 1)
[ -n "$version" ] || { echo "cuda-ucx: $dest/bin/ucx_info -v does not run" >&2; exit 1; }
grep -q "HAVE_CUDA  *1" <(LD_LIBRARY_PATH="$dest/lib" "$dest/bin/ucx_info" -b 2>/dev/null || true) ||
    [ -f "$dest/lib/ucx/libuct_cuda.so.0" ] || { echo "cuda-ucx: $dest has no CUDA transport" >&2; exit 1; }
if [ "$prefix_only" = 1 ]; then echo "$dest"; exit 0; fi
say "UCX $version with CUDA in $dest ($want)"
say "run on it: LD_LIBRARY_PATH=$dest/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} UCX_MODULE_DIR=$dest/lib/ucx mpirun ..."
