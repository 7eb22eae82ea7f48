#!/bin/bash
# `make install` into a staging directory installs the library, the header
# and a pkg-config file with which a program compiles, links and runs, and
# every part says one version: nexar_pmpi.pc, nexar-info, the header's
# NEXAR_VERSION macros, nexar_version() and the NEXAR_LOG=info line.
# With NEXAR_INSTALLED_PREFIX=DIR it installs nothing and checks the
# installation in DIR the same way (test/install/run-tarball-test.sh: a
# release tarball built and installed there); NEXAR_EXPECTED_VERSION, when
# set, is the version that must be.
set -u
. "$(dirname "$0")/../lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${NEXAR_INSTALLED_PREFIX:-}" ]; then
    root=""  # the files are where the installation says they are
    pc=$(find "$NEXAR_INSTALLED_PREFIX" -path "*/pkgconfig/nexar_pmpi.pc" 2>/dev/null | head -n 1)
    [ -n "$pc" ] || fail "no pkgconfig/nexar_pmpi.pc under $NEXAR_INSTALLED_PREFIX: not an installation of nexar"
    echo "checking the installation in $NEXAR_INSTALLED_PREFIX"
else
    root="$work/root"  # make install's DESTDIR
    make -s -C "$NEXAR_BUILDDIR" install DESTDIR="$root" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "make install failed"; }
    pc="$NEXAR_BUILDDIR/nexar_pmpi.pc"
fi
prefix=$(sed -n 's/^prefix=//p' "$pc")
libdir=$(sed -n 's/^libdir=//p' "$pc" | sed "s|\${exec_prefix}|$prefix|")
version=$(sed -n 's/^Version: //p' "$pc")
if [ -n "${NEXAR_INSTALLED_PREFIX:-}" ]; then
    [ "$(cd "$prefix" 2>/dev/null && pwd -P)" = "$(cd "$NEXAR_INSTALLED_PREFIX" && pwd -P)" ] ||
        fail "$pc was installed for the prefix $prefix, not $NEXAR_INSTALLED_PREFIX"
fi
[ -z "${NEXAR_EXPECTED_VERSION:-}" ] || [ "$version" = "$NEXAR_EXPECTED_VERSION" ] ||
    fail "nexar_pmpi.pc gives the version $version, not $NEXAR_EXPECTED_VERSION"
for f in "$libdir/libnexar_pmpi.so" "$prefix/include/nexar/nexar.h" "$prefix/include/nexar/nexar_version.h" "$libdir/pkgconfig/nexar_pmpi.pc" \
         "$prefix/bin/nexar_osu_allreduce" "$prefix/bin/nexar-osu" "$prefix/bin/nexar-sweep" "$prefix/bin/nexar_many_comms" \
         "$prefix/bin/nexar-cluster-bench" "$prefix/bin/nexar-model-check" "$prefix/bin/nexar-cluster" "$prefix/bin/nexar-cluster-rsh" "$prefix/bin/nexar-report-plot"; do
    [ -e "$root$f" ] || fail "$f is not installed"
    echo "installed $f"
done
# nexar-info runs from the prefix without mpirun: its report, and -p's keys.
info="$root$prefix/bin/nexar-info"
[ -x "$info" ] || fail "make install did not install $prefix/bin/nexar-info"
"$info" | grep -aq "^nexar-pmpi build" || fail "nexar-info printed no report"
kv=$("$info" -p) || fail "nexar-info -p failed"
for key in version mpi_built_for ucx_version cpu_reduce_path gpu network ucx_moves_cuda device_path cma thp dev_shm_bytes fd_limit \
           setting.NEXAR_THRESHOLD_BYTES setting.NEXAR_HOST_BUFFERS setting.NEXAR_CUDA_PLUGIN stats_fields settings \
           in_a_job_without_gpus in_a_job_with_a_gpu gpu_job; do
    echo "$kv" | grep -aq "^$key=." || fail "nexar-info -p has no $key= line"
done
echo "$kv" | grep -aq "^version=$version$" || fail "nexar-info's version is not the pkg-config file's ($version)"
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
"$root$prefix/bin/nexar-cluster-bench" --help | grep -aq "nexar-cluster-bench" || fail "nexar-cluster-bench --help failed"
"$root$prefix/bin/nexar-model-check" --help | grep -aq "nexar-model-check" || fail "nexar-model-check --help failed"
"$root$prefix/bin/nexar-report-plot" --help | grep -aq "usage: nexar-report-plot" || fail "nexar-report-plot --help failed"
# With CUDA support, the plugin must sit next to the library (that is where
# libnexar_pmpi.so looks for it).
if [ -e "$NEXAR_BUILDDIR/.libs/libnexar_pmpi_cuda.so" ]; then
    [ -e "$root$libdir/libnexar_pmpi_cuda.so" ] || fail "the CUDA plugin was not installed next to libnexar_pmpi.so"
    echo "installed $libdir/libnexar_pmpi_cuda.so"
