#!/usr/bin/python3
"""results_page.py: one results page of docs/results/ from a run's files.

  results_page.py TOPIC DIR [-o PAGE.md]   the page of TOPIC from DIR's CSVs
                                           and DIR/meta (stdout without -o)
  results_page.py --index RESULTS_DIR      (re)write RESULTS_DIR/README.md,
                                           the index of the pages there

scripts/results.sh runs the benchmarks of a topic into a fresh folder DIR,
writes DIR/meta, and then this script; only when both succeeded does the
folder become docs/results/TOPIC/ and the page docs/results/TOPIC.md.  The
page links its files as TOPIC/NAME, so it belongs beside that folder.

TOPIC is one-node, huge-pages, reduce-scatter-allgather, small-calls, across-nodes,
without-ucx, mpi-network, many-nodes, uneven-nodes, halves-across-nodes, mpi4py, gpu or many-ranks; each expects
its own CSVs (TOPICS below), in
the columns their tools write (bench/osu_allreduce.c,
bench/nexar-cluster-bench, bench/nexar-mpi4py-bench,
bench/gpu_reduce_bench.cu, bench/nexar-vs-best-mpi).  Tables listed as
optional (a device run's, where its deadline may have dropped some) appear
where their CSV is there.  DIR/meta holds
KEY=VALUE lines: date (UTC, ISO 8601), cpu, cores, memory, kernel, thp, mpi,
ucx, nexar, git, one command= line per command in the order run, and
optionally elapsed_s, quick (1: a quick run, not a measurement), settings
(the NEXAR_* variables in force), gpu and note= lines.

A CSV that is missing, empty, lacks a column or holds a value that is no
number stops the script with a message naming the file and line, and exit
status 1; no page is written then.  Python's standard library only.
"""
import csv
import datetime
import os
import re
import sys

# ---------------------------------------------------------------- topics

OSU_READ = (
    "The MPI's own `PMPI_*` call and nexar's `MPI_*` call alternated at every size in one run, each "
    "keeping its best average; the ratio is the MPI's time ÷ nexar's (above 1: nexar faster). Read the "
    "ratios: the two sides ran seconds apart, while absolute times on a shared VM swing by up to 2× "
    "between runs and are noise. The bound is this machine's floor for a design that copies every "
    "arriving byte through memory twice, measured in the same run on the same buffers with single-core "
    "`memcpy` and `dst += src` (header comment of `bench/osu_allreduce.c`); a design that moves each "
    "byte once can pass it, and where the buffers fit the cache (to about 8 MiB) or `memcpy` turns to "
    "non-temporal stores (256 MiB) the share is not comparable. `path` is what nexar's calls of that "
    "size did after the learner's trials: `ring`, `1shot` (one-shot, small calls), `hier`, `mpi` "
    "(passed through: both columns are the MPI), `fallbk`; `a+b`: some of each.")

