#!/bin/bash
# The layering of src/: each folder is a layer, and a file includes only
# from its own layer or the layers below it (docs/how-it-works.md, "Layers",
# shows the same order; this test checks that the two agree).
#
#   test/checks/run-layer-tests.sh           the check on this tree, then
#                                            on copies with a wrong include
#                                            planted, which it must fail
#   test/checks/run-layer-tests.sh --check DIR   the check alone, on DIR
#                                            (a tree's src/)
#
# A folder under src/ that is not in the order below fails the check: a new
# layer must be given its place.  "nexar/..." (the public header) may be
# included anywhere.  Runs no MPI job.
set -u

# The layers, bottom to top: the one place this order is written in code.
layers="base mpi reduce memory algo transport decide runtime call shim tools"

rank_of() {  # rank_of LAYER: its position in $layers (1 = bottom), or nothing
    local i=0 l
    for l in $layers; do
        i=$((i + 1))
        [ "$l" = "$1" ] && { echo $i; return; }
    done
}

# check_layers DIR: every include of every source file under DIR (a src/
# tree), one line per wrong one on stderr; fails when there is any.
check_layers() {
    local dir=$1 bad=0 f layer own line target target_rank files=0
    [ -d "$dir" ] || { echo "check_layers: no folder $dir" >&2; return 2; }
    for layer_dir in "$dir"/*/; do
        layer=$(basename "$layer_dir")
        # A folder of build outputs only (an old build's, after a move).
        [ -n "$(find "$layer_dir" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print -quit)" ] ||
            continue
        own=$(rank_of "$layer")
        if [ -z "$own" ]; then
            echo "src/$layer/: a folder that is not a layer (add it to the order in $0 and docs/how-it-works.md)" >&2
            bad=1
            continue
        fi
        while IFS= read -r -d '' f; do
            files=$((files + 1))
            while IFS= read -r line; do
                [[ $line =~ ^[0-9]+:[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^/\"]+)/ ]] || continue
                target=${BASH_REMATCH[1]}
                [ "$target" = nexar ] && continue
                target_rank=$(rank_of "$target")
                if [ -z "$target_rank" ]; then
                    echo "${f#"$dir"/}:${line%%:*}: includes from \"$target/\", which is no layer" >&2
                    bad=1
                elif [ "$target_rank" -gt "$own" ]; then
                    echo "${f#"$dir"/}:${line%%:*}: $layer/ includes from $target/, a layer above it" >&2
                    bad=1
                fi
            done < <(grep -n '#[[:space:]]*include' "$f")
        done < <(find "$layer_dir" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print0)
    done
    [ "$files" -gt 0 ] || { echo "check_layers: no source file under $dir" >&2; return 2; }
    return $bad
}

if [ "${1:-}" = --check ]; then
    check_layers "${2:?usage: $0 --check DIR}"
    exit
fi

. "$(dirname "$0")/../lib.sh"
src=${NEXAR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== the layers of $src/src, bottom to top: $layers"
check_layers "$src/src" || fail "a file includes from a layer above its own (lines above)"
echo "every include goes to its own layer or one below"

# The layer map in the docs says the same order.
map=$(sed -n 's/^Layers, bottom to top: \(.*\)\.$/\1/p' "$src/docs/how-it-works.md" | tr -d '`' | tr ',' ' ')
[ -n "$map" ] || fail "docs/how-it-works.md has no line 'Layers, bottom to top: ...'"
[ "$(echo $map)" = "$layers" ] ||
    fail "docs/how-it-works.md's layer map ($(echo $map)) differs from this script's order ($layers)"
echo "docs/how-it-works.md's layer map gives the same order"

# The check must fail what it is for: copies of src/ with a wrong include
# planted (a low layer including a higher one, an include from no layer, a
# folder that is no layer), each named in the check's message.
plant() {  # plant NAME FILE LINE: a copy of src/ with LINE added to FILE
    rm -rf "$tmp/$1"
    mkdir -p "$tmp/$1"
    cp -r "$src/src/." "$tmp/$1/"
    mkdir -p "$(dirname "$tmp/$1/$2")"
    echo "$3" >>"$tmp/$1/$2"
}
expect_failure() {  # expect_failure NAME WHAT-THE-MESSAGE-SAYS
    if check_layers "$tmp/$1" 2>"$tmp/$1.msg"; then
        fail "the layer check passed a tree with $1"
    fi
    grep -aq -- "$2" "$tmp/$1.msg" || fail "the layer check failed $1 without saying '$2': $(cat "$tmp/$1.msg")"
    echo "fails $1: $(head -n 1 "$tmp/$1.msg")"
}
plant transport-includes-call transport/ucx.h '#include "call/collective.h"'
expect_failure transport-includes-call "transport/ucx.h:.*transport/ includes from call/, a layer above it"
plant base-includes-runtime base/status.h '#  include "runtime/config.h"'
expect_failure base-includes-runtime "base/status.h:.*base/ includes from runtime/"
plant decide-includes-runtime decide/path_learner.cc '#include "runtime/comm_context.h"'
expect_failure decide-includes-runtime "decide/path_learner.cc:.*decide/ includes from runtime/"
plant include-from-nowhere algo/ring.h '#include "core/status.h"'
expect_failure include-from-nowhere "algo/ring.h:.*\"core/\", which is no layer"
plant folder-of-no-layer core/status.h '// a folder that is no layer'
expect_failure folder-of-no-layer "src/core/: a folder that is not a layer"
echo "all layer checks behaved"
