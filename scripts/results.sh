#!/bin/bash
# results.sh: run the benchmarks of docs/results/ and remake their pages.
#
#   scripts/results.sh [TOPIC...]      every topic by default, in this order:
#     one-node                  allreduce on 4 KiB pages, glibc's default and
#                               the tuned allocator, out of place and in place
#     huge-pages                allreduce on transparent huge pages
#     reduce-scatter-allgather  MPI_Reduce_scatter_block and MPI_Allgather
#     small-calls               allreduce of 8 B-64 KiB against Open MPI's
#                               default and its coll/sm, and MPICH's
#                               default (its lane's build, made or brought
#                               up to date first: scripts/mpi-lane.sh), each
#                               with the exchange floor of the same run;
#                               persistent against blocking calls
#     across-nodes              2 simulated nodes x 2 ranks, 2 Gbit/s links
#                               (needs root and network namespaces)
#     without-ucx               allreduce on one node where UCX is absent
#                               (scripts/without-ucx: needs root)
#     mpi-network               across-nodes with nexar over the MPI's
#                               point-to-point (NEXAR_NET=mpi) against Open
#                               MPI's algorithms, and over UCX (needs root)
#     many-nodes                8 simulated nodes x 1 rank, 1 Gbit/s links:
#                               nexar's halving-doubling against its ring,
#                               each against Open MPI (needs root)
#     uneven-nodes              2 simulated nodes of 3 and 2 ranks, 1 Gbit/s
#                               links: nexar's hierarchical allreduce in
#                               lanes against its flat ring (needs root)
#     halves-across-nodes       2 simulated nodes x 2 ranks, 1 Gbit/s links:
#                               reduce-scatter and allgather, nexar with no
#                               setting (the hierarchical halves) against
#                               its flat ring, each against Open MPI (needs
#                               root)
#     mpi4py                    the mpi4py + numpy gradient exchange
#     gpu                       the GPU kernel and the staged device ring
#                               (needs a GPU and a build with CUDA)
#     many-ranks                allreduce at 16, 8, 4 and 2 ranks on one node
#                               against Open MPI's best node algorithm
#                               (needs 16 cores and Open MPI)
#   make results                the same, from the build folder
#
#   scripts/results.sh --from-device DIR [gpu] [many-ranks]
#       the pages of a run of test/gpu/run-on-device.sh (on a lent GPU
#       machine with 16 cores) from its output folder DIR: its CSVs, logs,
#       commands and machine.meta; no benchmark runs here.  Only checks
#       its summary.txt says passed make tables; the others (failed, or
#       dropped by the run's deadline) are left out of the pages.
#
# Run it after `make`, on a machine left otherwise idle: each topic runs its
# commands (bench/nexar-osu and the others; their exact command lines end
# up on the page) into a fresh folder, draws the plots (gnuplot), writes a
# meta file (date, machine, versions, commands) and the page
# (scripts/results_page.py).  Only when all of that succeeded does the
# folder replace docs/results/TOPIC/ and the page docs/results/TOPIC.md;
# docs/results/README.md, the index, is rewritten after each page.  A topic
# that cannot run here (no root, no GPU) says why in one line and leaves its
# page as it is; a topic that fails leaves its page too, keeps its files in
# a temporary folder and says where, and the script exits 1 at the end.
#
# On the 2-core development VM the whole set should take about 25 minutes
# (estimated: one-node and across-nodes about 4 each, mpi4py and many-nodes
# about 5 each, uneven-nodes and halves-across-nodes about 3 each, small-calls about 2 (and the MPICH
# lane's first build), the others about 1 each; each page records how long
# its run took).
#
# Environment:
#   NEXAR_RESULTS_QUICK=1    a quick check of this script: 4-64 KiB (the
#                            cluster 16-256 KiB, many-nodes, uneven-nodes and halves-across-nodes
#                            64-256 KiB), few
#                            iterations, one mpi4py round; the pages say it
#                            is no measurement
#   NEXAR_RESULTS_DIR=DIR    write the pages there (default: docs/results
#                            of this source tree)
#   NEXAR_RESULTS_VERBOSE=1  show the benchmarks' output as they run (it is
#                            always in TOPIC/run-log.txt)
#   NEXAR_RESULTS_TIMEOUT_S  the most one command may take (default 1800)
#   MPIRUN, NEXAR_*          reach the benchmarks as they would by hand; the
#                            NEXAR_* settings in force are named on the page
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
python=/usr/bin/python3
page_py="$src/scripts/results_page.py"
all_topics=(one-node huge-pages reduce-scatter-allgather small-calls across-nodes without-ucx mpi-network many-nodes uneven-nodes
            halves-across-nodes
            mpi4py gpu many-ranks)