TOPICS = {
    "one-node": {
        "title": "One node, 4 KiB pages: allreduce",
        "kind": "osu",
        "csvs": [
            ("out-of-place-default.csv", "Out of place, glibc's default allocator", "out of place, default"),
            ("out-of-place-tuned.csv", "Out of place, tuned allocator", "out of place, tuned"),
            ("in-place-default.csv", "In place, glibc's default allocator", "in place, default"),
            ("in-place-tuned.csv", "In place, tuned allocator", "in place, tuned"),
        ],
        "extra_plots": [("speedup.png", "MPI time ÷ nexar time against size",
                         "One line per table of this page, and the [huge pages](huge-pages.md) tables where "
                         "that page exists (its own date); above the line at 1, nexar was faster."),
                        ("report.png", "What the job report said",
                         "`NEXAR_REPORT` of a job of its own, out of place with the tuned allocator and 200 "
                         "calls per size (its table is in the run log, its CSV "
                         "[one-node/report.csv](one-node/report.csv)): per size class, "
                         "the slowest rank's time in the calls nexar took, all iterations and the learner's "
                         "trials included, against the MPI's time for the same calls estimated from its "
                         "trials in that job ([the job report](../user-guide.md#the-job-report)).")],
        "read": OSU_READ + " 2 ranks, float, `malloc`'s buffers on 4 KiB pages. With glibc's default "
                "allocator Open MPI maps (and page-faults) a fresh temporary buffer on every call above "
                "32 MiB, so the MPI collapses there; the tuned allocator (`MALLOC_MMAP_THRESHOLD_=1073741824 "
                "MALLOC_TRIM_THRESHOLD_=4294967296`) removes that and is the fair comparison.",
    },
    "huge-pages": {
        "title": "One node, huge pages: allreduce",
        "kind": "osu",
        "csvs": [
            ("out-of-place.csv", "Out of place, buffers on transparent huge pages", "out of place"),
            ("in-place.csv", "In place, buffers on transparent huge pages", "in place"),
        ],
        "read": OSU_READ + " 2 ranks, float, tuned allocator, buffers on transparent huge pages (`--thp`), "
                "as numpy and PyTorch put large arrays; the log's header says how much of them got huge "
                "pages.",
    },
    "reduce-scatter-allgather": {
        "title": "One node: reduce-scatter and allgather",
        "kind": "osu",
        "csvs": [
            ("reduce-scatter.csv", "`MPI_Reduce_scatter_block`, out of place, tuned allocator", "reduce-scatter"),
            ("allgather.csv", "`MPI_Allgather`, out of place, tuned allocator", "allgather"),
        ],
        "read": OSU_READ + " 2 ranks, float. The size is the whole vector S (S/n per rank), busbw = "
                "S/t × (n−1)/n; the reduce-scatter's bound is busbw ≤ 1/(1/Bc + 1/Br3) (each arrival "
                "copied in and reduced with the own input), the allgather's Bc/2 (two copies), with Bc "
                "single-core `memcpy` and Br3 `dst = a + b`.",
    },
    "small-calls": {
        "title": "One node, small calls: allreduce against three MPIs",
        "kind": "osu",
        "csvs": [
            ("open-mpi.csv", "Open MPI 4.1, its default (coll/tuned)", "Open MPI's default"),
            ("open-mpi-coll-sm.csv", "Open MPI 4.1, coll/sm (its shared-memory component)", "Open MPI's coll/sm"),
            ("mpich.csv", "MPICH 4.0, its default", "MPICH's default"),
        ],
        "persistent_csvs": [("persistent.csv", "Persistent against blocking, Open MPI 4.1's default",
                             "Persistent (Open MPI's default)")],
        "extra_plots": [("ratios.png", "MPI time ÷ nexar time against size",
                         "One line per MPI; above the line at 1, nexar was faster.")],
        "read": OSU_READ + " 2 ranks, float, glibc's default allocator, 8 B–64 KiB, 20000 calls per size. "
                "nexar's smallest calls are the known one-shot ([Small calls](../how-it-works.md#small-calls)): "
                "one exchange of a cache line each way up to 48 bytes, as the MPIs' own best; how near the "
                "two ranks' cores are sets that line's cost, and it differs between runs on this VM. The "
                "floor (`--floor`) is a bare exchange of the same bytes between the same processes through a "
                "shared window, timed in the same rounds: copy the input in, publish, wait for the other "
                "rank's, sum both (header comment of `bench/osu_allreduce.c`): the least a call that moves "
                "the inputs through memory once can take, and the one-shot's own work; from about 32 KiB the "
                "ring, which splits the sum between the ranks, passes it. The persistent table "
                "(`bench/nexar-overlap --persistent`, `bench/osu_iallreduce.c`) times `MPI_Start` + "
                "`MPI_Wait` of one persistent allreduce, the MPI's own and nexar's, beside each side's "
                "blocking call, best of 7 alternating repetitions; its last column is each repetition's "
                "blocking time ÷ persistent time (measured next to each other), the median and range. "
                "The same run times `MPI_Iallreduce` + `MPI_Wait` at once, the MPI's own and nexar's (the "
                "nonblocking table).",
    },
    "across-nodes": {
        "title": "Across nodes: allreduce over a simulated cluster",
        "kind": "cluster",
        "csvs": [("allreduce.csv", "2 nodes × 2 ranks, links limited to 2 Gbit/s each way", "2×2, 2 Gbit/s")],
        "read": "`bench/nexar-cluster-bench` runs `nexar_osu_allreduce` across a cluster simulated on this "
                "machine (`test/cluster/nexar-cluster`: a network namespace per node, TCP between nodes "
                "over links limited with `tc`), the MPI's `PMPI_Allreduce` and nexar's `MPI_Allreduce` "
                "side by side in one run; the ratio is nexar's busbw ÷ the MPI's, i.e. the MPI's time ÷ "
                "nexar's (above 1: nexar faster). The bound is the link rate: each node's link carries "
                "2(P−1)/P × S each way in a ring over P nodes, so t ≥ 2(P−1)/P × S / rate; `tc` counts "
                "TCP/IP headers too, so about 96 % of it is the most the payload can get. Ring calls 0: "
                "nexar passed that size to the MPI. nexar runs with no setting: between the nodes it times "
                "UCX and the MPI's point-to-point when a communicator is set up and each call takes the "
                "faster for its size. One VM's cores run every node's ranks: read the ratios and the "
                "shares of the link, not the absolute numbers.",
    },
    "without-ucx": {
        "title": "One node without UCX: allreduce",
        "kind": "osu",
        "csvs": [
            ("absent-default.csv", "UCX absent, out of place, glibc's default allocator", "default malloc"),
            ("absent-tuned.csv", "UCX absent, out of place, tuned allocator", "tuned malloc"),
        ],
        "read": OSU_READ + " 2 ranks, float, the ordinary build (made with UCX) preloaded where libucp, "
                "libucs, libuct and libucm are truly absent (`scripts/without-ucx`: overlay whiteouts in a "
                "private mount namespace), as on a node or in a container without UCX: nexar runs on shared "
                "memory alone. The MPI is Open MPI's default on the same node (its `pml/ucx` cannot load "
                "either, so it takes `ob1` and shared memory, as it does on one node anyway).",
    },
    "mpi-network": {
        "title": "Across nodes over the MPI's point-to-point (no UCX)",
        "kind": "cluster",
        "csvs": [("over-mpi.csv", "nexar over the MPI's point-to-point (`NEXAR_NET=mpi`), 2 nodes × 2 ranks, "
                  "2 Gbit/s links, against Open MPI's default, ring (4) and Rabenseifner (6)", "over the MPI"),
                 ("over-ucx.csv", "nexar over UCX (`NEXAR_NET=ucx`), the same links, against Open MPI's default",
                  "over UCX")],
        "read": "`bench/nexar-cluster-bench` as on the [across-nodes](across-nodes.md) page, once with "
                "`NEXAR_NET=mpi` (nexar's hops between nodes take `PMPI_Isend`/`PMPI_Irecv` on a private "
                "duplicate of the communicator, as where UCX has no transport for the network) with one run "
                "per Open MPI algorithm, and once over UCX (`NEXAR_NET=ucx`; with no setting nexar times "
                "both networks when a communicator is set up and each call takes the faster); each run "
                "measures the MPI and nexar side by side, and the ratio is against the best of that table's "
                "MPI columns. Comparing the two nexar columns compares runs minutes apart. Over the MPI, "
                "nexar sends 32 KiB segments, which the MPI sends eagerly (Open MPI's TCP eager limit is "
                "64 KiB): with UCX's 1 MiB segments the MPI's rendezvous, which over TCP waits on both "
                "ranks' calls into the MPI for every piece, held nexar at 71–78 % of the link. The bound "
                "is the link rate (2(P−1)/P × S each way over P nodes; about 96 % of it is the payload's "
                "most).",
    },
    "many-nodes": {
        "title": "Many nodes: the halving-doubling against the ring (8 simulated nodes)",
        "kind": "cluster",
        "csvs": [("auto.csv", "nexar with no setting (its model picks the ring or the halving-doubling per size), "
                  "8 nodes × 1 rank, 1 Gbit/s links, against Open MPI's default, recursive doubling (3) and "
                  "Rabenseifner (6)", "auto"),
                 ("ring.csv", "nexar's ring forced on every call (`NEXAR_ALGORITHM=ring NEXAR_THRESHOLD_BYTES=0`), "
                  "the same links, against Open MPI's default", "ring"),
                 ("rhd.csv", "nexar's halving-doubling forced on every call (`NEXAR_ALGORITHM=rhd "
                  "NEXAR_THRESHOLD_BYTES=0`), the same links, against Open MPI's default", "rhd")],
        # The summary's comparison across the runs: each of `others` ÷
        # `base` (nexar's busbw), and `mpi_of`'s nexar ÷ its best MPI column.
        "compare": {"base": "ring", "others": ["auto", "rhd"], "mpi_of": "auto"},
        "read": "`bench/nexar-cluster-bench` as on the [across-nodes](across-nodes.md) page, here 8 nodes of one rank "
                "each over links limited to 1 Gbit/s each way, in three runs, each measuring the MPI and nexar side "
                "by side: nexar with no setting against Open MPI's default, recursive doubling (3) and Rabenseifner "
                "(6), one job per algorithm (across nodes of one rank each, nexar times its flat ring and its "
                "halving-doubling, Rabenseifner's schedule, when a communicator is set up, and its cost model picks "
                "one per size; `NEXAR_LOG=info` puts the costs and the picks in the log, quoted in the summary); then "
                "the ring forced (`NEXAR_ALGORITHM=ring`) and the halving-doubling forced (`NEXAR_ALGORITHM=rhd`) on "
                "every call (`NEXAR_THRESHOLD_BYTES=0`, so the two compare as schedules), each against Open MPI's "
                "default. Each table's ratio is against the best of its own MPI columns; \"nexar ring calls\" counts "
                "the calls nexar took, by either schedule: with no setting, 8 warm-up calls per size cover the "
                "learner's trials (4 of nexar's, 4 of the MPI's), and 4 means the timed calls went to the MPI, which "
                "the learner measured as fast or faster there. The summary's nexar-auto ÷ nexar-ring and nexar-rhd ÷ nexar-ring "
                "are ratios of busbw from runs minutes apart, not side by side, and nexar-auto is the best of its "
                "three jobs where the others are one job each, which leans its ratio above 1. The 8 ranks share this VM's 2 cores: "
                "the cluster's launcher tells Open MPI so (`mpi_yield_when_idle`, as Open MPI sets itself on one "
                "oversubscribed node) and nexar yields as well, so a rank that waits hands its core on. At 1 Gbit/s a "
                "64 KiB call needs 0.9 ms on the link, and the ring's 14 steps may cost about as much again in "
                "latency (α 30–90 µs here), which the halving-doubling's 6 steps (2 log2 P against 2(P−1)) save; "
                "from about 128 KiB each schedule's segments keep the link busy while earlier ones are on their way, "
                "the ring runs near the link bound, and fewer steps have little to save ([the model's check]"
                "(model.md#checked-against-measured-times)). The bound "
                "is the link: in either schedule each node's link carries 2(P−1)/P × S each way, so t ≥ 2(P−1)/P × S "
                "/ rate for both (about 96 % of it is the payload's most): where one stays further below it than "
                "the other at the large sizes, that is its own overheads, not the bytes it moves.",
    },
    "uneven-nodes": {
        "title": "Nodes of different sizes: the hierarchical allreduce in lanes (3 + 2 ranks)",
        "kind": "cluster",
        "csvs": [("auto.csv", "nexar with no setting (its model picks the flat ring or the hierarchical allreduce "
                  "per size), 2 nodes of 3 and 2 ranks, 1 Gbit/s links, against Open MPI's default", "auto"),
                 ("ring.csv", "nexar's flat ring forced on every call (`NEXAR_ALGORITHM=ring NEXAR_THRESHOLD_BYTES=0`), "
                  "the same links, against Open MPI's default", "ring"),
                 ("hier.csv", "nexar's hierarchical allreduce forced on every call (`NEXAR_ALGORITHM=hier "
                  "NEXAR_THRESHOLD_BYTES=0`), the same links, against Open MPI's default", "hier")],
        "compare": {"base": "ring", "others": ["auto", "hier"], "mpi_of": "auto"},
        "read": "`bench/nexar-cluster-bench --hosts 0:3,1:2` as on the [across-nodes](across-nodes.md) page, here "
                "a node of 3 ranks and one of 2 over links limited to 1 Gbit/s each way, in three runs, each "
                "measuring the MPI and nexar side by side: nexar with no setting, then its flat ring forced and its "
                "hierarchical allreduce forced, on every call (`NEXAR_THRESHOLD_BYTES=0`). On nodes of different sizes the hierarchical allreduce crosses the "
                "network in as many lanes as the smallest node holds ranks (here 2; the third rank of the larger "
                "node takes part in its node's ring only, [How it works](../how-it-works.md#across-nodes)), "
                "so each node's link carries 2(P−1)/P × S = S each way, where the flat ring over the 5 ranks sends "
                "2(n−1)/n × S = 1.6 S through it: at most 62.5 % of the bound. The bound is the hierarchical "
                "allreduce's (t ≥ 2(P−1)/P × S / rate; about 96 % of it is the payload's most); busbw counts all "
                "5 ranks. The summary's ratios between nexar's runs compare runs minutes apart, not side by side. "
                "Five ranks share this VM's 2 cores: the cluster's launcher tells Open MPI so (`mpi_yield_when_idle`) "
                "and nexar yields as well, so a rank that waits hands its core on; ratios still swing by several "
                "per cent from run to run.",
    },
    "halves-across-nodes": {
        "title": "Reduce-scatter and allgather across nodes: the hierarchical halves (2 nodes x 2 ranks)",
        "kind": "cluster",
        "csvs": [("reduce_scatter-auto.csv", "MPI_Reduce_scatter_block: nexar with no setting (its model picks "
                  "the flat ring or the hierarchical reduce-scatter per size), 2 nodes x 2 ranks, 1 Gbit/s links, "
                  "against Open MPI's default", "rs-auto"),
                 ("reduce_scatter-ring.csv", "MPI_Reduce_scatter_block: nexar's flat ring forced on every call "
                  "(`NEXAR_ALGORITHM=ring NEXAR_THRESHOLD_BYTES=0`), the same links, against Open MPI's default",
                  "rs-ring"),
                 ("allgather-auto.csv", "MPI_Allgather: nexar with no setting, the same links, against Open MPI's "
                  "default", "ag-auto"),
                 ("allgather-ring.csv", "MPI_Allgather: nexar's flat ring forced on every call, the same links, "
                  "against Open MPI's default", "ag-ring")],
        "compare": [{"base": "rs-ring", "others": ["rs-auto"], "mpi_of": "rs-auto"},
                    {"base": "ag-ring", "others": ["ag-auto"], "mpi_of": "ag-auto"}],
        "read": "`bench/nexar-cluster-bench --collective reduce_scatter|allgather` as on the "
                "[across-nodes](across-nodes.md) page, 2 nodes of 2 ranks over links limited to 1 Gbit/s each way, "
                "in four runs, each measuring the MPI and nexar side by side: per collective nexar with no setting, "
                "then its flat ring forced on every call (`NEXAR_THRESHOLD_BYTES=0`). Where nodes hold the same number of ranks, the reduce-scatter and the "
                "allgather can take the hierarchical allreduce's halves ([How it works](../how-it-works.md#across-nodes)): "
                "the node's ring and one ring (or halving-doubling) per local rank across the nodes, over the MPI's "
                "blocks staged in lane order. Each node's link then carries (P−1)/P × S = S/2 each way, where the "
                "flat ring over the 4 ranks sends (n−1)/n × S = 0.75 S through it: at most 67 % of the bound. The "
                "bound is the hierarchical one (t ≥ (P−1)/P × S / rate; about 96 % of it is the payload's most; the "
                "t_bound column, an allreduce's, is twice that); busbw counts all 4 ranks ((n−1)/n × S / t). The "
                "summary's ratios between nexar's runs compare runs minutes apart, not side by side. Four ranks share "
                "this VM's 2 cores: the cluster's launcher tells Open MPI so (`mpi_yield_when_idle`) and nexar yields "
                "as well, so a rank that waits hands its core on; ratios still swing by several per cent from run to "
                "run.",
    },
    "mpi4py": {
        "title": "A real client: mpi4py gradient exchange",
        "kind": "mpi4py",
        "csvs": [("grad-exchange.csv", "GPT-2-small-shaped gradients (148 fp32 tensors, 475 MiB), 2 ranks, "
                  "in place", "gradient exchange")],
        "read": "`bench/nexar-mpi4py-bench` runs `bench/nexar_grad_exchange.py`, a gradient exchange "
                "written with mpi4py and numpy, once with the MPI alone and once with nexar preloaded: "
                "mpi4py cannot call `PMPI_Allreduce`, so the two sides cannot share a run. Each round runs "
                "both, alternating which goes first, each keeping the best of its steps; the ratios "
                "compare runs seconds apart, noisier than a side-by-side table, so read their range. "
                "\"Allreduce\" is the time inside `MPI_Allreduce` per step (the slowest rank's); the "
                "bucketed step also packs and unpacks 25 MiB buckets with numpy, the same cost either "
                "way. Absolute times on a shared VM are noise; there is no bound here.",
    },
    "gpu": {
        "title": "GPU: the reduction kernel and the staged device ring",
        "kind": "gpu",
        "csvs": [
            ("gpu-kernel.csv", "The reduction kernel against a device-to-device copy", "kernel"),
            ("gpu-staged-ring.csv", "The staged device ring against cudaMemcpy + PMPI_Allreduce + cudaMemcpy",
             "staged ring"),
        ],
        "read": "`nexar_gpu_reduce_bench` times nexar's reduction kernel against a device-to-device "
                "`cudaMemcpyAsync` of the same bytes, counting bytes read and written (3·S for the "
                "reduction, 2·S for the copy), so \"% of copy\" is how close the kernel comes to the copy "
                "engine. In the ring table the buffers are device memory and the MPI column is what users "
                "of an MPI without CUDA support do by hand: `cudaMemcpy` to the host, `PMPI_Allreduce`, "
                "`cudaMemcpy` back, side by side with nexar in one run; the ratio is that time ÷ nexar's. "
                "Both ranks share the one GPU; there is no host bound for device buffers. Where the run "
                "came from `test/gpu/run-on-device.sh`, the further tables compare nexar's paths for device "
                "buffers with every size forced onto nexar: GPU to GPU through CUDA IPC (a direct "
                "reduce-scatter + allgather), the staged ring, and the direct path (a ring whose bytes a "
                "UCX built with CUDA moves itself, over `cuda_ipc` on one node); their MPI column is the "
                "by-hand path as above.",
        "optional_csvs": [
            ("ipc-ring.csv", "2 ranks, GPU to GPU through IPC", "IPC, 2 ranks"),
            ("ipc-staged.csv", "2 ranks, the staged ring (IPC off)", "staged, 2 ranks"),
            ("direct-ring-2.csv", "2 ranks, the direct path (CUDA-aware UCX)", "direct, 2 ranks"),
            ("ipc-4.csv", "4 ranks, GPU to GPU through IPC", "IPC, 4 ranks"),
            ("direct-ring-4.csv", "4 ranks, the direct path (CUDA-aware UCX)", "direct, 4 ranks"),
            ("device-learnt-2.csv", "2 ranks, no setting: the learnt device path", "learnt, 2 ranks"),
            ("device-learnt-4.csv", "4 ranks, no setting: the learnt device path", "learnt, 4 ranks"),
        ],
    },
    "many-ranks": {
        "title": "Many ranks on one node: allreduce against Open MPI's best",
        "kind": "many",
        "csvs": [
            ("many-ranks-16.csv", "16 ranks, out of place", "16 ranks"),
            ("many-ranks-8.csv", "8 ranks, out of place", "8 ranks"),
            ("many-ranks-16-inplace.csv", "16 ranks, in place", "16 ranks in place"),
            ("many-ranks-4.csv", "4 ranks, out of place", "4 ranks"),
            ("many-ranks-2.csv", "2 ranks, out of place", "2 ranks"),
        ],
        "read": "`bench/nexar-vs-best-mpi` runs `bench/nexar-osu` once per Open MPI node algorithm (its "
                "default; `coll/sm`; tuned's ring, algorithm 4; tuned's Rabenseifner, algorithm 6), each "
                "run measuring that algorithm and nexar side by side, host buffers, float, tuned allocator, "
                "nexar with no setting (the learnt threshold). Each MPI column is that algorithm's busbw "
                "in its own run; \"nexar ÷ best\" is nexar's least busbw over the runs ÷ the best "
                "algorithm's at that size (above 1: nexar faster; a lower bound, since the runs are "
                "minutes apart). The node bound uses the copy-reduce bound's formula with `memcpy` and "
                "`dst += src` rates measured by every rank at once (all cores moving memory, the slowest "
                "rank's rate), so it is each rank's share of the node's memory bandwidth; \"% node\" is "
                "each side's busbw as a share of it (nexar's the median over the runs, the best MPI "
                "algorithm's from its own run). A table is missing where the run's deadline dropped it.",
    },
}
ORDER = ["one-node", "huge-pages", "reduce-scatter-allgather", "small-calls", "across-nodes", "without-ucx",
         "mpi-network", "many-nodes", "uneven-nodes", "halves-across-nodes", "mpi4py", "gpu", "many-ranks"]
