#!/bin/bash
# The release tarball as a user gets it (.ci/run runs this; it takes a few
# minutes, so it is no part of make check):
#   1. `make dist` in a configured tree (NEXAR_BUILDDIR, default: this
#      source tree), or the tarball NEXAR_TARBALL names;
#   2. the tarball unpacked in a fresh temporary directory must carry
#      configure and the files it needs, and no build product;
#   3. there `./configure && make && make install` into a temporary prefix,
#      with no autotools: autoreconf, autoconf, automake, aclocal,
#      autoheader and libtoolize fail if anything calls them (through PATH
#      and make's ACLOCAL, AUTOMAKE, AUTOCONF and AUTOHEADER), and
#      configure, Makefile.in, aclocal.m4 and config.h.in must come out
#      untouched;
#   4. the tarball's own test/install/run-install-test.sh against that
#      prefix (NEXAR_INSTALLED_PREFIX), every part at the tarball's version.
# NEXAR_TARBALL_CONFIGURE_FLAGS: more options for the tarball's configure.
# NEXAR_KEEP_TARBALL_TEST=1 keeps the temporary directory (its path is printed).
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
src=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${NEXAR_BUILDDIR:-$src}
jobs=$(nproc 2>/dev/null || echo 2)
work=$(mktemp -d /tmp/nexar-tarball.XXXXXX)
if [ "${NEXAR_KEEP_TARBALL_TEST:-0}" = 1 ]; then echo "tarball test: keeping $work"; else trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT; fi
t0=$SECONDS
step() { echo "== $* (at $((SECONDS - t0)) s)"; }

# 1. The tarball.
if [ -n "${NEXAR_TARBALL:-}" ]; then
    tarball=$(cd "$(dirname "$NEXAR_TARBALL")" && pwd)/$(basename "$NEXAR_TARBALL")
else
    [ -f "$builddir/Makefile" ] || fail "$builddir is not configured (run ./configure there, or set NEXAR_BUILDDIR or NEXAR_TARBALL)"
    step "make dist in $builddir"
    version=$(sed -n 's/^PACKAGE_VERSION = //p' "$builddir/Makefile")
    make -s -C "$builddir" dist >"$work/dist.log" 2>&1 || { cat "$work/dist.log"; fail "make dist failed"; }
    grep -a "^check-dist:" "$work/dist.log" || true
    tarball="$builddir/nexar-pmpi-$version.tar.gz"
fi
[ -f "$tarball" ] || fail "no tarball $tarball"
name=$(basename "$tarball" .tar.gz)
version=${name#nexar-pmpi-}
echo "tarball: $tarball ($(du -k "$tarball" | cut -f1) KiB, $(tar tzf "$tarball" | grep -vc '/$') files, version $version)"

# 2. What it carries.
step "unpacking into $work"
tar xzf "$tarball" -C "$work" || fail "cannot unpack $tarball"
tree="$work/$name"
[ -d "$tree" ] || fail "$tarball does not unpack into $name/"
for f in configure Makefile.in aclocal.m4 config.h.in build-aux/ltmain.sh build-aux/install-sh m4/libtool.m4 \
         include/nexar/nexar.h include/nexar/nexar_version.h.in nexar_pmpi.pc.in README.md NEWS docs/install.md \
         test/install/run-install-test.sh; do
    [ -e "$tree/$f" ] || fail "the tarball has no $f"
done
[ -x "$tree/configure" ] || fail "the tarball's configure is not executable"
junk=$(cd "$tree" && find . \( -name '*.o' -o -name '*.lo' -o -name '*.la' -o -name '*.so' -o -name .libs -o -name .deps \
       -o -path ./config.status -o -path ./config.log -o -path ./Makefile -o -path ./config.h -o -path ./libtool \
       -o -path ./include/nexar/nexar_version.h -o -name '*.tar.gz' \) -print)
[ -z "$junk" ] || fail "the tarball carries build products: $junk"

# 3. Build and install it, as the README says, with no autotools.
guard="$work/no-autotools"
mkdir -p "$guard"
for tool in autoreconf autoconf automake aclocal autoheader autom4te libtoolize; do
    printf '#!/bin/sh\necho "FAIL: the tarball build ran %s $*: a file for configure is missing or stale in the tarball" >&2\nexit 1\n' \
        "$tool" >"$guard/$tool"
    chmod +x "$guard/$tool"
done
no_autotools=(ACLOCAL=false AUTOMAKE=false AUTOCONF=false AUTOHEADER=false)
touch "$work/unpacked"
sleep 1  # so that a file rewritten in this second is newer than the stamp
prefix="$work/prefix"
(
    cd "$tree" || exit 1
    export PATH="$guard:$PATH"
    step "./configure --prefix=$prefix ${NEXAR_TARBALL_CONFIGURE_FLAGS:-}"
    # shellcheck disable=SC2086
    ./configure --prefix="$prefix" ${NEXAR_TARBALL_CONFIGURE_FLAGS:-} >"$work/configure.log" 2>&1 ||
        { tail -n 30 "$work/configure.log"; fail "the tarball's configure failed"; }
    sed -n '/configuration summary/,$p' "$work/configure.log"
    step "make -j$jobs"
    make -j"$jobs" "${no_autotools[@]}" >"$work/make.log" 2>&1 || { tail -n 30 "$work/make.log"; fail "the tarball's make failed"; }
    step "make install"
    make install "${no_autotools[@]}" >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; fail "the tarball's make install failed"; }
) || exit 1
regenerated=$(cd "$tree" && find . -newer "$work/unpacked" \( -name configure -o -name Makefile.in -o -name aclocal.m4 \
              -o -name config.h.in -o -path './m4/*' -o -path './build-aux/*' \) -print)
[ -z "$regenerated" ] || fail "the tarball's build remade files it should have used as they were: $regenerated"
echo "built and installed with no autotools; configure, Makefile.in, aclocal.m4 and config.h.in untouched"

# 4. The installed prefix, checked by the tarball's own install test.
step "test/install/run-install-test.sh against $prefix"
MPIRUN=$(sed -n 's/^MPIRUN = //p' "$tree/Makefile") MPICC=$(sed -n 's/^MPICC = //p' "$tree/Makefile") \
    NEXAR_SRCDIR="$tree" NEXAR_BUILDDIR="$tree" NEXAR_INSTALLED_PREFIX="$prefix" NEXAR_EXPECTED_VERSION="$version" \
    bash "$tree/test/install/run-install-test.sh" || fail "the install test failed against the tarball's installation"
step "tarball test passed: $name"
