#!/bin/bash
# Fortran: real programs using `use mpi`, `include 'mpif.h'` and
# `use mpi_f08`, compiled here with the MPI's Fortran wrapper.  Two run
# with LD_PRELOAD, the mpif.h one is linked with -lnexar_pmpi.  Results must
# be exact, and NEXAR_STATS must show the ring ran on every rank (the four
# large allreduces, two reduce-scatters and two allgathers of each program,
# and its two nonblocking allreduces and nonblocking allgather, are above the
# threshold; its 20 small sums in a row below it); `use mpi` and
# `use mpi_f08` once more with the threshold at 0, where the small sums
# must take the known one-shot; a fourth program starts two persistent
# allreduces three times each.
set -u
. "$(dirname "$0")/../lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
[ -n "${MPIFC:-}" ] || fail "no MPI Fortran compiler (mpifort/mpif90) was found by configure; apt-get install gfortran"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libdir="$NEXAR_BUILDDIR/.libs"
san=${NEXAR_SAN_FLAGS:-}  # a sanitizer build needs its runtime in the programs too
"$MPIFC" $san -I"$src" "$src/check_use_mpi.f90" -o "$work/check_use_mpi" || fail "compiling check_use_mpi.f90"
"$MPIFC" $san -I"$src" "$src/check_mpi_f08.f90" -o "$work/check_mpi_f08" || fail "compiling check_mpi_f08.f90"
# mpif.h has no interfaces: gfortran >= 10 needs this for MPI_IN_PLACE vs arrays.
# --no-as-needed, as nexar_pmpi.pc has it: with MPICH the program itself
# calls nothing of nexar's (MPICH's Fortran bindings call the C MPI_X), so
# an as-needed link would drop the library.
"$MPIFC" $san -fallow-argument-mismatch -w -I"$src" "$src/check_mpif.f90" -o "$work/check_mpif" \
    -L"$libdir" -Wl,-rpath,"$libdir" -Wl,--push-state,--no-as-needed -lnexar_pmpi -Wl,--pop-state ||
    fail "compiling check_mpif.f90 with -lnexar_pmpi"
ldd "$work/check_mpif" | grep -aqE '^\s*libnexar_pmpi\.so' || fail "check_mpif is not linked with libnexar_pmpi"

export NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=256K NEXAR_STATS=1
for v in use_mpi mpi_f08 mpif; do
    for np in 2 3; do
        preload=$(preload_value "$libdir/libnexar_pmpi.so")
        [ $v = mpif ] && preload=""
        echo "== $v, $np ranks${preload:+, LD_PRELOAD}"
        bash -c 'source "$0"; nexar_mpirun "$@"' "$src/../lib.sh" "$np" --rank-env LD_PRELOAD="$preload" "$work/check_$v" \
            >"$work/log" 2>&1
        rc=$?
        cat "$work/log"
        [ $rc = 0 ] || fail "check_$v at $np ranks exited with $rc"
        grep -aq "errors=0" "$work/log" || fail "check_$v: wrong results"
        check_stats "$work/log" "$np" 11
        check_bytes "$work/log" reduce_scatter_calls nonzero
        check_bytes "$work/log" allgather_calls nonzero
    done
done
# The small sums in a row through the Fortran entries: with the threshold at
# 0 they take the known one-shot (call/known_one_shot.h).
for v in use_mpi mpi_f08; do
    echo "== $v, 2 ranks, LD_PRELOAD, NEXAR_THRESHOLD_BYTES=0"
    NEXAR_THRESHOLD_BYTES=0 bash -c 'source "$0"; nexar_mpirun "$@"' "$src/../lib.sh" 2 \
        --rank-env LD_PRELOAD="$(preload_value "$libdir/libnexar_pmpi.so")" "$work/check_$v" >"$work/log" 2>&1 ||
        { cat "$work/log"; fail "check_$v with NEXAR_THRESHOLD_BYTES=0 exited with an error"; }
    grep -a "errors=" "$work/log"
    grep -aq "errors=0" "$work/log" || fail "check_$v with NEXAR_THRESHOLD_BYTES=0: wrong results"
    check_bytes "$work/log" known_one_shots nonzero
done
# Persistent: MPI-4's MPI_Allreduce_init where the MPI has it in Fortran,
# else Open MPI 4's MPIX_Allreduce_init; every start must take the ring.
persistent_init=""
for name in MPI_Allreduce_init MPIX_Allreduce_init; do
    if "$MPIFC" $san -cpp -DALLREDUCE_INIT=$name -fallow-argument-mismatch -w "$src/check_persistent.F90" \
        -o "$work/check_persistent" >"$work/build.log" 2>&1; then
        persistent_init=$name
        break
    fi
done
[ -n "$persistent_init" ] || { cat "$work/build.log"; fail "check_persistent.F90 builds with neither MPI_Allreduce_init nor MPIX_Allreduce_init"; }
for np in 2 3; do
    echo "== persistent ($persistent_init), $np ranks, LD_PRELOAD"
    bash -c 'source "$0"; nexar_mpirun "$@"' "$src/../lib.sh" "$np" \
        --rank-env LD_PRELOAD="$(preload_value "$libdir/libnexar_pmpi.so")" "$work/check_persistent" >"$work/log" 2>&1
    rc=$?
    cat "$work/log"
    [ $rc = 0 ] || fail "check_persistent at $np ranks exited with $rc"
    grep -aq "fortran persistent: ranks=$np errors=0" "$work/log" || fail "check_persistent: wrong results"
    check_stats "$work/log" "$np" 6
done
echo "all Fortran runs passed"