REQUIRED_META = ["date", "cpu", "cores", "memory", "kernel", "thp", "mpi", "ucx", "nexar", "git"]
PATH_WORDS = {"mpi": "passed through", "ring": "ring", "1shot": "one-shot", "hier": "hierarchical",
              "fallbk": "fell back", "split": "ranks differ!", "-": "no counters"}


class PageError(Exception):
    pass


# ---------------------------------------------------------------- reading

def read_meta(path):
    if not os.path.isfile(path):
        raise PageError(f"{path}: no such file (scripts/results.sh writes it beside the CSVs)")
    meta, commands, notes = {}, [], []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except UnicodeDecodeError as e:
        raise PageError(f"{path}: not text ({e})") from None
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        if "=" not in line:
            raise PageError(f"{path} line {n}: not KEY=VALUE: {line!r}")
        key, value = line.split("=", 1)
        if key == "command":
            commands.append(value)
        elif key == "note":
            notes.append(value)
        else:
            meta[key] = value
    missing = [k for k in REQUIRED_META if not meta.get(k)]
    if missing:
        raise PageError(f"{path}: no {', '.join(missing)}")
    if not commands:
        raise PageError(f"{path}: no command= line")
    try:
        datetime.datetime.strptime(meta["date"], "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise PageError(f"{path}: date={meta['date']!r} is not YYYY-MM-DDTHH:MM:SSZ") from None
    meta["commands"], meta["notes"] = commands, notes
    return meta


def read_csv(path, numeric, optional=(), text=()):
    """Rows of the CSV as dicts; `numeric` columns must be there and hold
    numbers (floats), `optional` numeric ones may be absent or empty, `text`
    ones must be there."""
    if not os.path.isfile(path):
        raise PageError(f"{path}: no such file")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise PageError(f"{path}: not a CSV ({e})") from None
    if not lines or not lines[0]:
        raise PageError(f"{path}: empty (no header line)")
    header = [h.strip() for h in lines[0]]
    missing = [c for c in list(numeric) + list(text) if c not in header]
    if missing:
        raise PageError(f"{path}: no column {', '.join(missing)} in the header {','.join(header)!r}")
    rows = []
    for n, fields in enumerate(lines[1:], 2):
        if not fields or all(not x.strip() for x in fields):
            continue
        if len(fields) != len(header):
            raise PageError(f"{path} line {n}: {len(fields)} fields where the header has {len(header)}")
        row = dict(zip(header, (x.strip() for x in fields)))
        for c in list(numeric) + [c for c in optional if c in header]:
            v = row[c]
            if v == "" and c in optional:
                row[c] = None
                continue
            try:
                row[c] = float(v)
            except ValueError:
                raise PageError(f"{path} line {n}: {c} = {v!r} is not a number") from None
            if row[c] != row[c] or row[c] in (float("inf"), float("-inf")):
                raise PageError(f"{path} line {n}: {c} = {v!r} is not a finite number")
        for c in optional:
            row.setdefault(c, None)
        rows.append(row)
    if not rows:
        raise PageError(f"{path}: no data rows")
    return header, rows


# ---------------------------------------------------------------- formatting

def size_name(b):
    b = int(b)
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= unit:
            v = b / unit
            return f"{v:.0f} {name}" if v == int(v) else f"{v:.1f} {name}"
    return f"{b} B"


def ratio(x):
    return f"{x:.2f}×"


def rng(values, fmt=ratio):
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo).rstrip('×%')}–{fmt(hi)}"


