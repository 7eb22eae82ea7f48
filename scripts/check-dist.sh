#!/bin/sh
# check-dist.sh SRCDIR DISTDIR: what `make dist` put into DISTDIR against
# what git tracks in SRCDIR (Makefile.am's dist-hook runs it).
# - every file git tracks must be in the tarball, but those listed in
#   $left_out (a user of the tarball needs none of them);
# - no file git ignores may be in it (a build product, or a local file that
#   a directory in EXTRA_DIST swept in), but those autoreconf makes for
#   configure, which the tarball must carry;
# - a file git does not know yet (not committed) is shipped with a warning.
# Outside a git checkout (a tree unpacked from a tarball) it checks nothing.
set -eu
src=$1 dist=$2
left_out='.gitignore'
made_by_autoreconf='configure|Makefile.in|aclocal.m4|config.h.in|build-aux/.*|m4/libtool.m4|m4/lt.*\.m4'

top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) || exit 0
[ "$top" = "$(cd "$src" && pwd -P)" ] || exit 0  # a tarball unpacked inside some other checkout

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$src" ls-files | sort >"$tmp/git"
(cd "$dist" && find . -type f | sed 's|^\./||' | sort) >"$tmp/dist"
bad=0
for f in $(comm -23 "$tmp/git" "$tmp/dist"); do
    for x in $left_out; do [ "$f" = "$x" ] && continue 2; done
    echo "check-dist: $f is in git but not in the tarball: add it to EXTRA_DIST (Makefile.am)" >&2
    bad=1
done
comm -13 "$tmp/git" "$tmp/dist" | grep -Evx "$made_by_autoreconf" >"$tmp/extra" || true
if [ -s "$tmp/extra" ]; then
    git -C "$src" check-ignore --stdin <"$tmp/extra" >"$tmp/ignored" || true
    while read -r f; do
        echo "check-dist: $f is ignored by git (a build product?) but in the tarball" >&2
        bad=1
    done <"$tmp/ignored"
    grep -Fvx -f "$tmp/ignored" "$tmp/extra" | while read -r f; do
        echo "check-dist: warning: $f is not committed to git yet, but in the tarball" >&2
    done
fi
[ $bad = 0 ] || { echo "check-dist: the tarball does not match git ls-files (above)" >&2; exit 1; }
echo "check-dist: the tarball holds every file git tracks ($(wc -l <"$tmp/git")), and no build product"
