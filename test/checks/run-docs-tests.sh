#!/bin/bash
# The manual against the code, so that the two cannot drift apart:
# - every setting the library's parser reads is a row of the user guide's
#   settings table, with the default the parser itself states, and every row
#   there is a name the library reads (the parser's, or a NEXAR_* name in
#   src/; NEXAR_UCX_X stands for UCX's own NEXAR_UCX_* prefix);
# - the README's table of the settings most users need agrees with both;
# - the user guide's counters table lists the NEXAR_STATS line's fields, in
#   their order (nexar-info -p's stats_fields, read from the code's table);
# - the README's Quick start block is the two commands, and CI runs both.
# The Using section's commands run in test/install/run-install-test.sh.
set -u
. "$(dirname "$0")/../lib.sh"
src=${NEXAR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
guide="$src/docs/user-guide.md" readme="$src/README.md"
info="$NEXAR_BUILDDIR/nexar-info"
[ -x "$info" ] || fail "$info is not built"
[ -f "$guide" ] || fail "no $guide"
# No NEXAR_* of the test environment may colour the defaults.
kv=$(env -i PATH="$PATH" "$info" -p) || fail "nexar-info -p failed"

# table_rows FILE HEADING: "NAME<TAB>DEFAULT" for each `NEXAR_*` row of the
# first table under the heading (up to the next heading).
table_rows() {
    awk -v h="$2" '
        $0 == h { on = 1; next }
        on && /^#/ { exit }
        on && /^\| `NEXAR_/ {
            n = split($0, cell, "|")
            name = cell[2]; dflt = cell[3]
            gsub(/[` ]/, "", name); gsub(/`/, "", dflt); gsub(/^ +| +$/, "", dflt)
            print name "\t" dflt
        }' "$1"
}
guide_rows=$(table_rows "$guide" "## Settings")
readme_rows=$(table_rows "$readme" "## Settings most users need")
[ "$(echo "$guide_rows" | grep -c .)" -ge 15 ] || fail "cannot read the settings table of $guide ($(echo "$guide_rows" | grep -c .) rows)"
[ "$(echo "$readme_rows" | grep -c .)" -ge 3 ] || fail "cannot read the settings table of $readme"

# The parser's names and defaults: "setting.NAME=DEFAULT (default)".
parser=$(echo "$kv" | sed -n 's/^setting\.\(NEXAR_[A-Z0-9_]*\)=\(.*\) (default)$/\1\t\2/p' | grep -v '^NEXAR_CUDA_PLUGIN')
[ "$(echo "$parser" | grep -c .)" -ge 15 ] || fail "nexar-info -p gave $(echo "$parser" | grep -c .) settings with defaults"
checked=0
while IFS=$'\t' read -r name dflt; do
    row=$(echo "$guide_rows" | awk -F'\t' -v n="$name" '$1 == n')
    [ -n "$row" ] || fail "$name is read by the library but not in the settings table of docs/user-guide.md"
    [ "$(echo "$row" | cut -f2)" = "$dflt" ] ||
        fail "docs/user-guide.md gives $name the default '$(echo "$row" | cut -f2)'; the parser's is '$dflt'"
    checked=$((checked + 1))
done <<<"$parser"
# Names the library reads outside the parser.
others=$(grep -rhoE '"NEXAR_[A-Z0-9_]+' "$src/src" | tr -d '"' | sort -u)
[ -n "$others" ] || fail "found no NEXAR_ name in $src/src"
for name in $others; do
    case $name in NEXAR_UCX_*) name=NEXAR_UCX_X ;; esac
    echo "$guide_rows" | cut -f1 | grep -qx "$name" || fail "src/ reads $name, which the settings table of docs/user-guide.md lacks"
done
while IFS=$'\t' read -r name _; do
    echo "$parser" | cut -f1 | grep -qx "$name" && continue
    [ "$name" = NEXAR_UCX_X ] && continue
    echo "$others" | grep -qx "$name" || fail "docs/user-guide.md documents $name, which the library never reads"
done <<<"$guide_rows"
while IFS=$'\t' read -r name dflt; do
    want=$(echo "$parser" | awk -F'\t' -v n="$name" '$1 == n { print $2 }')
    [ -n "$want" ] || fail "README's settings table has $name, which the parser does not read"
    [ "$dflt" = "$want" ] || fail "README gives $name the default '$dflt'; the parser's is '$want'"
    checked=$((checked + 1))
done <<<"$readme_rows"
echo "settings: $checked rows agree with the parser; every NEXAR_ name in src/ is documented"

# Counters: the guide's table, in order, is the stats line's fields.
fields=$(echo "$kv" | sed -n 's/^stats_fields=//p' | tr ',' '\n')
[ "$(echo "$fields" | grep -c .)" -ge 12 ] || fail "nexar-info -p gave no stats_fields"
documented=$(awk '$0 == "## Counters" { on = 1; next } on && /^#/ { exit } on && /^\| `[a-z_]+` \|/ { split($0, c, "`"); print c[2] }' "$guide")
[ "$documented" = "$fields" ] ||
    fail "docs/user-guide.md's counters table ($(echo $documented)) is not the NEXAR_STATS line's fields ($(echo $fields))"
echo "counters: $(echo "$fields" | grep -c .) fields, in the line's order"

# Quick start: the two commands, and CI runs both.
block=$(awk '$0 == "## Quick start" { on = 1; next } on && /^#/ { exit } on && /^```/ { f = !f; next } on && f' "$readme" | sed 's/ *#.*//')
[ "$block" = "$(printf 'scripts/quickstart.sh bench\nscripts/quickstart.sh test')" ] ||
    fail "README's Quick start block is not the two commands: $block"
for cmd in "scripts/quickstart.sh test" "scripts/quickstart.sh bench"; do
    grep -q "$cmd" "$src/.ci/run" || fail ".ci/run does not run the README's '$cmd'"
done
echo "quick start: both commands, both run by .ci/run"

# Links between the pages: every relative link names a file that exists,
# and every #anchor a heading of that file.
bad=0
for page in "$readme" "$src"/docs/*.md "$src"/docs/results/*.md; do
    [ -f "$page" ] || continue
    dir=$(dirname "$page")
    while read -r target; do
        file=${target%%#*} anchor=""
        [[ $target == *"#"* ]] && anchor=${target#*#}
        [ -z "$file" ] && file=$(basename "$page")
        if [ ! -e "$dir/$file" ]; then echo "FAIL: ${page#$src/}: link to missing $file" >&2; bad=1; continue; fi
        [ -z "$anchor" ] && continue
        case $file in *.md) ;; *) continue ;; esac
        awk '/^```/ { f = !f; next } !f && /^#+ /' "$dir/$file" | sed 's/^#* //' | tr 'A-Z' 'a-z' |
            sed 's/[`*]//g; s/[^a-z0-9_ -]//g; s/ /-/g' | grep -qx -- "$anchor" ||
            { echo "FAIL: ${page#$src/}: no heading for #$anchor in $file" >&2; bad=1; }
    done < <(grep -oE '\]\([^)]+\)' "$page" | sed 's/^](//; s/)$//' | grep -vE '^(https?|mailto):')
done
[ $bad = 0 ] || fail "broken links in the docs"
echo "links: every link between the pages resolves"