def pct(x):
    return f"{x:.0f} %"


def pct_range(values):
    lo, hi = min(values), max(values)
    return f"{lo:.0f} %" if f"{lo:.0f}" == f"{hi:.0f}" else f"{lo:.0f}–{hi:.0f} %"


def size_span(sizes):
    sizes = sorted(sizes)
    if len(sizes) == 1:
        return size_name(sizes[0])
    return f"{size_name(sizes[0])} – {size_name(sizes[-1])}"


def sizes(rows):
    """'3 sizes, 4 KiB – 16 KiB' or '1 size, 4 KiB'."""
    n = len(rows)
    return f"{n} size{'s' if n > 1 else ''}, {size_span([r['size_bytes'] for r in rows])}"


def gbs(x):
    # Four decimals below 0.01 GB/s: slow links' small sizes.
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def us(x):
    # Two decimals below 10 µs: the small calls' differences are tenths.
    return f"{x:,.2f}" if x < 10 else f"{x:,.1f}" if x < 10000 else f"{x:,.0f}"


def table(head, align, rows):
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def path_label(p):
    if p is None or p == "":
        return "-"
    return p


# ---------------------------------------------------------------- the topics' tables

def osu_rows(path):
    _, rows = read_csv(path, ["size_bytes", "mpi_avg_us", "nexar_avg_us"],
                       optional=["mpi_busbw_gbs", "nexar_busbw_gbs", "bound_busbw_gbs", "floor_us"])
    for r in rows:
        if r["mpi_avg_us"] <= 0 or r["nexar_avg_us"] <= 0:
            raise PageError(f"{path}: a time of 0 or less at {int(r['size_bytes'])} bytes")
        r["ratio"] = r["mpi_avg_us"] / r["nexar_avg_us"]
        bound = r["bound_busbw_gbs"]
        r["mpi_pct"] = 100 * r["mpi_busbw_gbs"] / bound if bound and r["mpi_busbw_gbs"] is not None else None
        r["nexar_pct"] = 100 * r["nexar_busbw_gbs"] / bound if bound and r["nexar_busbw_gbs"] is not None else None
        r["path"] = r.get("path") or "-"
    return rows


def osu_table(rows):
    # The exchange floor (nexar-osu --floor), where the run measured it.
    floor = any(r["floor_us"] for r in rows)
    body = []
    for r in rows:
        cells = [size_name(r["size_bytes"]), us(r["mpi_avg_us"]), us(r["nexar_avg_us"]), ratio(r["ratio"]),
                 pct(r["mpi_pct"]) if r["mpi_pct"] is not None else "–",
                 pct(r["nexar_pct"]) if r["nexar_pct"] is not None else "–"]
        if floor:
            cells += [us(r["floor_us"]), pct(100 * r["floor_us"] / r["nexar_avg_us"])] if r["floor_us"] else ["–", "–"]
        body.append(cells + ["split (ranks differ!)" if r["path"] == "split" else r["path"]])
    head = ["size", "MPI µs", "nexar µs", "MPI ÷ nexar", "MPI % of bound", "nexar % of bound"]
    head += ["floor µs", "nexar % of floor"] if floor else []
    return table(head + ["path"], ["---:"] * (len(head)) + ["---"], body)