fi
# The installed header's version macros are the library's version.
cat >"$work/use.c" <<'C'
#include <nexar/nexar.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    nexar_stats_t s; char parts[64];
    if (nexar_get_stats(&s) != 0) return 1;
    snprintf(parts, sizeof parts, "%d.%d.%d", NEXAR_VERSION_MAJOR, NEXAR_VERSION_MINOR, NEXAR_VERSION_PATCH);
    printf("nexar %s, header %s (%s)\n", nexar_version(), NEXAR_VERSION, parts);
    return s.ring_calls != 0 || strcmp(nexar_version(), NEXAR_VERSION) != 0 || strcmp(parts, NEXAR_VERSION) != 0;
}
C
flags=$(PKG_CONFIG_PATH="$root$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" pkg-config --cflags --libs nexar_pmpi) \
    || fail "pkg-config does not know nexar_pmpi"
echo "pkg-config: $flags"
# shellcheck disable=SC2086
cc ${NEXAR_SAN_FLAGS:-} "$work/use.c" -o "$work/use" $flags $(mpicc --showme:link 2>/dev/null) || fail "compiling against the installed header and library failed"
out=$(LD_LIBRARY_PATH="$root$libdir" "$work/use") || { echo "$out"; fail "the installed library did not run, or its version is not its header's"; }
echo "$out" | grep -aqx "nexar $version, header $version ($version)" || fail "the installed library and header say '$out', not $version"
echo "$out"

# The README's "Using it" commands, extracted and run as written against this
# install: /usr/local is the staging prefix, and mpirun, mpiexec.mpich and
# mpicc are this lane's (with what root and this small machine need).
readme="${NEXAR_SRCDIR:-$NEXAR_BUILDDIR}/README.md"
mapfile -t using < <(awk '$0 == "## Using it" { on = 1; next } on && /^#/ && !f { exit } on && /^```/ { f = !f; next } on && f && !/^#/ && NF' "$readme" | sed 's/ *#.*//')
[ "${#using[@]}" -ge 4 ] || fail "cannot read the commands of README's Using it section (${#using[@]} found)"
shim="$work/shim"; mkdir -p "$shim"
launcher_flags=""
[ "$NEXAR_MPI_FAMILY" = openmpi ] && launcher_flags="--oversubscribe$([ "$(id -u)" = 0 ] && echo " --allow-run-as-root")"
printf '#!/bin/sh\nexec timeout 120 %s %s "$@"\n' "$MPIRUN" "$launcher_flags" >"$shim/mpirun"
cp "$shim/mpirun" "$shim/mpiexec.mpich"
printf '#!/bin/sh\nexec %s "$@"\n' "${MPICC:-mpicc}" >"$shim/mpicc"
chmod +x "$shim"/*
cat >"$work/my_app.c" <<'C'
/* A plain MPI program: it knows nothing of nexar, and only says whether
 * nexar is in the process and whether its sums are right. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0, n = 1 << 18;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (int call = 0; call < 30; ++call) {
        for (int i = 0; i < n; ++i) in[i] = (float)(rank + 1 + i % 7 + call);
        MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n; ++i)
            if (out[i] != (float)(size * (size + 1) / 2 + size * (i % 7 + call))) bad = 1;
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "nexar_version");
    if (rank == 0) printf("my_app: %s, %s%s\n", bad ? "WRONG SUMS" : "ok", version ? "nexar " : "no nexar", version ? version() : "");
    MPI_Finalize();
    return bad;
}
C
(cd "$work" && "$shim/mpicc" my_app.c -o my_app -ldl) || fail "cannot build the plain MPI program my_app"
ran=0
for cmd in "${using[@]}"; do
    case $cmd in
        *mpiexec.mpich*) [ "$NEXAR_MPI_FAMILY" = mpich ] || { echo "README: not on this lane (MPICH's): $cmd"; continue; } ;;
        *" -x "*) [ "$NEXAR_MPI_FAMILY" = openmpi ] || { echo "README: not on this lane (Open MPI's): $cmd"; continue; } ;;
    esac
    run=${cmd//\/usr\/local/$root$prefix}
    echo "README: $cmd"
    out=$(cd "$work" && PATH="$shim:$root$prefix/bin:$PATH" PKG_CONFIG_PATH="$root$libdir/pkgconfig" \
          PKG_CONFIG_SYSROOT_DIR="$root" bash -c "$run" 2>&1) || { echo "$out" | tail -n 20; fail "README's command failed: $cmd"; }
    case $cmd in
        *libnexar_pmpi.so*my_app*)
            echo "$out" | grep -aq "^my_app: ok, nexar $version$" || { echo "$out" | tail -n 20; fail "README's command did not run my_app with nexar: $cmd"; } ;;
        mpicc*)
            # The program linked with nexar runs with it, unpreloaded.
            out=$(cd "$work" && LD_LIBRARY_PATH="$root$libdir" "$shim/mpirun" -np 2 ./my_app 2>&1)
            echo "$out" | grep -aq "^my_app: ok, nexar $version$" || { echo "$out" | tail -n 20; fail "my_app linked by the README's command did not run with nexar"; }
            echo "  my_app linked with nexar: $(echo "$out" | grep -a '^my_app')" ;;
        nexar-info*)
            echo "$out" | grep -aq "^nexar-pmpi build" || fail "README's nexar-info printed no report" ;;
    esac
    case $cmd in *NEXAR_LOG=info*)
        echo "$out" | grep -aq "nexar\[rank 0\]: nexar $version, built for" || fail "README's NEXAR_LOG=info command logged no version line (nexar $version)" ;;
    esac
    ran=$((ran + 1))
done
[ $ran -ge 3 ] || fail "only $ran of README's commands ran on this lane"
echo "README: $ran commands of Using it ran"
echo "install test passed"
