#!/bin/bash
# scripts/results_page.py, the page writer of docs/results/ (scripts/results.sh
# runs it), on small CSVs written here in each topic's real columns (those of
# bench/osu_allreduce.c, bench/nexar-cluster-bench, bench/nexar-mpi4py-bench
# and bench/gpu_reduce_bench.cu): each page must carry the date, the machine,
# the exact commands, a table row per CSV row with the MPI's time / nexar's
# and the path, and its links; the index must list it with its date.  A
# missing or garbled CSV, or a meta file without a date, must fail with a
# message that names the file, and write no page.  Runs no MPI job.
set -u
. "$(dirname "$0")/../lib.sh"
src=${NEXAR_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
python=/usr/bin/python3
page_py="$src/scripts/results_page.py"
[ -x "$python" ] || { echo "SKIP: $python is missing (results_page.py runs with it)"; exit 77; }
[ -f "$page_py" ] || fail "$page_py is missing"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
checks=0

# has PAGE TEXT: PAGE holds the line fragment TEXT (fixed string).
has() {
    checks=$((checks + 1))
    grep -qF -- "$2" "$1" || fail "$(basename "$1"): no '$2' in:
$(cat "$1")"
}
# meta DIR [quick]: a meta file as scripts/results.sh writes it.
meta() {
    cat >"$1/meta" <<EOF
topic=$(basename "$1")
date=2026-12-03T10:20:30Z
cpu=Test CPU 9000
cores=2
memory=23.4 GiB
kernel=Linux 6.1.0-test
thp=madvise
mpi=mpirun (Open MPI) 4.1.4
ucx=1.13.1 (ucx_info -v)
nexar=0.1.0
git=abc1234-dirty
settings=
quick=${2:-0}
command=bench/nexar-osu -np 2 --malloc both -c -m 4K:256M --csv \$OUT/out-of-place.csv
command=bench/nexar-osu -np 2 --malloc both -c -l -m 4K:256M --csv \$OUT/in-place.csv
elapsed_s=125
EOF
}
# page TOPIC: renders the page of $dir/TOPIC into $dir/TOPIC.md, or fails.
page() {
    "$python" "$page_py" "$1" "$dir/$1" -o "$dir/$1.md" 2>"$dir/err" ||
        fail "results_page.py $1 failed: $(cat "$dir/err")"
}
# must_fail WHAT TOPIC TEXT: the page of TOPIC must fail, say TEXT, and write nothing.
must_fail() {
    local what=$1 topic=$2 text=$3
    checks=$((checks + 1))
    rm -f "$dir/$topic.md"
    if "$python" "$page_py" "$topic" "$dir/$topic" -o "$dir/$topic.md" 2>"$dir/err"; then
        fail "$what: results_page.py succeeded"
    fi
    grep -q '^results_page.py: ' "$dir/err" || fail "$what: no message: $(cat "$dir/err")"
    grep -qF -- "$text" "$dir/err" || fail "$what: the message does not say '$text': $(cat "$dir/err")"
    [ ! -e "$dir/$topic.md" ] || fail "$what: a page was written anyway"
    echo "ok: $what -> $(head -n 1 "$dir/err")"
}

osu_header=size_bytes,ranks,mpi_avg_us,mpi_busbw_gbs,nexar_avg_us,nexar_busbw_gbs,speedup,ring_calls,bound_busbw_gbs,memcpy_gbs,add_gbs,mpi_algbw_gbs,nexar_algbw_gbs,add3_gbs,one_pass_bound_gbs,path
# osu_csv FILE: four sizes, one per path: mpi, 1shot, ring, and a mixed one.
osu_csv() {
    cat >"$1" <<EOF
$osu_header
4096,2,3.000,1.3653,3.300,1.2412,0.9091,0,0.0000,0.0,0.0,1.3653,1.2412,0.0,0.0,mpi
16384,2,9.000,1.8204,4.500,3.6409,2.0000,100,0.0000,0.0,0.0,1.8204,3.6409,0.0,0.0,1shot
1048576,2,400.000,2.6214,200.000,5.2429,2.0000,100,10.4858,40.0,30.0,2.6214,5.2429,25.0,14.0,ring
268435456,2,60000.000,4.4739,40000.000,6.7109,1.5000,12,10.0000,16.0,13.0,4.4739,6.7109,12.0,13.0,ring+mpi
EOF
}

# ---------------------------------------------------------------- one-node
mkdir -p "$dir/one-node"
meta "$dir/one-node"
for f in out-of-place-default out-of-place-tuned in-place-default in-place-tuned; do osu_csv "$dir/one-node/$f.csv"; done
: >"$dir/one-node/out-of-place-tuned.png"  # a plot for one table only
page one-node
p="$dir/one-node.md"
has "$p" "<!-- results-page: topic=one-node date=2026-12-03 quick=0 headline="
has "$p" "Measured on 2026-12-03 at 10:20 UTC by \`scripts/results.sh one-node\` (the run took 2 min 5 s)"
has "$p" "**Machine:** Test CPU 9000, 2 cores, 23.4 GiB memory, Linux 6.1.0-test, transparent huge pages \`madvise\`"
has "$p" "mpirun (Open MPI) 4.1.4"
has "$p" "**UCX:** 1.13.1 (ucx_info -v)"
has "$p" "git \`abc1234-dirty\`"
# shellcheck disable=SC2016  # $OUT is literal on the page
has "$p" 'bench/nexar-osu -np 2 --malloc both -c -m 4K:256M --csv $OUT/out-of-place.csv'
# shellcheck disable=SC2016
has "$p" 'bench/nexar-osu -np 2 --malloc both -c -l -m 4K:256M --csv $OUT/in-place.csv'
has "$p" "| size | MPI µs | nexar µs | MPI ÷ nexar | MPI % of bound | nexar % of bound | path |"
# Ratios from the times (the speedup column is not read), shares from busbw / bound.
has "$p" "| 4 KiB | 3.00 | 3.30 | 0.91× | – | – | mpi |"
has "$p" "| 16 KiB | 9.00 | 4.50 | 2.00× | – | – | 1shot |"
has "$p" "| 1 MiB | 400.0 | 200.0 | 2.00× | 25 % | 50 % | ring |"
has "$p" "| 256 MiB | 60,000 | 40,000 | 1.50× | 45 % | 67 % | ring+mpi |"
rows=$(grep -c '^| [0-9]* [KMG]iB |' "$p")
checks=$((checks + 1))
[ "$rows" = 16 ] || fail "one-node.md: $rows table rows, not 4 per CSV x 4 CSVs"
has "$p" "\`mpi\` (passed through; 1 size, 4 KiB): 0.91×"
has "$p" "\`ring\` (ring; 1 size, 1 MiB): 2.00×"
has "$p" "From 1 MiB (1 MiB – 256 MiB): nexar at 50–67 % of the bound, the MPI at 25–45 %."
has "$p" "[one-node/out-of-place-default.csv](one-node/out-of-place-default.csv) (no plot)."
has "$p" "![out-of-place-tuned.png](one-node/out-of-place-tuned.png)"
has "$p" "[one-node/run-log.txt](one-node/run-log.txt)"
has "$p" "## How to read this"
has "$p" "bench/osu_allreduce.c"
checks=$((checks + 1))
! grep -q "Quick run" "$p" || fail "one-node.md: a full run called quick"

# To stdout without -o; the same page.
checks=$((checks + 1))
"$python" "$page_py" one-node "$dir/one-node" >"$dir/stdout.md" 2>"$dir/err" || fail "to stdout: $(cat "$dir/err")"
cmp -s "$dir/stdout.md" "$p" || fail "the page on stdout differs from the one written with -o"

# ---------------------------------------------------------------- small calls: the floor, persistent calls
mkdir -p "$dir/small-calls"
meta "$dir/small-calls"
for f in open-mpi open-mpi-coll-sm mpich; do
    cat >"$dir/small-calls/$f.csv" <<EOF
$osu_header,floor_us
8,2,0.240,0.0336,0.200,0.0429,1.2000,100,0.1778,0.2667,0.2667,0.0336,0.0429,0.2667,0.2667,1shot,0.100
65536,2,13.000,5.0000,4.000,16.000,3.2500,100,33.0,40.0,30.0,5.0,16.0,25.0,14.0,ring,
EOF
done
cat >"$dir/small-calls/persistent.csv" <<'EOF'
size_bytes,mpi_blocking_us,mpi_persistent_us,nexar_blocking_us,nexar_nonblocking_us,nexar_persistent_us,nexar_nonblocking_over_blocking,nexar_persistent_speedup_over_blocking,nexar_persistent_speedup_over_best_mpi,nexar_persistent_speedup_median,nexar_persistent_speedup_min,nexar_persistent_speedup_max,mpi_nonblocking_us
8,0.240,0.400,0.190,0.380,0.200,2.00,0.95,1.20,0.9000,0.8000,1.0500,0.570
EOF
page small-calls
p="$dir/small-calls.md"
has "$p" "| size | MPI µs | nexar µs | MPI ÷ nexar | MPI % of bound | nexar % of bound | floor µs | nexar % of floor | path |"
# The floor's share is its time over nexar's; a size without a floor says so.
has "$p" "| 8 B | 0.24 | 0.20 | 1.20× | 19 % | 24 % | 0.10 | 50 % | 1shot |"
has "$p" "| 64 KiB | 13.0 | 4.00 | 3.25× | 15 % | 48 % | – | – | ring |"
has "$p" "The exchange floor (8 B): 0.10 µs; nexar at 50 % of it."
has "$p" "## Persistent against blocking, Open MPI 4.1's default"
has "$p" "| 8 B | 0.24 | 0.40 | 0.19 | 0.20 | 2.00× | 0.90× [0.80, 1.05] |"
has "$p" "nexar's persistent call against the MPI's persistent call: 2.00× (8 B)"
has "$p" "| size | MPI nonblocking µs | nexar nonblocking µs | MPI ÷ nexar | nexar nonblocking ÷ its blocking |"
has "$p" "| 8 B | 0.57 | 0.38 | 1.50× | 2.00× |"
has "$p" "its nonblocking call (\`MPI_Iallreduce\` + \`MPI_Wait\` at once) against the MPI's: 1.50×."
rm "$dir/small-calls/persistent.csv"
must_fail "small-calls without its persistent CSV" small-calls "persistent.csv: no such file"

# ---------------------------------------------------------------- a quick run
mkdir -p "$dir/huge-pages"
meta "$dir/huge-pages" 1
osu_csv "$dir/huge-pages/out-of-place.csv"
osu_csv "$dir/huge-pages/in-place.csv"
page huge-pages
has "$dir/huge-pages.md" "quick=1 headline=quick run, not a measurement: "
has "$dir/huge-pages.md" "**Quick run** (\`NEXAR_RESULTS_QUICK=1\`)"

# ---------------------------------------------------------------- across nodes
mkdir -p "$dir/across-nodes"
meta "$dir/across-nodes"
cat >"$dir/across-nodes/allreduce.csv" <<'EOF'
size_bytes,mpi_default_busbw_gbs,mpi_default_pct_bound,nexar_busbw_gbs,nexar_pct_bound,nexar_ring_calls,bound_busbw_gbs,t_bound_us
16384,0.0100,2.7,0.0100,2.7,0,0.3750,65.5
8388608,0.1500,40.0,0.3000,80.0,6,0.3750,33554.4
268435456,0.2000,53.3,0.3300,88.0,6,0.3750,1073741.8
EOF
page across-nodes
p="$dir/across-nodes.md"
has "$p" "| size | MPI (default) GB/s | nexar GB/s | MPI ÷ nexar (time) | MPI % of link | nexar % of link | nexar ring calls |"
has "$p" "| 16 KiB | 0.010 | 0.010 | 1.00× | 3 % | 3 % | 0 |"
has "$p" "| 8 MiB | 0.150 | 0.300 | 2.00× | 40 % | 80 % | 6 |"
has "$p" "| 256 MiB | 0.200 | 0.330 | 1.65× | 53 % | 88 % | 6 |"
has "$p" "where nexar took the calls (2 sizes, 8 MiB – 256 MiB): 1.65–2.00×"
has "$p" "From 8 MiB: nexar at 80–88 % of the link bound, the MPI at 40–53 %."
has "$p" "The bound is the link rate"

# ---------------------------------------------------------------- many nodes: runs compared
# Three runs of bench/nexar-cluster-bench: auto against three MPI
# algorithms (3 is recursive doubling), ring and rhd against the default;
# the summary compares nexar's busbw across them and quotes the model's
# picks from rank 0's line in the log.
mkdir -p "$dir/many-nodes"
meta "$dir/many-nodes"
node_header=size_bytes,mpi_default_busbw_gbs,mpi_default_pct_bound,nexar_busbw_gbs,nexar_pct_bound,nexar_ring_calls,bound_busbw_gbs,t_bound_us
printf '%s\n' "size_bytes,mpi_default_busbw_gbs,mpi_default_pct_bound,mpi_alg3_busbw_gbs,mpi_alg3_pct_bound,mpi_rabens6_busbw_gbs,mpi_rabens6_pct_bound,nexar_busbw_gbs,nexar_pct_bound,nexar_ring_calls,bound_busbw_gbs,t_bound_us" \
    "65536,0.0020,1.6,0.0040,3.2,0.0030,2.4,0.0060,4.8,12,0.1250,917.5" \
    "16777216,0.0800,64.0,0.0500,40.0,0.0900,72.0,0.1100,88.0,12,0.1250,234881.0" >"$dir/many-nodes/auto.csv"
printf '%s\n' "$node_header" "65536,0.0020,1.6,0.0040,3.2,12,0.1250,917.5" "16777216,0.0800,64.0,0.1000,80.0,12,0.1250,234881.0" \
    >"$dir/many-nodes/ring.csv"
printf '%s\n' "$node_header" "65536,0.0020,1.6,0.0080,6.4,12,0.1250,917.5" "16777216,0.0800,64.0,0.0950,76.0,12,0.1250,234881.0" \
    >"$dir/many-nodes/rhd.csv"
page many-nodes
p="$dir/many-nodes.md"
has "$p" "| size | nexar-ring GB/s | nexar-auto GB/s | nexar-rhd GB/s | auto ÷ ring | rhd ÷ ring | auto ÷ best MPI | best MPI (its run) |"
has "$p" "| 64 KiB | 0.0040 | 0.0060 | 0.0080 | 1.50× | 2.00× | 1.50× | recursive doubling (3) |"
has "$p" "| 16 MiB | 0.100 | 0.110 | 0.095 | 1.10× | 0.95× | 1.22× | Rabenseifner (6) |"
has "$p" "- nexar-rhd ÷ nexar-ring: 2.00× below 1 MiB (64 KiB), 0.95× from 1 MiB (16 MiB)."
has "$p" "quick=0 headline=nexar-auto ÷ nexar-ring 1.50× below 1 MiB (64 KiB), 1.10× from 1 MiB (16 MiB); "
has "$p" "| size | MPI (default) GB/s | MPI recursive doubling (3) GB/s | MPI Rabenseifner (6) GB/s | nexar GB/s |"
has "$p" "- The run log has no \`NEXAR_ALGORITHM=auto picks:\` line of rank 0"
printf '%s\n' "nexar[rank 1]: communicator context 1: 8 nodes x 1 rank; halving-doubling allreduce ready (8 participants, no fold); network ucx: ring alpha=9.0us beta=0.100GB/s (measured), halving-doubling alpha=9.0us beta=0.100GB/s (measured); NEXAR_ALGORITHM=auto picks: 4KiB rhd" \
    "nexar[rank 0]: communicator context 1: 8 nodes x 1 rank; halving-doubling allreduce ready (8 participants, no fold); network ucx: ring alpha=69.4us beta=0.198GB/s (measured), halving-doubling alpha=512.8us beta=0.173GB/s (measured); NEXAR_ALGORITHM=auto picks: 4KiB ring, 64KiB ring, 1MiB rhd, 16MiB ring" \
    >"$dir/many-nodes/run-log.txt"
page many-nodes
has "$p" "job 1 (ucx): ring α 69.4 µs, β 0.198 GB/s (measured); halving-doubling α 512.8 µs, β 0.173 GB/s (measured) → 4KiB ring, 64KiB ring, 1MiB rhd, 16MiB ring."
checks=$((checks + 1))
! grep -q "4KiB rhd" "$p" || fail "many-nodes.md: a rank other than 0 quoted"

# ---------------------------------------------------------------- uneven nodes: runs compared
# The same three-run comparison with nexar's hierarchical allreduce forced;
# the model's picks come from the hierarchical allreduce's line.
mkdir -p "$dir/uneven-nodes"
meta "$dir/uneven-nodes"
printf '%s\n' "$node_header" "65536,0.0020,1.0,0.0100,5.0,12,0.2000,524.3" "16777216,0.0900,45.0,0.1700,85.0,12,0.2000,134217.7" \
    >"$dir/uneven-nodes/auto.csv"
printf '%s\n' "$node_header" "65536,0.0020,1.0,0.0080,4.0,12,0.2000,524.3" "16777216,0.0850,42.5,0.1000,50.0,12,0.2000,134217.7" \
    >"$dir/uneven-nodes/ring.csv"
printf '%s\n' "$node_header" "65536,0.0020,1.0,0.0100,5.0,12,0.2000,524.3" "16777216,0.0870,43.5,0.1800,90.0,12,0.2000,134217.7" \
    >"$dir/uneven-nodes/hier.csv"
printf '%s\n' "nexar[rank 0]: communicator context 1: 2 nodes of 2-3 ranks, 2 lanes; hierarchical allreduce ready; cost model (measured): shm alpha=2.0us beta=2.41GB/s, network alpha=9.9us beta=0.120GB/s per node; NEXAR_ALGORITHM=auto picks: 1MiB hier, 8MiB hier, 64MiB hier, 512MiB hier" \
    >"$dir/uneven-nodes/run-log.txt"
page uneven-nodes
p="$dir/uneven-nodes.md"
has "$p" "| size | nexar-ring GB/s | nexar-auto GB/s | nexar-hier GB/s | auto ÷ ring | hier ÷ ring | auto ÷ best MPI | best MPI (its run) |"
has "$p" "| 16 MiB | 0.100 | 0.170 | 0.180 | 1.70× | 1.80× | 1.89× | default |"
has "$p" "- nexar-hier ÷ nexar-ring: 1.25× below 1 MiB (64 KiB), 1.80× from 1 MiB (16 MiB)."
has "$p" "job 1 (2 nodes of 2-3 ranks, 2 lanes, hierarchical allreduce): shared memory α 2.0 µs, β 2.41 GB/s; network α 9.9 µs, β 0.120 GB/s per node (measured) → 1MiB hier, 8MiB hier, 64MiB hier, 512MiB hier."

# ---------------------------------------------------------------- mpi4py
mkdir -p "$dir/mpi4py"
meta "$dir/mpi4py"
cat >"$dir/mpi4py/grad-exchange.csv" <<'EOF'
run,mode,calls_per_step,mpi_allreduce_ms,nexar_allreduce_ms,allreduce_ratio,mpi_step_ms,nexar_step_ms,step_ratio,huge_mib,total_mib
1,per-tensor,148,130.0,65.0,2.00,131.0,66.0,1.98,372,475
1,bucketed,17,134.0,67.0,2.00,250.0,200.0,1.25,364,475
EOF
page mpi4py
p="$dir/mpi4py.md"
has "$p" "| 1 | per-tensor | 148 | 130.0 | 65.0 | 2.00× | 131.0 | 66.0 | 1.98× | 372 of 475 MiB |"
has "$p" "| 1 | bucketed | 17 | 134.0 | 67.0 | 2.00× | 250.0 | 200.0 | 1.25× | 364 of 475 MiB |"
has "$p" "\`bucketed\` (1 round): time in \`MPI_Allreduce\` 2.00× lower with nexar, the whole step 1.25×."

# ---------------------------------------------------------------- gpu
mkdir -p "$dir/gpu"
meta "$dir/gpu"
cat >"$dir/gpu/gpu-kernel.csv" <<'EOF'
type,bytes,copy_gbs,reduce_gbs,inplace_gbs,unroll4_gbs,reduce_pct_of_copy,exact,inplace_exact,unroll4_exact
f32,67108864,3600.0,3780.0,3790.0,3670.0,105.0,1,1,1
EOF
# An older CSV of the device ring: no path column, no bound.
cat >"$dir/gpu/gpu-staged-ring.csv" <<'EOF'
size_bytes,ranks,mpi_avg_us,mpi_busbw_gbs,nexar_avg_us,nexar_busbw_gbs,speedup,ring_calls,bound_busbw_gbs,memcpy_gbs,add_gbs,mpi_algbw_gbs,nexar_algbw_gbs
67108864,2,37500.000,1.7896,7500.000,8.9478,5.0000,12,0.0000,0.0000,0.0000,1.7896,8.9478
EOF
page gpu
has "$dir/gpu.md" "| f32 | 64 MiB | 3600 | 3780 (105 %) | 3790 (105 %) | 3670 (102 %) | yes |"
has "$dir/gpu.md" "| 64 MiB | 37,500 | 7,500.0 | 5.00× | – | – | - |"

# A device run's extra tables, where present (here IPC at 2 ranks only).
osu_csv "$dir/gpu/ipc-ring.csv"
page gpu
has "$dir/gpu.md" "## 2 ranks, GPU to GPU through IPC"
has "$dir/gpu.md" "- **IPC, 2 ranks**: nexar 0.91–2.00× the by-hand path (4 KiB – 256 MiB)."
checks=$((checks + 1))
! grep -q "the direct path (CUDA-aware UCX)" "$dir/gpu.md" || fail "gpu.md: a table whose CSV is missing"

# ---------------------------------------------------------------- many ranks
# bench/nexar-vs-best-mpi's columns; 8 ranks only (the deadline dropped the rest).
many_header=size_bytes,mpi_default_gbs,mpi_sm_gbs,mpi_ring4_gbs,mpi_rabens6_gbs,best_mpi_gbs,nexar_least_gbs,nexar_most_gbs,ratio,nexar_pct_bound,nexar_pct_one_pass,worst_same_run_ratio,best_mpi_pct_bound,nexar_pct_node_bound_median,best_mpi_pct_node_bound,path
mkdir -p "$dir/many-ranks"
meta "$dir/many-ranks"
printf '%s\n%s\n%s\n' "$many_header" "4096,1.00,2.00,0.50,0.80,2.00,1.80,1.90,0.90,10,8,0.85,11,5,6,mpi" \
    "4194304,4.00,3.00,5.00,4.50,5.00,10.00,11.00,2.00,60,50,1.90,30,70,35,ring" >"$dir/many-ranks/many-ranks-8.csv"
page many-ranks
p="$dir/many-ranks.md"
has "$p" "| size | default GB/s | coll/sm GB/s | ring (4) GB/s | Rabenseifner (6) GB/s | nexar GB/s | nexar ÷ best | nexar % node | best MPI % node | path |"
has "$p" "| 4 MiB | 4.00 | 3.00 | 5.00 | 4.50 | 10.00 | 2.00× | 70 % | 35 % | ring |"
has "$p" "| 4 KiB | 1.00 | 2.00 | 0.50 | 0.80 | 1.80 | 0.90× | 5 % | 6 % | mpi |"
has "$p" "- **8 ranks**: nexar ÷ the best MPI algorithm: where nexar took the calls (1 size, 4 MiB): 2.00×; where it passed them through (1 size, 4 KiB): 0.90×. From 1 MiB: nexar at 70 % of the node bound, the best MPI at 35 %."
checks=$((checks + 1))
! grep -q "## 16 ranks" "$p" || fail "many-ranks.md: a table whose CSV is missing"
mv "$dir/many-ranks/many-ranks-8.csv" "$dir/many-8.csv"
must_fail "no many-ranks CSV" many-ranks "none of many-ranks-16.csv"

# scripts/results.sh --from-device: the pages of a device run's folder
# (test/gpu/run-on-device.sh's files), without running anything.
dev="$dir/device-out"
mkdir -p "$dev"
printf '%s\n' "date=2026-12-04T01:02:03Z" "cpu=Test EPYC 16-Core" "cores=16" "memory=125.0 GiB" "kernel=Linux 6.8.0-test" \
    "thp=always" "mpi=mpirun (Open MPI) 4.1.4" "ucx=1.13.1 (Debian's); 1.20.1 with CUDA (direct checks)" "nexar=0.1.0" \
    "git=abc1234" "gpu=NVIDIA H200 (driver 570.00)" >"$dev/machine.meta"
cp "$dir/gpu/gpu-kernel.csv" "$dev/kernel-bench.csv"
osu_csv "$dev/staged-ring.csv"
osu_csv "$dev/direct-ring-2.csv"
cp "$dir/many-8.csv" "$dev/many-ranks-16.csv"
# shellcheck disable=SC2016  # $OUT is literal in the commands
printf '%s\t%s\n' kernel-bench './nexar_gpu_reduce_bench --sizes 64M,1G --csv $OUT/kernel-bench.csv' \
    staged-ring 'env NEXAR_STATS=1 bench/nexar-osu -np 2 -d cuda --csv $OUT/staged-ring.csv' \
    direct-ring-2 'env NEXAR_CUDA_PATH=direct bench/nexar-osu -np 2 -d cuda --csv $OUT/direct-ring-2.csv' \
    many-ranks-16 'bench/nexar-vs-best-mpi -np 16 --node-bound --csv $OUT/many-ranks-16.csv' >"$dev/commands.txt"
printf 'check %s: PASS in 20s\n' gpu-kernels kernel-bench staged-ring direct-ring-2 many-ranks-16 >"$dev/summary.txt"
# A failed check's CSV makes no table.
osu_csv "$dev/ipc-4.csv"
echo "check ipc-4: FAIL (ipc_calls=0 on a rank, or no NEXAR_STATS line: the path did not run) in 9s" >>"$dev/summary.txt"
checks=$((checks + 1))
NEXAR_RESULTS_DIR="$dir/pages" "$src/scripts/results.sh" --from-device "$dev" >"$dir/err" 2>&1 ||
    fail "results.sh --from-device failed: $(cat "$dir/err")"
p="$dir/pages/gpu.md"
has "$p" "by \`test/gpu/run-on-device.sh\` on a lent machine, the page made by \`scripts/results.sh --from-device DIR gpu\`"
has "$p" "GPU: NVIDIA H200 (driver 570.00)"
# shellcheck disable=SC2016
has "$p" 'env NEXAR_CUDA_PATH=direct bench/nexar-osu -np 2 -d cuda --csv $OUT/direct-ring-2.csv'
has "$p" "## 2 ranks, the direct path (CUDA-aware UCX)"
checks=$((checks + 1))
! grep -q "4 ranks, GPU to GPU through IPC" "$p" || fail "gpu.md: a failed check's table"
has "$dir/pages/many-ranks.md" "Test EPYC 16-Core, 16 cores"
has "$dir/pages/many-ranks.md" "## 16 ranks, out of place"
has "$dir/pages/README.md" "[Many ranks on one node: allreduce against Open MPI's best](many-ranks.md) | 2026-12-04"
checks=$((checks + 1))
[ -f "$dir/pages/gpu/summary.txt" ] || fail "--from-device: the run's summary is not beside the page"

# ---------------------------------------------------------------- the index
checks=$((checks + 1))
"$python" "$page_py" --index "$dir" 2>"$dir/err" || fail "--index failed: $(cat "$dir/err")"
has "$dir/README.md" "| [One node, 4 KiB pages: allreduce](one-node.md) | 2026-12-03 | MPI ÷ nexar where nexar took the call (out of place, default: 1.50–2.00× at 16 KiB – 256 MiB; out of place, tuned: 1.50–2.00× at 16 KiB – 256 MiB; in place, default: 1.50–2.00× at 16 KiB – 256 MiB; in place, tuned: 1.50–2.00× at 16 KiB – 256 MiB); where it passed through: 0.91× at 4 KiB |"
has "$dir/README.md" "| 2026-12-03 (quick run) | quick run, not a measurement"
has "$dir/README.md" "| One node: reduce-scatter and allgather | not measured yet | \`scripts/results.sh reduce-scatter-allgather\` makes it |"
has "$dir/README.md" "[A real client: mpi4py gradient exchange](mpi4py.md)"

# ---------------------------------------------------------------- failures
rm "$dir/one-node/in-place-tuned.csv"
must_fail "a missing CSV" one-node "in-place-tuned.csv: no such file"
osu_csv "$dir/one-node/in-place-tuned.csv"
sed -i '3s/9.000/nine/' "$dir/one-node/in-place-tuned.csv"
must_fail "a value that is no number" one-node "in-place-tuned.csv line 3: mpi_avg_us = 'nine' is not a number"
osu_csv "$dir/one-node/in-place-tuned.csv"
sed -i '4s/,[^,]*$//' "$dir/one-node/in-place-tuned.csv"
must_fail "a row cut short" one-node "in-place-tuned.csv line 4: 15 fields where the header has 16"
echo "size_bytes,ranks,mpi_avg_us" >"$dir/one-node/in-place-tuned.csv"
must_fail "a CSV without the columns" one-node "in-place-tuned.csv: no column nexar_avg_us"
head -n 1 "$dir/across-nodes/allreduce.csv" >"$dir/x" && mv "$dir/x" "$dir/across-nodes/allreduce.csv"
must_fail "a header only" across-nodes "allreduce.csv: no data rows"
: >"$dir/mpi4py/grad-exchange.csv"
must_fail "an empty CSV" mpi4py "grad-exchange.csv: empty"
printf 'binary\0junk\n' >"$dir/gpu/gpu-kernel.csv"
must_fail "a CSV of another format" gpu "gpu-kernel.csv"
printf 'type,bytes\n\377\376,1\n' >"$dir/gpu/gpu-kernel.csv"
must_fail "a CSV that is not text" gpu "gpu-kernel.csv: not a CSV"
osu_csv "$dir/one-node/in-place-tuned.csv"
sed -i '/^date=/d' "$dir/one-node/meta"
must_fail "a meta file without a date" one-node "meta: no date"
rm "$dir/one-node/meta"
must_fail "no meta file" one-node "meta: no such file"
must_fail "an unknown topic" two-node "unknown topic 'two-node'"

echo "results page: $checks checks passed"
exit 0