def osu_summary(rows):
    """Lines: the ratio per path the sizes settled on, and the shares of
    the bound from 1 MiB."""
    groups = {}
    for r in rows:
        groups.setdefault(r["path"], []).append(r)
    parts = []
    for p, g in groups.items():
        word = PATH_WORDS.get(p, "mixed" if "+" in p else p)
        parts.append(f"`{p}` ({word}; {sizes(g)}): {rng([r['ratio'] for r in g])}")
    lines = ["MPI ÷ nexar by the path nexar's calls took: " + "; ".join(parts) + "."]
    big = [r for r in rows if r["size_bytes"] >= (1 << 20) and r["nexar_pct"] is not None]
    if big:
        lines.append(f"From 1 MiB ({size_span([r['size_bytes'] for r in big])}): nexar at "
                     f"{pct_range([r['nexar_pct'] for r in big])} of the bound, the MPI at "
                     f"{pct_range([r['mpi_pct'] for r in big])}.")
    elif any(r["size_bytes"] >= (1 << 20) for r in rows):
        lines.append("No host bound (device buffers).")
    else:
        lines.append("No size of 1 MiB or more in this run.")
    floor = [r for r in rows if r["floor_us"]]
    if floor:
        lines.append(f"The exchange floor ({size_span([r['size_bytes'] for r in floor])}): "
                     f"{rng([r['floor_us'] for r in floor], lambda x: us(x) + ' µs')}; nexar at "
                     f"{pct_range([100 * r['floor_us'] / r['nexar_avg_us'] for r in floor])} of it.")
    return lines


def persistent_rows(path):
    times = ["mpi_blocking_us", "mpi_persistent_us", "nexar_blocking_us", "nexar_persistent_us",
             "mpi_nonblocking_us", "nexar_nonblocking_us"]
    cols = ["size_bytes"] + times + ["nexar_persistent_speedup_median", "nexar_persistent_speedup_min",
                                     "nexar_persistent_speedup_max"]
    _, rows = read_csv(path, cols)
    for r in rows:
        if min(r[c] for c in times) <= 0:
            raise PageError(f"{path}: a time of 0 or less at {int(r['size_bytes'])} bytes")
        r["vs_mpi"] = r["mpi_persistent_us"] / r["nexar_persistent_us"]
        r["nonblocking_vs_mpi"] = r["mpi_nonblocking_us"] / r["nexar_nonblocking_us"]
    return rows


def persistent_table(rows):
    body = [[size_name(r["size_bytes"]), us(r["mpi_blocking_us"]), us(r["mpi_persistent_us"]),
             us(r["nexar_blocking_us"]), us(r["nexar_persistent_us"]), ratio(r["vs_mpi"]),
             f"{ratio(r['nexar_persistent_speedup_median'])} [{r['nexar_persistent_speedup_min']:.2f}, "
             f"{r['nexar_persistent_speedup_max']:.2f}]"] for r in rows]
    return table(["size", "MPI blocking µs", "MPI persistent µs", "nexar blocking µs", "nexar persistent µs",
                  "MPI persistent ÷ nexar persistent", "nexar blocking ÷ persistent, median [range]"],
                 ["---:"] * 7, body)


def nonblocking_table(rows):
    body = [[size_name(r["size_bytes"]), us(r["mpi_nonblocking_us"]), us(r["nexar_nonblocking_us"]),
             ratio(r["nonblocking_vs_mpi"]), ratio(r["nexar_nonblocking_us"] / r["nexar_blocking_us"])] for r in rows]
    return table(["size", "MPI nonblocking µs", "nexar nonblocking µs", "MPI ÷ nexar",
                  "nexar nonblocking ÷ its blocking"], ["---:"] * 5, body)


def persistent_summary(rows):
    return (f"nexar's persistent call against the MPI's persistent call: {rng([r['vs_mpi'] for r in rows])} "
            f"({size_span([r['size_bytes'] for r in rows])}); its blocking time ÷ its persistent time, the median "
            f"per size: {rng([r['nexar_persistent_speedup_median'] for r in rows])} (1: as fast); its "
            f"nonblocking call (`MPI_Iallreduce` + `MPI_Wait` at once) against the MPI's: "
            f"{rng([r['nonblocking_vs_mpi'] for r in rows])}.")


def osu_headline(tables):
    """MPI / nexar where nexar took the calls, per table; where they passed
    through, all tables together; each with the sizes it covers."""
    taken, passed, unknown = [], [], []
    for _, short, rows in tables:
        t = [r for r in rows if r["path"] not in ("mpi", "-")]
        if t:
            text = f"{rng([r['ratio'] for r in t])} at {size_span([r['size_bytes'] for r in t])}"
            taken.append(f"{short}: {text}" if len(tables) > 1 else text)
        passed += [r for r in rows if r["path"] == "mpi"]
        unknown += [r for r in rows if r["path"] == "-"]
    out = []
    if taken:
        out.append("MPI ÷ nexar where nexar took the call" + (" (" + "; ".join(taken) + ")" if len(tables) > 1
                                                                 else ": " + taken[0]))
    for label, group in (("where it passed through", passed),
                         ("MPI ÷ nexar" + (" where the CSV names no path" if out else ""), unknown)):
        if group:
            out.append(f"{label}: {rng([r['ratio'] for r in group])} at "
                       f"{size_span(sorted({r['size_bytes'] for r in group}))}")
    return "; ".join(out)


def cluster_rows(path):
    header, _ = read_csv(path, ["size_bytes", "nexar_busbw_gbs"])
    algs = [h[:-len("_busbw_gbs")] for h in header if h.startswith("mpi_") and h.endswith("_busbw_gbs")]
    if not algs:
        raise PageError(f"{path}: no mpi_<alg>_busbw_gbs column in the header {','.join(header)!r}")
    numeric = ["size_bytes", "nexar_busbw_gbs", "nexar_ring_calls"] + [a + "_busbw_gbs" for a in algs]
    optional = ["nexar_pct_bound", "bound_busbw_gbs", "t_bound_us"] + [a + "_pct_bound" for a in algs]
    _, rows = read_csv(path, numeric, optional=optional)
    for r in rows:
        best = max(r[a + "_busbw_gbs"] for a in algs)
        if best <= 0 or r["nexar_busbw_gbs"] <= 0:
            raise PageError(f"{path}: a busbw of 0 or less at {int(r['size_bytes'])} bytes")
        r["best_mpi"] = best
        r["best_alg"] = next(a for a in algs if r[a + "_busbw_gbs"] == best)
        r["ratio"] = r["nexar_busbw_gbs"] / best
        bound = r["bound_busbw_gbs"]
        r["mpi_pct"] = 100 * best / bound if bound else None
        r["nexar_pct"] = 100 * r["nexar_busbw_gbs"] / bound if bound else None
    return algs, rows


ALG_NAMES = {"mpi_default": "MPI (default)", "mpi_ring4": "MPI ring (4)", "mpi_rabens6": "MPI Rabenseifner (6)",
             "mpi_alg3": "MPI recursive doubling (3)"}


def cluster_table(algs, rows):
    head = ["size"] + [ALG_NAMES.get(a, a) + " GB/s" for a in algs] + ["nexar GB/s", "MPI ÷ nexar (time)",
                                                                        "MPI % of link", "nexar % of link",
                                                                        "nexar ring calls"]
    body = []
    for r in rows:
        body.append([size_name(r["size_bytes"])] + [gbs(r[a + "_busbw_gbs"]) for a in algs] +
                    [gbs(r["nexar_busbw_gbs"]), ratio(r["ratio"]),
                     pct(r["mpi_pct"]) if r["mpi_pct"] is not None else "–",
                     pct(r["nexar_pct"]) if r["nexar_pct"] is not None else "–", f"{r['nexar_ring_calls']:.0f}"])
    return table(head, ["---:"] * len(head), body)


def cluster_summary(algs, rows):
    took = [r for r in rows if r["nexar_ring_calls"] > 0]
    passed = [r for r in rows if r["nexar_ring_calls"] == 0]
    against = "the MPI" if len(algs) == 1 else "the best of the MPI's algorithms"
    parts = []
    if took:
        parts.append(f"where nexar took the calls ({sizes(took)}): {rng([r['ratio'] for r in took])}")
    if passed:
        parts.append(f"where it passed them through ({sizes(passed)}): {rng([r['ratio'] for r in passed])}")
    lines = [f"MPI time ÷ nexar time against {against}: " + "; ".join(parts) + "."]
    big = [r for r in rows if r["size_bytes"] >= (8 << 20) and r["nexar_pct"] is not None]
    if big:
        lines.append(f"From 8 MiB: nexar at {pct_range([r['nexar_pct'] for r in big])} of the link bound, "
                     f"the MPI at {pct_range([r['mpi_pct'] for r in big])}.")
    elif not any(r["nexar_pct"] is not None for r in rows):
        lines.append("No link bound (unlimited links or one node).")
    else:
        lines.append("No size of 8 MiB or more in this run.")
    return lines