case ${1:-} in -h|--help) sed -n '2,/^set -u/{/^set -u/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
device_dir=""
if [ "${1:-}" = --from-device ]; then
    [ -n "${2:-}" ] && [ -f "$2/machine.meta" ] ||
        { echo "results.sh: --from-device DIR: DIR must be test/gpu/run-on-device.sh's output (with machine.meta)" >&2; exit 2; }
    device_dir=$(cd "$2" && pwd)
    shift 2
    for t in "$@"; do
        case $t in gpu|many-ranks) ;; *) echo "results.sh: --from-device makes the gpu and many-ranks pages, not $t" >&2; exit 2 ;; esac
    done
    [ $# -gt 0 ] || set -- gpu many-ranks
fi
topics=("$@")
[ ${#topics[@]} -gt 0 ] || topics=("${all_topics[@]}")
for t in "${topics[@]}"; do
    [[ " ${all_topics[*]} " == *" $t "* ]] || { echo "results.sh: no topic $t (one of: ${all_topics[*]})" >&2; exit 2; }
done
results=${NEXAR_RESULTS_DIR:-$src/docs/results}
mkdir -p "$results" || exit 1
results=$(cd "$results" && pwd)
quick=${NEXAR_RESULTS_QUICK:-0}
verbose=${NEXAR_RESULTS_VERBOSE:-0}
limit=${NEXAR_RESULTS_TIMEOUT_S:-1800}
[ -x "$python" ] || { echo "results.sh: needs $python (the pages are written by scripts/results_page.py)" >&2; exit 1; }

# The build: this folder (make results) or the source tree (in-tree build).
build=""
for d in "$PWD" "$src"; do
    [ -x "$d/nexar_osu_allreduce" ] && [ -f "$d/.libs/libnexar_pmpi.so" ] && { build=$(cd "$d" && pwd); break; }
done
[ -n "$build" ] || [ -n "$device_dir" ] || { echo "results.sh: no build here or in $src (./configure && make first)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/nexar-results.XXXXXX") || exit 1
keep=()              # failed topics' folders, kept for a look
cluster_ours=0       # across-nodes brought a cluster up: take it down
cleanup() {
    if [ "$cluster_ours" = 1 ]; then "$src/test/cluster/nexar-cluster" down >/dev/null 2>&1; fi
    if [ ${#keep[@]} -eq 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'echo "results.sh: interrupted; no page of the running topic was replaced" >&2; exit 130' INT TERM HUP

# The commands run from $tree, so that they read as typed in a source tree
# ("bench/nexar-osu ..."): the source tree itself for an in-tree build, else
# a tree of links to the source's scripts and the build's programs, which
# the bench/ scripts find as they find an in-tree build.
tree=$src
if [ -n "$build" ] && [ "$build" != "$src" ]; then
    tree="$work/tree"
    mkdir -p "$tree/bench"
    ln -s "$src"/bench/* "$tree/bench/"
    ln -s "$src/test" "$tree/test"
    ln -s "$build/.libs" "$tree/.libs"
    for p in nexar_osu_allreduce nexar_gpu_reduce_bench nexar-info; do
        [ -e "$build/$p" ] && ln -s "$build/$p" "$tree/$p"
    done
fi

if [ "$quick" = 1 ]; then
    range=4K:64K iters=(-i 20 -x 2) small_iters=(-i 200 -x 20 -r 2) persistent_reps=(-r 2)
    cluster_range=16K:256K cluster_iters=(-i 5 -x 1) network_range=1M:2M network_iters=(-i 3 -x 1)
    nodes_range=64K:256K nodes_iters=(-i 3 -x 1 -r 1)
    mpi4py_args=(--runs 1 --steps 3)
    gpu_kernel_args=(--sizes 64M --reps 5) gpu_range=64M:128M gpu_iters=(-i 3 -x 1)
else
    range=4:256M iters=() small_iters=(-i 20000 -x 2000 -r 5) persistent_reps=(-r 7)
    cluster_range=16K:256M cluster_iters=() network_range=1M:128M network_iters=(-i 10 -x 2)
    # 8 warm-up calls: the learner's trials at 64 KiB and more (4 of nexar's,
    # 4 of the MPI's), so that no timed call of the nexar column is the MPI's.
    nodes_range=64K:16M nodes_iters=(-i 10 -x 8 -r 1)
    mpi4py_args=(--runs 3)
    gpu_kernel_args=() gpu_range=64M:1G gpu_iters=()
fi

have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
have_gnuplot=1
command -v gnuplot >/dev/null 2>&1 || { have_gnuplot=0; echo "results.sh: gnuplot not found: the pages will have no plots (Debian: apt-get install gnuplot-nox)" >&2; }
term="pngcairo size 900,560 noenhanced font ',11'"
[ $have_gnuplot = 1 ] && { gnuplot -e "set terminal" 2>&1 | grep -q pngcairo || term="png size 900,560 noenhanced"; }

t_start=$SECONDS
clock() { local s=$((SECONDS - ${1:-$t_start})); printf '%d:%02d' $((s / 60)) $((s % 60)); }
say() { echo "[$index/${#topics[@]}] $topic: $* [$(clock)]"; }

# ---------------------------------------------------------------- meta

machine_meta() {
    local ucx nexar settings v
    "$src/scripts/machine-meta.sh"
    echo "mpi=$("${MPIRUN:-mpirun}" --version 2>&1 | head -n 1)"
    ucx=$(ucx_info -v 2>/dev/null | sed -n 's/.*[Ll]ibrary version:[[:space:]]*//p' | head -n 1)
    if [ -n "$ucx" ]; then ucx="$ucx (ucx_info -v)"
    else
        ucx=$("$build/nexar-info" -p 2>/dev/null | sed -n 's/^ucx_version=//p')
        ucx="${ucx:-unknown} (as nexar-info finds it; ucx_info is not installed)"
    fi
    echo "ucx=$ucx"
    nexar=$("$build/nexar-info" -p 2>/dev/null | sed -n 's/^version=//p')
    [ -n "$nexar" ] || nexar=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$build/config.h" 2>/dev/null)
    echo "nexar=${nexar:-unknown}"
    echo "git=$(git -C "$src" describe --always --dirty 2>/dev/null || echo 'not a git checkout')"
    if [ $have_gpu = 1 ]; then
        v=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/, / (driver /; s/$/)/' | sort | uniq -c |
            awk '{ n = $1; $1 = ""; printf "%s%s%s", sep, (n > 1 ? n " x" : ""), $0; sep = "; " }')
        echo "gpu=${v# }"
    fi
    settings=$(compgen -e | grep '^NEXAR_' | grep -v '^NEXAR_RESULTS_' | while read -r v; do printf '%s=%s ' "$v" "${!v}"; done)
    settings="${settings% }"
    echo "settings=${settings:+\`$settings\`}"
    echo "quick=$quick"
}

# cmd [VAR=VALUE...] PROGRAM ARGS...: runs it from $tree (within the time
# limit), its output appended to $out/run-log.txt, and records it in
# $out/meta with $out written as $OUT.
cmd() {
    local shown="" a rc
    for a in "$@"; do shown+="${shown:+ }$(printf '%q' "$a")"; done
    shown=${shown//\\,/,}          # (bash's %q escapes commas: --mpi-alg default,3,6)
    shown=${shown//"$out"/\$OUT}  # the run folder, as the page names it
    echo "command=$shown" >>"$out/meta"
    say "$shown"
    echo "\$ $shown" >>"$out/run-log.txt"
    if [ "$verbose" = 1 ]; then
        (cd "$tree" && timeout -k 30 "$limit" env "$@") 2>&1 | tee -a "$out/run-log.txt"
        rc=${PIPESTATUS[0]}
    else
        (cd "$tree" && timeout -k 30 "$limit" env "$@") >>"$out/run-log.txt" 2>&1
        rc=$?
    fi
    echo >>"$out/run-log.txt"
    if [ "$rc" != 0 ]; then
        [ "$rc" = 124 ] && echo "results.sh: $shown ran past $limit s (NEXAR_RESULTS_TIMEOUT_S)" >>"$out/run-log.txt"
        say "FAILED (exit $rc): $shown"
        tail -n 15 "$out/run-log.txt" | sed 's/^/    /'
    fi
    return "$rc"
}

# ---------------------------------------------------------------- plots

# size_label BYTES: 4096 -> 4K, 8388608 -> 8M, 1073741824 -> 1G.
size_label() {
    local b=$1
    if [ "$b" -ge 1073741824 ] && [ $((b % 1073741824)) = 0 ]; then echo "$((b / 1073741824))G"
    elif [ "$b" -ge 1048576 ] && [ $((b % 1048576)) = 0 ]; then echo "$((b / 1048576))M"
    elif [ "$b" -ge 1024 ] && [ $((b % 1024)) = 0 ]; then echo "$((b / 1024))K"
    else echo "$b"; fi
}
# xtics CSV...: gnuplot's xtics for the sizes in column 1, every other one
# labelled when there are more than 9.
xtics() {
    local sizes i=0 step=1 out="" b
    sizes=$(tail -q -n +2 "$@" | cut -d, -f1 | sort -n -u)
    [ "$(echo "$sizes" | wc -l)" -gt 9 ] && step=2
    for b in $sizes; do
        if [ $((i % step)) = 0 ]; then out+="${out:+, }'$(size_label "$b")' $b"; else out+="${out:+, }'' $b 1"; fi
        i=$((i + 1))
    done
    echo "$out"
}
gq() { printf '%s' "${1//\'/\'\'}"; }  # inside a gnuplot '...' string

# plot_busbw CSV PNG TITLE: busbw of the MPI and of nexar against size, and
# the bound where the CSV has one (bench/osu_allreduce.c's columns).
plot_busbw() {
    local csv=$1 png=$2 title=$3 bound=""
    [ $have_gnuplot = 1 ] || return 0
    awk -F, 'NR > 1 && $9 > 0 { found = 1 } END { exit !found }' "$csv" &&
        bound=", '' every ::1 using 1:9 with lines dashtype 2 lw 1.5 lc rgb 'black' title 'bound (same run)'"
    gnuplot -e "set terminal $term; set output '$(gq "$png")'; set datafile separator ',';
        set logscale x 2; set xtics ($(xtics "$csv")); set xlabel 'message size (bytes)'; set ylabel 'busbw (GB/s)';
        set yrange [0:*]; set offsets graph 0.03, graph 0.03, graph 0.05, 0; set key top left; set grid;
        set title '$(gq "$title")';
        plot '$(gq "$csv")' every ::1 using 1:4 with linespoints lw 1.5 pt 7 ps 0.8 lc rgb '#1f77b4' title 'MPI (its own PMPI call)',
             '' every ::1 using 1:6 with linespoints lw 2.5 pt 5 ps 0.9 lc rgb '#d62728' title 'nexar' $bound" >>"$out/run-log.txt" 2>&1 ||
        echo "results.sh: gnuplot failed on $png (see run-log.txt)" >&2
}

# draw_speedup PNG ONE_NODE_DIR HUGE_DIR: the MPI's time / nexar's against
# size, one line per table of the one-node page and of the huge-pages one.
draw_speedup() {
    local png=$1 one=$2 huge=$3 plots="" csvs=() f i=0
    [ $have_gnuplot = 1 ] || return 0
    local -a names=("$one/out-of-place-default.csv" "$one/out-of-place-tuned.csv" "$one/in-place-default.csv"
                    "$one/in-place-tuned.csv" "$huge/out-of-place.csv" "$huge/in-place.csv")
    local -a labels=("default malloc, out of place" "tuned malloc, out of place" "default malloc, in place"
                     "tuned malloc, in place" "huge pages, out of place" "huge pages, in place")
    local -a colours=('#7f7f7f' '#1f77b4' '#7f7f7f' '#1f77b4' '#2ca02c' '#2ca02c')
    local -a dashes=(1 1 2 2 1 2)
    for ((i = 0; i < 6; ++i)); do
        f=${names[i]}
        [ -f "$f" ] || continue
        csvs+=("$f")
        plots+="${plots:+, }'$(gq "$f")' every ::1 using 1:(\$3/\$5) with linespoints lw 2 pt 7 ps 0.7 dashtype ${dashes[i]} lc rgb '${colours[i]}' title '${labels[i]}'"
    done
    [ ${#csvs[@]} -gt 0 ] || return 0
    ratio_plot "$png" 'MPI time / nexar time (log scale)' 0.25 64 'below horizontal Left reverse maxcols 3' \
        'allreduce, 2 ranks, float, one node, 4 KiB pages unless marked: above 1, nexar is faster' \
        "$plots" 'equal time' "${csvs[@]}"
}

# ratio_plot PNG YLABEL LO HI KEY TITLE PLOTS EQUAL CSV...: ratios against
# size, both axes logarithmic, y tics from LO to HI, the line at 1 titled
# EQUAL; PLOTS are gnuplot's plot clauses, the CSVs give the x tics.
ratio_plot() {
    local png=$1 ylabel=$2 lo=$3 hi=$4 key=$5 title=$6 plots=$7 equal=$8 tics="" t
    shift 8
    for t in 0.25 0.5 0.75 1 1.5 2 3 4 8 16 32 64; do
        awk -v t="$t" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(t >= lo && t <= hi) }' &&
            tics+="${tics:+, }'${t}×' $t"
    done
    gnuplot -e "set terminal $term; set output '$(gq "$png")'; set datafile separator ',';
        set logscale x 2; set xtics ($(xtics "$@")); set xlabel 'message size (bytes)';
        set ylabel '$(gq "$ylabel")'; set logscale y 2; set grid; set ytics ($tics);
        set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05; set key $key;
        set title '$(gq "$title")';
        plot $plots, 1 with lines dashtype 3 lw 1.5 lc rgb 'black' title '$(gq "$equal")'" >>"$out/run-log.txt" 2>&1 ||
        echo "results.sh: gnuplot failed on $png" >&2
}

# ---------------------------------------------------------------- topics

topic_one_node() {
    cmd bench/nexar-osu -np 2 --malloc both -c -m "$range" "${iters[@]}" --csv "$out/out-of-place.csv" || return 1
    # NEXAR_REPORT in a job of its own (its accounting costs a small call
    # about 0.05 us: the tables run with no setting), with the tuned
    # allocator, fewer iterations.
    cmd NEXAR_REPORT="$out/report.csv" bench/nexar-osu -np 2 --malloc tuned -c -m "$range" -i 200 -x 20 \
        --csv "$out/report-job.csv" || return 1
    [ -f "$out/report.csv" ] || { echo "results.sh: the one-node report job wrote no NEXAR_REPORT file (see run-log.txt)" >&2; return 1; }
    rm -f "$out/report-job.csv"
    if [ $have_gnuplot = 1 ]; then
        "$src/scripts/nexar-report-plot" "$out/report.csv" "$out/report.png" >>"$out/run-log.txt" 2>&1 ||
            echo "results.sh: nexar-report-plot failed on $out/report.csv (see run-log.txt)" >&2
    fi
    cmd bench/nexar-osu -np 2 --malloc both -c -l -m "$range" "${iters[@]}" --csv "$out/in-place.csv" || return 1
    local place malloc
    for place in out-of-place in-place; do
        for malloc in default tuned; do
            plot_busbw "$out/$place-$malloc.csv" "$out/$place-$malloc.png" \
                "allreduce busbw, 2 ranks, float, ${place//-/ }, 4 KiB pages, $malloc malloc"
        done
    done
    draw_speedup "$out/speedup.png" "$out" "$results/huge-pages"
}

topic_huge_pages() {
    cmd bench/nexar-osu -np 2 --malloc thp -c -m "$range" "${iters[@]}" --csv "$out/out-of-place.csv" || return 1
    cmd bench/nexar-osu -np 2 --malloc thp -c -l -m "$range" "${iters[@]}" --csv "$out/in-place.csv" || return 1
    plot_busbw "$out/out-of-place.csv" "$out/out-of-place.png" "allreduce busbw, 2 ranks, float, out of place, huge pages"
    plot_busbw "$out/in-place.csv" "$out/in-place.png" "allreduce busbw, 2 ranks, float, in place, huge pages"
}

topic_reduce_scatter_allgather() {
    cmd bench/nexar-osu -np 2 --malloc tuned -c --collective reduce_scatter -m "$range" "${iters[@]}" \
        --csv "$out/reduce-scatter.csv" || return 1
    cmd bench/nexar-osu -np 2 --malloc tuned -c --collective allgather -m "$range" "${iters[@]}" \
        --csv "$out/allgather.csv" || return 1
    plot_busbw "$out/reduce-scatter.csv" "$out/reduce-scatter.png" "MPI_Reduce_scatter_block busbw, 2 ranks, float, tuned malloc"
    plot_busbw "$out/allgather.csv" "$out/allgather.png" "MPI_Allgather busbw, 2 ranks, float, tuned malloc"
}

# draw_ratios PNG TITLE CSV LABEL [CSV LABEL]...: the MPI's time / nexar's
# against size, one line per CSV (bench/osu_allreduce.c's columns).
draw_ratios() {
    local png=$1 title=$2 plots="" csvs=() i=0
    shift 2
    [ $have_gnuplot = 1 ] || return 0
    local -a colours=('#1f77b4' '#2ca02c' '#d62728' '#7f7f7f')
    while [ $# -ge 2 ]; do
        csvs+=("$1")
        plots+="${plots:+, }'$(gq "$1")' every ::1 using 1:(\$3/\$5) with linespoints lw 2 pt 7 ps 0.7 lc rgb '${colours[i % 4]}' title '$(gq "$2")'"
        i=$((i + 1))
        shift 2
    done
    ratio_plot "$png" 'MPI time / nexar time (log scale)' 0.5 16 'top left' "$title" "$plots" 'equal time' "${csvs[@]}"
}

# Small calls: 2 ranks, glibc's default allocator, against each MPI's own
# call in the same run: Open MPI's default (coll/tuned), its coll/sm (the
# shared-memory component, raised above tuned), and MPICH's default (the
# MPICH lane's build of nexar and of the benchmark).
topic_small_calls() {
    local bench=(-np 2 --malloc default -c -m 8:64K --floor "${small_iters[@]}")
    cmd bench/nexar-osu "${bench[@]}" --csv "$out/open-mpi.csv" || return 1
    cmd bench/nexar-overlap -np 2 --persistent -c -m 8:64K "${persistent_reps[@]}" --csv "$out/persistent.csv" || return 1
    cmd OMPI_MCA_coll_sm_priority=100 bench/nexar-osu "${bench[@]}" --csv "$out/open-mpi-coll-sm.csv" || return 1
    cmd NEXAR_LANE_BUILD_ONLY=1 scripts/mpi-lane.sh mpich || return 1
    cmd MPIRUN=mpiexec.mpich build/mpich/src/bench/nexar-osu "${bench[@]}" --csv "$out/mpich.csv" || return 1
    plot_busbw "$out/open-mpi.csv" "$out/open-mpi.png" "allreduce busbw, 2 ranks, float, Open MPI's default"
    plot_busbw "$out/open-mpi-coll-sm.csv" "$out/open-mpi-coll-sm.png" "allreduce busbw, 2 ranks, float, Open MPI's coll/sm"
    plot_busbw "$out/mpich.csv" "$out/mpich.png" "allreduce busbw, 2 ranks, float, MPICH's default"
    draw_ratios "$out/ratios.png" "allreduce 8 B-64 KiB, 2 ranks, float, one node: above 1, nexar is faster" \
        "$out/open-mpi.csv" "Open MPI 4.1, default" "$out/open-mpi-coll-sm.csv" "Open MPI 4.1, coll/sm" \
        "$out/mpich.csv" "MPICH 4.0, default"
}

# why_not_across_nodes: prints why the simulated cluster cannot run, or nothing.
why_not_across_nodes() {
    local why
    [ "$(id -u)" = 0 ] || { echo "not root (the simulated cluster needs network namespaces)"; return; }
    why=$("$src/test/cluster/nexar-cluster" check --rate 2gbit 2>&1) || { echo "${why:-nexar-cluster check failed}"; return; }
    "$src/test/cluster/nexar-cluster" status 2>/dev/null | grep -q '^no cluster is up' ||
        echo "a simulated cluster is already up (another run? test/cluster/nexar-cluster status)"
}

# cluster_benches BENCH_ARGS... [--- BENCH_ARGS...]...: each
# bench/nexar-cluster-bench run in turn (until one fails), then the
# cluster down; 77 (skip_why set) where the tool's own check said no.
cluster_benches() {
    local rc=0 args=()
    cluster_ours=1
    while [ $# -gt 0 ] && [ $rc = 0 ]; do
        args=()
        while [ $# -gt 0 ] && [ "$1" != --- ]; do args+=("$1"); shift; done
        [ $# -gt 0 ] && shift
        cmd bench/nexar-cluster-bench "${args[@]}" || rc=$?
    done
    "$src/test/cluster/nexar-cluster" down >/dev/null 2>&1
    cluster_ours=0
    # The tool's own check said no: the topic is skipped, not failed.
    if [ $rc != 0 ] && skip_why=$(grep -a -m 1 'nexar-cluster-bench: cannot run here: ' "$out/run-log.txt"); then
        skip_why=${skip_why#nexar-cluster-bench: }
        return 77
    fi
    return $rc
}

topic_across_nodes() {
    cluster_benches --nodes 2 --ppn 2 --rate 2gbit -m "$cluster_range" "${cluster_iters[@]}" \
        --csv "$out/allreduce.csv" --plot "$out/allreduce.png"
}

topic_without_ucx() {
    cmd scripts/without-ucx bench/nexar-osu -np 2 --malloc both -c -m "$range" "${iters[@]}" \
        --csv "$out/absent.csv" || return 1
    local malloc
    for malloc in default tuned; do
        plot_busbw "$out/absent-$malloc.csv" "$out/absent-$malloc.png" \
            "allreduce busbw, 2 ranks, float, UCX absent, $malloc malloc"
    done
}

# nexar over the MPI's point-to-point against each of Open MPI's
# algorithms, then over UCX on the same links.
topic_mpi_network() {
    cluster_benches --nodes 2 --ppn 2 --rate 2gbit --mpi-alg all -x NEXAR_NET=mpi -m "$network_range" \
        "${network_iters[@]}" --csv "$out/over-mpi.csv" --plot "$out/over-mpi.png" \
        --- --nodes 2 --ppn 2 --rate 2gbit -x NEXAR_NET=ucx -m "$network_range" "${network_iters[@]}" \
        --csv "$out/over-ucx.csv" --plot "$out/over-ucx.png"
}

# Many nodes of one rank each over slow links: nexar with no setting (its
# model picks the ring or the halving-doubling per size; NEXAR_LOG=info
# puts the model's costs and picks in the log) against Open MPI's default,
# recursive doubling (3) and Rabenseifner (6); then each of nexar's two
# schedules forced on every call (NEXAR_THRESHOLD_BYTES=0: no size left to
# the MPI, so the two compare as schedules), against Open MPI's default.
topic_many_nodes() {
    local net=(--nodes 8 --ppn 1 --rate 1gbit -m "$nodes_range" "${nodes_iters[@]}")
    cluster_benches "${net[@]}" --mpi-alg default,3,6 -x NEXAR_LOG=info --csv "$out/auto.csv" --plot "$out/auto.png" \
        --- "${net[@]}" --mpi-alg default -x NEXAR_ALGORITHM=ring -x NEXAR_THRESHOLD_BYTES=0 --csv "$out/ring.csv" --plot "$out/ring.png" \
        --- "${net[@]}" --mpi-alg default -x NEXAR_ALGORITHM=rhd -x NEXAR_THRESHOLD_BYTES=0 --csv "$out/rhd.csv" --plot "$out/rhd.png"
}

# Nodes of different sizes (3 + 2 ranks) over slow links: nexar with no
# setting (its model picks the flat ring or the hierarchical allreduce in
# lanes per size; NEXAR_LOG=info puts its costs and picks in the log), then
# each of the two forced on every call (NEXAR_THRESHOLD_BYTES=0), each
# against Open MPI's default.
topic_uneven_nodes() {
    local net=(--hosts 0:3,1:2 --rate 1gbit -m "$nodes_range" "${nodes_iters[@]}")
    cluster_benches "${net[@]}" -x NEXAR_LOG=info --csv "$out/auto.csv" --plot "$out/auto.png" \
        --- "${net[@]}" -x NEXAR_ALGORITHM=ring -x NEXAR_THRESHOLD_BYTES=0 --csv "$out/ring.csv" --plot "$out/ring.png" \
        --- "${net[@]}" -x NEXAR_ALGORITHM=hier -x NEXAR_THRESHOLD_BYTES=0 --csv "$out/hier.csv" --plot "$out/hier.png"
}

# The reduce-scatter and the allgather on 2 nodes x 2 ranks: nexar with no
# setting (the hierarchical halves where its model picks them), then its
# flat ring forced on every call (NEXAR_THRESHOLD_BYTES=0), each beside
# Open MPI's default.
topic_halves_across_nodes() {
    local net=(--nodes 2 --ppn 2 --rate 1gbit --mpi-alg default -m "$nodes_range" "${nodes_iters[@]}") c runs=()
    for c in reduce_scatter allgather; do
        runs+=("${net[@]}" --collective $c -x NEXAR_LOG=info --csv "$out/$c-auto.csv" --plot "$out/$c-auto.png" ---
               "${net[@]}" --collective $c -x NEXAR_ALGORITHM=ring -x NEXAR_THRESHOLD_BYTES=0 --csv "$out/$c-ring.csv" --plot "$out/$c-ring.png" ---)
    done
    cluster_benches "${runs[@]}"
}

# histogram_plot PNG KEY YLABEL TITLE PLOT: clustered bars, one gnuplot
# style for every bar chart of the pages.
histogram_plot() {
    local png=$1 key=$2 ylabel=$3 title=$4 plot=$5
    [ $have_gnuplot = 1 ] || return 0
    gnuplot -e "set terminal $term; set output '$(gq "$png")'; set datafile separator ',';
        set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8 border -1;
        set boxwidth 0.9; set yrange [0:*]; set grid ytics; set key $key;
        set ylabel '$ylabel'; set title '$title'; plot $plot" >>"$out/run-log.txt" 2>&1 ||
        echo "results.sh: gnuplot failed on $png" >&2
}

plot_mpi4py() {
    local csv=$1 png=$2
    histogram_plot "$png" "top right" 'ms per step (best of the run)' \
        'mpi4py gradient exchange, 2 ranks: time in MPI_Allreduce per step (lower is better)' \
        "'$(gq "$csv")' every ::1 using 4:xtic(sprintf('round %s, %s', stringcolumn(1), stringcolumn(2))) lc rgb '#1f77b4' title 'MPI',
         '' every ::1 using 5 lc rgb '#d62728' title 'nexar'"
}

topic_mpi4py() {
    cmd bench/nexar-mpi4py-bench -np 2 "${mpi4py_args[@]}" --csv "$out/grad-exchange.csv" || return 1
    plot_mpi4py "$out/grad-exchange.csv" "$out/grad-exchange.png"
}

plot_gpu_kernel() {
    local csv=$1 png=$2
    histogram_plot "$png" "top left" 'GB/s (bytes read + written)' \
        'GPU: nexar reduction kernel against a device-to-device copy' \
        "'$(gq "$csv")' every ::1 using 3:xtic(sprintf('%s, %d MiB', stringcolumn(1), column(2) / 1048576)) lc rgb '#7f7f7f' title 'copy',
         '' every ::1 using 4 lc rgb '#d62728' title 'reduce',
         '' every ::1 using 5 lc rgb '#ff9896' title 'reduce in place'"
}

# many_range: the sizes of the many-ranks tables.
many_range=$([ "$quick" = 1 ] && echo 4K:64K || echo 4K:256M)

# draw_many PNG DIR: nexar ÷ the best MPI algorithm against size, one line
# per table of the many-ranks page.
draw_many() {
    local png=$1 dir=$2 plots="" csvs=() name label colours=('#d62728' '#ff7f0e' '#9467bd' '#1f77b4' '#7f7f7f') i=0
    [ $have_gnuplot = 1 ] || return 0
    for name in 16 8 16-inplace 4 2; do
        [ -f "$dir/many-ranks-$name.csv" ] || { i=$((i + 1)); continue; }
        csvs+=("$dir/many-ranks-$name.csv")
        label="${name%-inplace} ranks$([ "$name" = 16-inplace ] && echo ', in place')"
        plots+="${plots:+, }'$(gq "$dir/many-ranks-$name.csv")' every ::1 using 1:9 with linespoints lw 2 pt 7 ps 0.7 lc rgb '${colours[i]}' title '$label'"
        i=$((i + 1))
    done
    [ ${#csvs[@]} -gt 0 ] || return 0
    ratio_plot "$png" 'nexar busbw / best Open MPI algorithm (log scale)' 0.25 8 'below horizontal' \
        'allreduce on one node, many ranks: above 1, nexar is faster than Open MPI at its best' "$plots" 'equal' \
        "${csvs[@]}"
}

topic_many_ranks() {
    local np
    for np in 16 8 4 2; do
        cmd bench/nexar-vs-best-mpi -np $np --malloc tuned -m "$many_range" -r 1 --node-bound --csv "$out/many-ranks-$np.csv" ||
            return 1
    done
    cmd bench/nexar-vs-best-mpi -np 16 --malloc tuned -m "$many_range" -r 1 --node-bound -l \
        --csv "$out/many-ranks-16-inplace.csv" || return 1
    draw_many "$out/many-ranks.png" "$out"
}

# from_device TOPIC: $out from the device run's files (no benchmark runs):
# the CSVs the page reads, the logs and commands of the checks behind them,
# and the machine as the run recorded it.
from_device() {
    local names=() n f
    case $1 in
        gpu) names=(kernel-bench staged-ring ipc-ring ipc-staged direct-ring-2 ipc-4 direct-ring-4 device-learnt-2 device-learnt-4) ;;
        many-ranks) names=(many-ranks-16 many-ranks-8 many-ranks-16-inplace many-ranks-4 many-ranks-2) ;;
    esac
    cat "$device_dir/machine.meta" >>"$out/meta"  # the run's date and machine
    { echo "from_device=1"; echo "quick=0"; echo "settings="
      echo "note=Run by \`test/gpu/run-on-device.sh\` (each check under its own time limit, the whole run under a deadline); the checks' summary: [$topic/summary.txt]($topic/summary.txt)."; } >>"$out/meta"
    for n in "${names[@]}"; do
        f=$device_dir/$n.csv
        [ -f "$f" ] || continue
        # Only checks that passed: a failed one's CSV may hold another path's numbers.
        grep -q "^check $n: PASS" "$device_dir/summary.txt" 2>/dev/null || continue
        case $n in kernel-bench) cp "$f" "$out/gpu-kernel.csv" ;; staged-ring) cp "$f" "$out/gpu-staged-ring.csv" ;; *) cp "$f" "$out/" ;; esac
        awk -F'\t' -v n="$n" '$1 == n { print "command=" $2 }' "$device_dir/commands.txt" >>"$out/meta"
        [ -f "$device_dir/$n.log" ] && { echo "\$ ($n)"; cat "$device_dir/$n.log"; echo; } >>"$out/run-log.txt"
    done
    cp "$device_dir/summary.txt" "$out/" 2>/dev/null
    grep -q '^command=' "$out/meta" || { echo "results.sh: no $topic CSV in $device_dir" >>"$out/run-log.txt"; return 1; }
    case $1 in
        gpu) plot_gpu_kernel "$out/gpu-kernel.csv" "$out/gpu-kernel.png" 2>/dev/null
             for f in "$out"/*.csv; do
                 [ "$(basename "$f")" = gpu-kernel.csv ] || plot_busbw "$f" "${f%.csv}.png" "device allreduce busbw: $(basename "${f%.csv}")"
             done ;;
        many-ranks) draw_many "$out/many-ranks.png" "$out" ;;
    esac
}

topic_gpu() {
    cmd ./nexar_gpu_reduce_bench "${gpu_kernel_args[@]}" --csv "$out/gpu-kernel.csv" || return 1
    cmd NEXAR_HOST_BUFFERS=0 bench/nexar-osu -np 2 --malloc tuned -d cuda -c -m "$gpu_range" "${gpu_iters[@]}" \
        --csv "$out/gpu-staged-ring.csv" || return 1
    plot_gpu_kernel "$out/gpu-kernel.csv" "$out/gpu-kernel.png"
    plot_busbw "$out/gpu-staged-ring.csv" "$out/gpu-staged-ring.png" \
        "allreduce busbw, 2 ranks on one GPU, float: cudaMemcpy + PMPI_Allreduce + cudaMemcpy against nexar"
}

# page_date TOPIC: the date of the page there now.
page_date() {
    local d
    d=$(head -n 1 "$results/$1.md" 2>/dev/null | sed -n 's/^<!-- results-page: .*date=\([^ ]*\) .*/\1/p')
    if [ -n "$d" ]; then echo "the page stays as measured on $d"; else echo "there is no page yet"; fi
}

# why_not TOPIC: prints why the topic cannot run here, or nothing.
why_not() {
    case $1 in
        across-nodes | mpi-network | many-nodes | uneven-nodes | halves-across-nodes) why_not_across_nodes ;;
        without-ucx) "$src/scripts/without-ucx" --check >/dev/null || "$src/scripts/without-ucx" --check ;;
        small-calls) if ! "${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
                         echo "the small-calls tables compare Open MPI's components: needs Open MPI's mpirun"
                     elif ! command -v mpiexec.mpich >/dev/null; then
                         echo "no MPICH here (scripts/install-deps.sh installs it)"; fi ;;
        mpi4py) "$python" -c 'import mpi4py, numpy' 2>/dev/null ||
                    echo "$python cannot import mpi4py and numpy (apt-get install python3-mpi4py python3-numpy)" ;;
        many-ranks) if [ "$(nproc)" -lt 16 ]; then
                        echo "$(nproc) cores here: 16 ranks would share them, which measures nothing (run it on a node with 16 cores, or make the page from a device run: --from-device DIR)"
                    elif ! "${MPIRUN:-mpirun}" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
                        echo "the many-ranks tables compare Open MPI's node algorithms: needs Open MPI's mpirun"; fi ;;
        gpu) if [ $have_gpu = 0 ]; then echo "no GPU here"
             elif [ ! -x "$build/nexar_gpu_reduce_bench" ]; then echo "no nexar_gpu_reduce_bench (configure found no CUDA)"; fi ;;
    esac
}

# publish: the page from $out, then $out and the page into $results.
publish() {
    "$python" "$page_py" "$topic" "$out" -o "$work/$topic.md" 2>>"$out/run-log.txt" || {
        say "FAILED: scripts/results_page.py: $(tail -n 1 "$out/run-log.txt")"; return 1; }
    rm -rf "$results/.$topic.old"
    [ -e "$results/$topic" ] && { mv "$results/$topic" "$results/.$topic.old" || return 1; }
    cp -r "$out" "$results/$topic" || { mv "$results/.$topic.old" "$results/$topic"; return 1; }
    mv "$work/$topic.md" "$results/$topic.md" || return 1
    rm -rf "$results/.$topic.old"
    "$python" "$page_py" --index "$results" || return 1
}

echo "results.sh: ${topics[*]}; pages in $results$([ "$quick" = 1 ] && echo ' (QUICK RUN: not a measurement)')"
failed=() skipped=() done_topics=()
index=0
for topic in "${topics[@]}"; do
    index=$((index + 1))
    why=""
    [ -n "$device_dir" ] || why=$(why_not "$topic")
    if [ -n "$why" ]; then
        say "$why; $(page_date "$topic")"
        skipped+=("$topic")
        continue
    fi
    out="$work/$topic"
    mkdir -p "$out"
    : >"$out/run-log.txt"
    t0=$SECONDS
    skip_why=""
    if [ -n "$device_dir" ]; then
        echo "topic=$topic" >"$out/meta"
        from_device "$topic"
        rc=$?
    else
        { echo "topic=$topic"; echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; machine_meta; } >"$out/meta"
        "topic_${topic//-/_}"
        rc=$?
    fi
    [ -n "$device_dir" ] || echo "elapsed_s=$((SECONDS - t0))" >>"$out/meta"
    if [ $rc = 77 ] && [ -n "$skip_why" ]; then
        say "$skip_why; $(page_date "$topic")"
        skipped+=("$topic")
    elif [ $rc = 0 ] && publish; then
        say "done in $(clock "$t0"): $results/$topic.md"
        done_topics+=("$topic")
    else
        say "failed after $(clock "$t0"); $(page_date "$topic"); this run's files are in $out"
        failed+=("$topic")
        keep+=("$out")
    fi
done

# The headline plot mixes both single-node pages: redraw it when the
# huge-pages tables changed under an existing one-node page.
if [[ " ${done_topics[*]} " == *" huge-pages "* ]] && [ -d "$results/one-node" ]; then
    out=$work  # (gnuplot's messages go to $work/run-log.txt)
    draw_speedup "$results/one-node/speedup.png" "$results/one-node" "$results/huge-pages"
fi

echo "results.sh: $(clock) in all; replaced: ${done_topics[*]:-none}; skipped: ${skipped[*]:-none}; failed: ${failed[*]:-none}"
[ ${#failed[@]} = 0 ]
