#!/bin/bash
# `make install` into a staging directory installs the library, the header
# and a pkg-config file with which a program compiles, links and runs.
set -u
. "$(dirname "$0")/../lib.sh"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make -s -C "$NEXAR_BUILDDIR" install DESTDIR="$stage" >"$stage.log" 2>&1 || { cat "$stage.log"; fail "make install failed"; }
rm -f "$stage.log"
prefix=$(sed -n 's/^prefix=//p' "$NEXAR_BUILDDIR/nexar_pmpi.pc")
libdir=$(sed -n 's/^libdir=//p' "$NEXAR_BUILDDIR/nexar_pmpi.pc" | sed "s|\${exec_prefix}|$prefix|")
for f in "$libdir/libnexar_pmpi.so" "$prefix/include/nexar/nexar.h" "$libdir/pkgconfig/nexar_pmpi.pc" \
         "$prefix/bin/nexar_osu_allreduce" "$prefix/bin/nexar-osu" "$prefix/bin/nexar-sweep" "$prefix/bin/nexar_many_comms" \
         "$prefix/bin/nexar-cluster-bench" "$prefix/bin/nexar-cluster" "$prefix/bin/nexar-cluster-rsh"; do
    [ -e "$stage$f" ] || fail "make install did not install $f"
    echo "installed $f"
done
# nexar-info runs from the prefix without mpirun: its report, and -p's keys.
info="$stage$prefix/bin/nexar-info"
[ -x "$info" ] || fail "make install did not install $prefix/bin/nexar-info"
"$info" | grep -aq "^nexar-pmpi build" || fail "nexar-info printed no report"
kv=$("$info" -p) || fail "nexar-info -p failed"
for key in version mpi_built_for ucx_version cpu_reduce_path gpu cma thp dev_shm_bytes fd_limit \
           setting.NEXAR_THRESHOLD_BYTES setting.NEXAR_HOST_BUFFERS setting.NEXAR_CUDA_PLUGIN stats_fields settings \
           in_a_job_without_gpus in_a_job_with_a_gpu; do
    echo "$kv" | grep -aq "^$key=." || fail "nexar-info -p has no $key= line"
done
echo "$kv" | grep -aq "^version=$(sed -n 's/^Version: //p' "$NEXAR_BUILDDIR/nexar_pmpi.pc")$" ||
    fail "nexar-info's version is not the pkg-config file's"
echo "$kv" | grep -aq "^setting.NEXAR_PIPELINE_DEPTH=4 (default)$" || fail "nexar-info does not give a setting's default"
NEXAR_THRESHOLD_BYTES=lots "$info" -p | grep -aq "^setting.NEXAR_THRESHOLD_BYTES=auto (malformed, default used: 'lots' is not valid)$" ||
    fail "nexar-info does not say a malformed setting was replaced"
NEXAR_HOST_BUFFERS=0 "$info" -p | grep -aq "^setting.NEXAR_HOST_BUFFERS=0 (environment)$" ||
    fail "nexar-info does not say where a setting came from"
NEXAR_UCX_TLS=tcp "$info" -p | grep -aq "^setting.NEXAR_UCX_TLS=tcp (environment)$" ||
    fail "nexar-info does not list a NEXAR_UCX_ setting"
"$info" --bogus >/dev/null 2>&1 && fail "nexar-info took an unknown option"
echo "nexar-info: $(echo "$kv" | grep -c .) keys"
# The installed cluster benchmark finds its harness beside itself.
"$stage$prefix/bin/nexar-cluster-bench" --help | grep -aq "nexar-cluster-bench" || fail "nexar-cluster-bench --help failed"
# With CUDA support, the plugin must sit next to the library (that is where
# libnexar_pmpi.so looks for it).
if [ -e "$NEXAR_BUILDDIR/.libs/libnexar_pmpi_cuda.so" ]; then
    [ -e "$stage$libdir/libnexar_pmpi_cuda.so" ] || fail "the CUDA plugin was not installed next to libnexar_pmpi.so"
    echo "installed $libdir/libnexar_pmpi_cuda.so"
fi
cat >"$stage/use.c" <<'C'
#include <nexar/nexar.h>
#include <stdio.h>
int main(void) { nexar_stats_t s; if (nexar_get_stats(&s) != 0) return 1; printf("nexar %s\n", nexar_version()); return s.ring_calls != 0; }
C
flags=$(PKG_CONFIG_PATH="$stage$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config --cflags --libs nexar_pmpi) \
    || fail "pkg-config does not know nexar_pmpi"
echo "pkg-config: $flags"
# shellcheck disable=SC2086
cc ${NEXAR_SAN_FLAGS:-} "$stage/use.c" -o "$stage/use" $flags $(mpicc --showme:link 2>/dev/null) || fail "compiling against the installed header and library failed"
LD_LIBRARY_PATH="$stage$libdir" "$stage/use" | grep -aq "^nexar [0-9]" || fail "the installed library did not run"
echo "install test passed"