def cluster_headline(rows):
    took = [r["ratio"] for r in rows if r["nexar_ring_calls"] > 0] or [r["ratio"] for r in rows]
    h = f"MPI ÷ nexar {rng(took)} ({size_span([r['size_bytes'] for r in rows])})"
    big = [r["nexar_pct"] for r in rows if r["size_bytes"] >= (8 << 20) and r["nexar_pct"] is not None]
    if big:
        h += f", nexar at {pct_range(big)} of the link from 8 MiB"
    return h


def compare_runs(runs, base, others, mpi_of):
    """The comparison of nexar's runs of a cluster topic (runs: short name ->
    rows): per size each of `others` ÷ `base` (nexar's busbw, runs minutes
    apart) and `mpi_of`'s nexar ÷ the best MPI column of its own run.
    Returns the summary's lines (a table, then one line per ratio, below
    and from 1 MiB) and the headline."""
    names = [base] + others
    by_size = {n: {r["size_bytes"]: r for r in runs[n]} for n in names}
    common = sorted(set.intersection(*(set(v) for v in by_size.values())))
    if not common:
        raise PageError(f"the {', '.join(names)} runs have no size in common")
    vs_base = {n: {s: by_size[n][s]["nexar_busbw_gbs"] / by_size[base][s]["nexar_busbw_gbs"] for s in common}
               for n in others}
    head = (["size"] + [f"nexar-{n} GB/s" for n in names] + [f"{n} ÷ {base}" for n in others] +
            [f"{mpi_of} ÷ best MPI", "best MPI (its run)"])
    body = []
    for size in common:
        m = by_size[mpi_of][size]
        best = ALG_NAMES.get(m["best_alg"], m["best_alg"]).replace("MPI (default)", "default").replace("MPI ", "")
        body.append([size_name(size)] + [gbs(by_size[n][size]["nexar_busbw_gbs"]) for n in names] +
                    [ratio(vs_base[n][size]) for n in others] +
                    [ratio(m["ratio"]), best])
    lines = ["Per size, nexar's busbw in each run and the ratios (above 1: the first is faster); the ratios "
             f"between nexar's runs compare runs minutes apart, `{mpi_of} ÷ best MPI` is side by side in one run:",
             ""] + table(head, ["---:"] * (len(head) - 1) + ["---"], body) + [""]

    def split(values):
        """'a–b× below 1 MiB (64 KiB – 512 KiB), c–d× from 1 MiB (…)'."""
        parts = []
        for label, group in (("below 1 MiB", [(s, v) for s, v in values if s < (1 << 20)]),
                             ("from 1 MiB", [(s, v) for s, v in values if s >= (1 << 20)])):
            if group:
                parts.append(f"{rng([v for _, v in group])} {label} ({size_span([s for s, _ in group])})")
        return ", ".join(parts)

    ratios = [(f"nexar-{n} ÷ nexar-{base}", split(list(vs_base[n].items()))) for n in others]
    ratios.append((f"nexar-{mpi_of} ÷ the best MPI of its run",
                   split([(s, by_size[mpi_of][s]["ratio"]) for s in common])))
    lines += [f"- {what}: {text}." for what, text in ratios]
    return lines, "; ".join(f"{what} {text}" for what, text in ratios)


PICKS_RE = re.compile(r"^nexar\[rank 0\]: .*halving-doubling allreduce ready.*?; network (\S+): (.*); "
                      r"NEXAR_ALGORITHM=auto picks: (.*)$")
# The hierarchical allreduce's line (nodes of several ranks).
HIER_PICKS_RE = re.compile(r"^nexar\[rank 0\]: communicator context \d+: (.*?); hierarchical allreduce ready; "
                           r"cost model \((\w+)\): (.*); NEXAR_ALGORITHM=auto picks: (.*)$")
HIER_COSTS_RE = re.compile(r"^shm alpha=(\S+)us beta=(\S+)GB/s, network alpha=(\S+)us beta=(\S+)GB/s per node$")
COSTS_RE = re.compile(r"^ring alpha=(\S+)us beta=(\S+)GB/s \((\w+)\), "
                      r"halving-doubling alpha=(\S+)us beta=(\S+)GB/s \((\w+)\)$")


def model_picks(d):
    """The summary's line on what nexar's model picked, from rank 0's lines
    of the run log (NEXAR_LOG=info): one per job, in order."""
    path = os.path.join(d, "run-log.txt")
    found = []
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f.read().splitlines():
                m = PICKS_RE.match(line)
                if m:
                    net, costs, picks = m.groups()
                    c = COSTS_RE.match(costs)
                    if c:
                        costs = (f"ring α {c.group(1)} µs, β {c.group(2)} GB/s ({c.group(3)}); halving-doubling "
                                 f"α {c.group(4)} µs, β {c.group(5)} GB/s ({c.group(6)})")
                    found.append(f"({net}): {costs} → {picks}")
                    continue
                m = HIER_PICKS_RE.match(line)
                if m:
                    shape, how, costs, picks = m.groups()
                    c = HIER_COSTS_RE.match(costs)
                    if c:
                        costs = (f"shared memory α {c.group(1)} µs, β {c.group(2)} GB/s; network α {c.group(3)} µs, "
                                 f"β {c.group(4)} GB/s per node ({how})")
                    found.append(f"({shape}, hierarchical allreduce): {costs} → {picks}")
    if not found:
        return "- The run log has no `NEXAR_ALGORITHM=auto picks:` line of rank 0 (`NEXAR_LOG=info`)."
    jobs = [f"job {n} {text}" for n, text in enumerate(found, 1)]
    return ("- What nexar's model picked with no setting (rank 0's log, one job per MPI column of that run; α a "
            "message's cost, β the rate per node's link): " + "; ".join(jobs) + ".")


def mpi4py_rows(path):
    _, rows = read_csv(path, ["run", "calls_per_step", "mpi_allreduce_ms", "nexar_allreduce_ms", "mpi_step_ms",
                              "nexar_step_ms"], optional=["huge_mib", "total_mib"], text=["mode"])
    for r in rows:
        if min(r["mpi_allreduce_ms"], r["nexar_allreduce_ms"], r["mpi_step_ms"], r["nexar_step_ms"]) <= 0:
            raise PageError(f"{path}: a time of 0 or less in round {r['run']:.0f} ({r['mode']})")
        r["ratio"] = r["mpi_allreduce_ms"] / r["nexar_allreduce_ms"]
        r["step_ratio"] = r["mpi_step_ms"] / r["nexar_step_ms"]
    return rows


def mpi4py_table(rows):
    body = []
    for r in rows:
        huge = "–"
        if r["huge_mib"] is not None and r["total_mib"]:
            huge = f"{r['huge_mib']:.0f} of {r['total_mib']:.0f} MiB"
        body.append([f"{r['run']:.0f}", r["mode"], f"{r['calls_per_step']:.0f}", f"{r['mpi_allreduce_ms']:.1f}",
                     f"{r['nexar_allreduce_ms']:.1f}", ratio(r["ratio"]), f"{r['mpi_step_ms']:.1f}",
                     f"{r['nexar_step_ms']:.1f}", ratio(r["step_ratio"]), huge])
    return table(["round", "mode", "calls per step", "allreduce: MPI ms", "nexar ms", "MPI ÷ nexar",
                  "step: MPI ms", "nexar ms", "MPI ÷ nexar", "on huge pages (nexar run)"],
                 ["---:", "---"] + ["---:"] * 8, body)


def mpi4py_modes(rows):
    modes = {}
    for r in rows:
        modes.setdefault(r["mode"], []).append(r)
    return modes


def mpi4py_summary(rows):
    lines = []
    for m, g in mpi4py_modes(rows).items():
        lines.append(f"`{m}` ({len(g)} round{'s' if len(g) > 1 else ''}): time in `MPI_Allreduce` "
                     f"{rng([r['ratio'] for r in g])} lower with nexar, the whole step "
                     f"{rng([r['step_ratio'] for r in g])}.")
    return lines


def mpi4py_headline(rows):
    return (f"time in `MPI_Allreduce` {rng([r['ratio'] for r in rows])} lower with nexar, whole step "
            f"{rng([r['step_ratio'] for r in rows])}")


def kernel_rows(path):
    _, rows = read_csv(path, ["bytes", "copy_gbs", "reduce_gbs"],
                       optional=["inplace_gbs", "unroll4_gbs", "exact", "inplace_exact", "unroll4_exact"],
                       text=["type"])
    for r in rows:
        if r["copy_gbs"] <= 0:
            raise PageError(f"{path}: a copy bandwidth of 0 or less for {r['type']}")
    return rows


def kernel_table(rows):
    def of(x, r):
        return f"{x:.0f} ({100 * x / r['copy_gbs']:.0f} %)" if x is not None else "–"

    def exact(r):
        flags = [r[k] for k in ("exact", "inplace_exact", "unroll4_exact") if r[k] is not None]
        return "–" if not flags else "yes" if all(flags) else "NO"

    body = [[r["type"], size_name(r["bytes"]), f"{r['copy_gbs']:.0f}", of(r["reduce_gbs"], r),
             of(r["inplace_gbs"], r), of(r["unroll4_gbs"], r), exact(r)] for r in rows]
    return table(["type", "size", "copy GB/s", "reduce GB/s (% of copy)", "in place", "4 vectors per thread",
                  "exact"], ["---", "---:", "---:", "---:", "---:", "---:", "---"], body)


def kernel_summary(rows):
    by_size = {}
    for r in rows:
        by_size.setdefault(r["bytes"], []).append(100 * r["reduce_gbs"] / r["copy_gbs"])
    parts = [f"{size_name(b)}: {pct_range(v)}" for b, v in by_size.items()]
    wrong = [r for r in rows if any(r[k] == 0 for k in ("exact", "inplace_exact", "unroll4_exact"))]
    tail = " Every result exact." if not wrong else f" WRONG RESULTS in {len(wrong)} rows."
    return ["The kernel's bandwidth as a share of the device copy's: " + "; ".join(parts) + "." + tail]


MANY_ALGS = [("mpi_default_gbs", "default"), ("mpi_sm_gbs", "coll/sm"), ("mpi_ring4_gbs", "ring (4)"),
             ("mpi_rabens6_gbs", "Rabenseifner (6)")]


def many_rows(path):
    _, rows = read_csv(path, ["size_bytes", "best_mpi_gbs", "nexar_least_gbs", "ratio"],
                       optional=[c for c, _ in MANY_ALGS] + ["nexar_pct_node_bound_median", "best_mpi_pct_node_bound"],
                       text=["path"])
    return rows


def many_table(rows):
    algs = [(c, n) for c, n in MANY_ALGS if any(r[c] is not None for r in rows)]
    head = ["size"] + [n + " GB/s" for _, n in algs] + ["nexar GB/s", "nexar ÷ best", "nexar % node",
                                                        "best MPI % node", "path"]
    body = []
    for r in rows:
        node = r["nexar_pct_node_bound_median"]
        mnode = r["best_mpi_pct_node_bound"]
        body.append([size_name(r["size_bytes"])] + [f"{r[c]:.2f}" if r[c] is not None else "–" for c, _ in algs] +
                    [f"{r['nexar_least_gbs']:.2f}", ratio(r["ratio"]), pct(node) if node is not None else "–",
                     pct(mnode) if mnode is not None else "–", r["path"]])
    return table(head, ["---:"] * (len(head) - 1) + ["---"], body)


def many_took(r):
    """nexar took the calls of that size in at least one run."""
    return any(p in ("ring", "1shot", "hier") for p in re.split(r"[+/]", r["path"]))


def many_summary(rows):
    took = [r for r in rows if many_took(r)]
    passed = [r for r in rows if not many_took(r)]
    parts = []
    if took:
        parts.append(f"where nexar took the calls ({sizes(took)}): {rng([r['ratio'] for r in took])}")
    if passed:
        parts.append(f"where it passed them through ({sizes(passed)}): {rng([r['ratio'] for r in passed])}")
    line = "nexar ÷ the best MPI algorithm: " + "; ".join(parts) + "."
    big = [r for r in rows if r["size_bytes"] >= (1 << 20) and r["nexar_pct_node_bound_median"] is not None]
    if big:
        line += (f" From 1 MiB: nexar at {pct_range([r['nexar_pct_node_bound_median'] for r in big])} of the node "
                 f"bound, the best MPI at {pct_range([r['best_mpi_pct_node_bound'] for r in big])}.")
    return line


# ---------------------------------------------------------------- the page

def rel(topic, name):
    return f"{topic}/{name}"


def render(topic, d):
    if topic not in TOPICS:
        raise PageError(f"unknown topic {topic!r} (one of {', '.join(ORDER)})")
    if not os.path.isdir(d):
        raise PageError(f"{d}: no such folder")
    t = TOPICS[topic]
    meta = read_meta(os.path.join(d, "meta"))
    quick = meta.get("quick") == "1"
    sections, summary, headline = [], [], ""

    def links(name):
        out = [f"CSV: [{rel(topic, name)}]({rel(topic, name)})"]
        png = name[:-4] + ".png"
        if os.path.isfile(os.path.join(d, png)):
            out.append(f"plot: [{rel(topic, png)}]({rel(topic, png)})")
            return ["; ".join(out) + ".", "", f"![{png}]({rel(topic, png)})"]
        return ["; ".join(out) + " (no plot)."]

    if t["kind"] == "osu":
        tables = []
        for name, title, short in t["csvs"]:
            rows = osu_rows(os.path.join(d, name))
            tables.append((title, short, rows))
            sections += [f"## {title}", ""] + links(name) + [""] + osu_table(rows) + [""]
            summary += [f"- **{short}**: " + " ".join(osu_summary(rows))]
        headline = osu_headline(tables)
        # A persistent table, where the topic has one.
        for name, title, short in t.get("persistent_csvs", []):
            rows = persistent_rows(os.path.join(d, name))
            sections += [f"## {title}", ""] + links(name) + [""] + persistent_table(rows) + [""]
            sections += ["Nonblocking (`MPI_Iallreduce` + `MPI_Wait` at once), from the same run:", ""]
            sections += nonblocking_table(rows) + [""]
            summary += [f"- **{short}**: " + persistent_summary(rows)]
    elif t["kind"] == "cluster":
        heads, runs = [], {}
        for name, title, short in t["csvs"]:
            algs, rows = cluster_rows(os.path.join(d, name))
            runs[short] = rows
            sections += [f"## {title}", ""] + links(name) + [""] + cluster_table(algs, rows) + [""]
            lines = cluster_summary(algs, rows)
            summary += ["- " + (f"**{short}**: " if len(t["csvs"]) > 1 else "") + line for line in lines]
            heads.append((f"{short}: " if len(t["csvs"]) > 1 else "") + cluster_headline(rows))
        headline = "; ".join(heads)
        if "compare" in t:
            # One comparison, or one per collective of the topic.
            compares = t["compare"] if isinstance(t["compare"], list) else [t["compare"]]
            lines, heads = [], []
            for c in compares:
                more, head = compare_runs(runs, c["base"], c["others"], c["mpi_of"])
                lines += more + [""]
                heads.append(head)
            headline = "; ".join(heads)
            summary = lines + [model_picks(d), "", "Each run against its own MPI columns:", ""] + summary
    elif t["kind"] == "mpi4py":
        name, title, short = t["csvs"][0]
        rows = mpi4py_rows(os.path.join(d, name))
        sections += [f"## {title}", ""] + links(name) + [""] + mpi4py_table(rows) + [""]
        summary += ["- " + line for line in mpi4py_summary(rows)]
        headline = mpi4py_headline(rows)
    elif t["kind"] == "gpu":
        # The kernel's table is required; the staged ring's (a results.sh
        # run's) and a device run's tables appear where their CSVs are.
        (kname, ktitle, _), (rname, rtitle, rshort) = t["csvs"]
        krows = kernel_rows(os.path.join(d, kname))
        sections += [f"## {ktitle}", ""] + links(kname) + [""] + kernel_table(krows) + [""]
        summary += ["- " + kernel_summary(krows)[0]]
        pcts = [100 * r["reduce_gbs"] / r["copy_gbs"] for r in krows]
        headline = f"kernel at {pct_range(pcts)} of a device copy"
        for name, title, short in [(rname, rtitle, rshort)] + t.get("optional_csvs", []):
            if not os.path.isfile(os.path.join(d, name)):
                continue
            rows = osu_rows(os.path.join(d, name))
            sections += [f"## {title}", ""] + links(name) + [""] + osu_table(rows) + [""]
            summary += [f"- **{short}**: nexar {rng([r['ratio'] for r in rows])} the by-hand path "
                        f"({size_span([r['size_bytes'] for r in rows])})."]
            if name == rname:
                headline += f"; staged ring {rng([r['ratio'] for r in rows])} the by-hand path"
    elif t["kind"] == "many":
        found = []
        for name, title, short in t["csvs"]:
            if not os.path.isfile(os.path.join(d, name)):
                continue
            rows = many_rows(os.path.join(d, name))
            found.append((short, rows))
            sections += [f"## {title}", ""] + links(name) + [""] + many_table(rows) + [""]
            summary += [f"- **{short}**: " + many_summary(rows)]
        if not found:
            raise PageError(f"{d}: none of {', '.join(n for n, _, _ in t['csvs'])}")
        headline = "nexar ÷ Open MPI's best: " + "; ".join(
            f"{short} {rng([r['ratio'] for r in rows if many_took(r)] or [r['ratio'] for r in rows])}"
            for short, rows in found)
    plots = []
    for png, heading, what in t.get("extra_plots", []):
        if os.path.isfile(os.path.join(d, png)):
            plots += [f"## {heading}", "", f"{what} [{rel(topic, png)}]({rel(topic, png)})", "",
                      f"![{png}]({rel(topic, png)})", ""]

    date = meta["date"]
    day = date[:10]
    if quick:
        headline = "quick run, not a measurement: " + headline
    elapsed = ""
    if meta.get("elapsed_s", "").isdigit():
        s = int(meta["elapsed_s"])
        elapsed = f" (the run took {s // 60} min {s % 60} s)"
    out = [f"<!-- results-page: topic={topic} date={day} quick={1 if quick else 0} "
           f"headline={headline.replace('--', '- -')} -->",
           f"# {t['title']}", ""]
    if quick:
        out += ["> **Quick run** (`NEXAR_RESULTS_QUICK=1`): fewer sizes, iterations or rounds than a real run, "
                "to check that the page can be made (the commands below say which). These numbers are not a "
                f"measurement; run `scripts/results.sh {topic}` without it.", ""]
    by = (f"`test/gpu/run-on-device.sh` on a lent machine, the page made by "
          f"`scripts/results.sh --from-device DIR {topic}`" if meta.get("from_device") else
          f"`scripts/results.sh {topic}`")
    out += [f"Measured on {day} at {date[11:16]} UTC by "
            f"{by}{elapsed}. A rerun replaces this page and the files in "
            f"[{topic}/]({topic}/); the raw output is [{rel(topic, 'run-log.txt')}]({rel(topic, 'run-log.txt')}).",
            ""]
    machine = (f"**Machine:** {meta['cpu']}, {meta['cores']} cores, {meta['memory']} memory, "
               f"{meta['kernel']}, transparent huge pages `{meta['thp']}`")
    if meta.get("virt"):
        machine += f", virtualization {meta['virt']}"
    if meta.get("gpu"):
        machine += f"; GPU: {meta['gpu']}"
    machine += (f". **MPI:** {meta['mpi']}; **UCX:** {meta['ucx']}. **nexar:** {meta['nexar']} "
                f"(git `{meta['git']}`), settings: {meta.get('settings') or 'none (its defaults)'}.")
    out += [machine, "", "## Commands", "", "```sh"] + meta["commands"] + ["```", ""]
    out += [f"Run from the source tree after `make`; `$OUT` is a fresh folder, which became [{topic}/]({topic}/) "
            "once every command had succeeded."]
    out += [""] + [n for n in meta["notes"]] + ([""] if meta["notes"] else [])
    out += ["## Summary", ""] + summary + ["", "## How to read this", "", t["read"], ""] + plots + sections
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n", headline


# ---------------------------------------------------------------- the index

HEADER_RE = re.compile(r"^<!-- results-page: topic=(\S+) date=(\S+) quick=(\d) headline=(.*) -->$")


def page_header(path):
    with open(path, encoding="utf-8") as f:
        first = f.readline().rstrip("\n")
    m = HEADER_RE.match(first)
    if not m:
        return None
    return {"topic": m.group(1), "date": m.group(2), "quick": m.group(3) == "1", "headline": m.group(4)}


def write_index(results_dir):
    if not os.path.isdir(results_dir):
        raise PageError(f"{results_dir}: no such folder")
    rows = []
    for topic in ORDER:
        page = os.path.join(results_dir, topic + ".md")
        title = TOPICS[topic]["title"]
        h = page_header(page) if os.path.isfile(page) else None
        if h is None and os.path.isfile(page):
            raise PageError(f"{page}: its first line is not a results-page header")
        if h is None:
            rows.append([title, "not measured yet", f"`scripts/results.sh {topic}` makes it"])
        else:
            rows.append([f"[{title}]({topic}.md)", h["date"] + (" (quick run)" if h["quick"] else ""),
                         h["headline"]])
    out = ["# Results", "",
           "One page per topic, each from one run of `scripts/results.sh TOPIC` on the machine it names, with "
           "the exact commands, the CSVs, the plots and the raw log. A rerun replaces the page and its folder; "
           "older runs are not kept beside it (what changed between versions is in `NEWS`).", ""]
    out += table(["page", "measured", "headline"], ["---", "---", "---"], rows)
    out += ["", "Ratios are the MPI's time ÷ nexar's from one run side by side (above 1: nexar faster); on a "
            "shared VM the absolute numbers are noise. What the bounds mean: [Benchmarking](../benchmarking.md).",
            "", "## Regenerating", "", "```sh",
            "make && scripts/results.sh                 # every topic (or: make results)",
            "scripts/results.sh one-node mpi4py         # some topics",
            "NEXAR_RESULTS_QUICK=1 scripts/results.sh one-node   # a quick check of the script, not a measurement",
            "scripts/results.sh --from-device OUTDIR    # gpu and many-ranks from a run of test/gpu/run-on-device.sh",
            "```", "",
            "`across-nodes`, `mpi-network`, `many-nodes`, `uneven-nodes` and `halves-across-nodes` need root (network namespaces), `without-ucx` root (a "
            "private mount "
            "namespace), `gpu` a GPU and `many-ranks` 16 cores; where a topic "
            "cannot run, the script says why and leaves its page as it is. A lent GPU machine (one H200, 16 "
            "cores) runs both of the latter in `test/gpu/run-on-device.sh`, whose output folder makes their "
            "pages. Each page says how long its run took.", "",
            "[The model across nodes to 10,000 nodes](model.md): predictions, the time of each schedule nexar can "
            "choose and Open MPI's choice beside it (`nexar-info --model`), and at its end the predictions checked "
            "against measured times at 2–8 simulated nodes (`bench/nexar-model-check`, run by hand).", ""]
    with open(os.path.join(results_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(out))


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "--index":
            write_index(argv[2])
            return 0
        out = None
        args = list(argv[1:])
        if "-o" in args:
            i = args.index("-o")
            if i + 1 >= len(args):
                raise PageError("-o takes a file name")
            out = args[i + 1]
            del args[i:i + 2]
        if len(args) != 2 or args[0].startswith("-"):
            sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
            return 2
        page, _ = render(args[0], args[1])
        if out:
            tmp = out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(page)
            os.replace(tmp, out)
        else:
            sys.stdout.write(page)
        return 0
    except PageError as e:
        sys.stderr.write(f"results_page.py: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
