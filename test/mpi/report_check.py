#!/usr/bin/env python3
"""Checks a NEXAR_REPORT job against what the same job says elsewhere.

    report_check.py --log LOG --csv CSV --ranks N [--estimates] [--expect ...]

LOG holds the job's stderr: every rank's NEXAR_STATS line, rank 0's report
table, and (--estimates) every rank's NEXAR_LOG=debug lines of the learner's
MPI trials.  Checked, independently of the report's own arithmetic:
  - the table is printed once, by one process;
  - the CSV's calls and bytes, per path and per collective, equal every
    rank's NEXAR_STATS counters exactly (all the job's calls are on
    communicators of every rank here, so every rank's counts are alike);
  - the table's rows and its closing line add up to the same calls;
  - (--estimates) the learner's MPI trials the debug log lists come in its
    blocks, each block's first cold (left out of the estimate); each size
    class's MPI estimate is the slowest rank's mean warm trial of its kind
    of buffers times the calls it is for; classes with none say why.
"""
import argparse
import collections
import csv
import math
import re
import sys

NEXAR_PATHS = ("ring", "one-shot", "hierarchical", "IPC")
COLLECTIVE_OF_CALL = {
    "MPI_Allreduce": "MPI_Allreduce",
    "MPI_Allreduce_c": "MPI_Allreduce",
    "MPI_Reduce_scatter": "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block": "MPI_Reduce_scatter",
    "MPI_Allgather": "MPI_Allgather",
}
STATS_OF_COLLECTIVE = {"MPI_Reduce_scatter": "reduce_scatter_calls", "MPI_Allgather": "allgather_calls"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, file=sys.stderr)


def blocking_name(name):
    """MPI_Iallreduce and MPI_Allreduce_init -> MPI_Allreduce."""
    if name.endswith("_init"):
        name = name[: -len("_init")]
    if name.startswith("MPI_I"):
        name = "MPI_" + name[5].upper() + name[6:]
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--estimates", action="store_true")
    ap.add_argument("--expect", action="append", default=[], help="text the table must hold")
    args = ap.parse_args()
    log = open(args.log, errors="replace").read().splitlines()

    # The NEXAR_STATS lines, one per rank.
    stats = {}
    for line in log:
        m = re.match(r"^nexar: rank (\d+): (ring_calls=.*)$", line)
        if m:
            stats[int(m.group(1))] = {k: int(v) for k, v in (f.split("=") for f in m.group(2).split())}
    if sorted(stats) != list(range(args.ranks)):
        fail("expected a NEXAR_STATS line from each of %d ranks, found ranks %s" % (args.ranks, sorted(stats)))

    # The table: printed once.
    heads = [l for l in log if re.match(r"^nexar report: \d+ ranks? on \d+ nodes?, nexar ", l)]
    if len(heads) != 1:
        fail("the report's first line appears %d times (once expected): %s" % (len(heads), heads))
    elif not heads[0].startswith("nexar report: %d rank" % args.ranks):
        fail("the report names the wrong number of ranks: " + heads[0])
    table = [l for l in log if l.startswith("nexar report:   MPI_")]
    closing = [l for l in log if l.startswith("nexar report: nexar took")]
    if len(closing) != 1:
        fail("the report's closing line appears %d times" % len(closing))
    for text in args.expect:
        if not any(text in l for l in log if l.startswith("nexar report")):
            fail("the report does not say: " + text)

    rows = list(csv.DictReader(open(args.csv)))
    if not rows:
        fail("the CSV has no rows")

    # Counts against every rank's counters.
    def total(pred, field="calls"):
        return sum(int(r[field]) for r in rows if pred(r))

    nexar = lambda r: r["path"] in NEXAR_PATHS
    want = {
        "ring_calls": total(nexar),
        "ring_bytes": total(nexar, "bytes"),
        "one_shot_calls": total(lambda r: r["path"] == "one-shot"),
        "ipc_calls": total(lambda r: r["path"] == "IPC"),
        "hier_calls": total(lambda r: r["path"] == "hierarchical"),
    }
    for coll, field in STATS_OF_COLLECTIVE.items():
        want[field] = total(lambda r, c=coll: nexar(r) and blocking_name(r["collective"]) == c)
    mpi_calls = total(lambda r: r["path"] == "MPI")
    for rank, s in sorted(stats.items()):
        for field, value in want.items():
            # A hierarchical run through IPC counts in hier_calls and
            # ipc_calls, and is an IPC row: with IPC, hier_calls is an upper bound.
            if field == "hier_calls" and s["ipc_calls"]:
                if value > s[field]:
                    fail("rank %d: hier_calls=%d, the report's hierarchical rows say %d" % (rank, s[field], value))
            elif s[field] != value:
                fail("rank %d: %s=%d, the report's rows say %d" % (rank, field, s[field], value))
        if s["passthrough_calls"] + s["fallback_calls"] != mpi_calls:
            fail("rank %d: passthrough_calls+fallback_calls=%d, the report's MPI rows say %d"
                 % (rank, s["passthrough_calls"] + s["fallback_calls"], mpi_calls))
    print("report_check: the CSV's %d rows count %d calls, %d of them nexar's (%d bytes), %d the MPI's: "
          "equal to every rank's NEXAR_STATS" % (len(rows), want["ring_calls"] + mpi_calls, want["ring_calls"],
                                                  want["ring_bytes"], mpi_calls))

    # The table's rows and closing line add up to the CSV's calls.
    table_calls = 0
    for l in table:
        m = re.match(r"^nexar report:   (\S+)\s+(\S+)\s+(\d+)\s", l)
        if not m:
            fail("a table row that does not parse: " + l)
            continue
        table_calls += int(m.group(3))
    if table_calls != want["ring_calls"] + mpi_calls:
        fail("the table's rows count %d calls, the CSV %d" % (table_calls, want["ring_calls"] + mpi_calls))
    if closing and want["ring_calls"]:
        m = re.search(r"nexar took (\d+) of (\d+) calls", closing[0])
        if not m or int(m.group(1)) != want["ring_calls"] or int(m.group(2)) != want["ring_calls"] + mpi_calls:
            fail("the closing line's counts differ from the rows: " + closing[0])

    if args.estimates:
        check_estimates(log, rows)
    if failures:
        sys.exit(1)


def check_estimates(log, rows):
    """Each blocking row's MPI estimate against the MPI trials the debug log
    lists: the trials' structure first (each block of the learner's MPI
    trials has one cold call, its first), then each row's estimate, the
    slowest rank's mean warm trial of its buffers' kind times the calls."""
    # (rank, collective, shape, class) -> [warm ns, warm count, cold count]
    trials = collections.defaultdict(lambda: [0, 0, 0])
    for line in log:
        m = re.match(r"^nexar\[rank (\d+)\]: communicator context \d+: (\S+) (in place|out of place) on (host|device) "
                     r"buffers of (\d+) bytes: an MPI trial took ([0-9.]+) us here( \(cold)?", line)
        if not m:
            continue
        key = (int(m.group(1)), COLLECTIVE_OF_CALL[m.group(2)], (m.group(3), m.group(4)), int(m.group(5)).bit_length() - 1)
        t = trials[key]
        if m.group(7):
            t[2] += 1
        else:
            t[0] += round(float(m.group(6)) * 1000)
            t[1] += 1
    if not trials:
        fail("the debug log lists no MPI trial: NEXAR_LOG=debug was not on, or nothing was learnt")
        return
    # The structure: blocks of 4 MPI trials below 64 KiB, of 2 from it
    # (decide/path_learner.h), each block's first cold; every rank alike.
    by_class = collections.defaultdict(dict)
    for (rank, coll, shape, sc), (ns, warm, cold) in trials.items():
        block = 4 if sc < 16 else 2
        if cold < 1 or warm != (block - 1) * cold:
            fail("rank %d %s %s 2^%d bytes: %d cold and %d warm MPI trials, not blocks of %d with one cold each"
                 % (rank, coll, shape, sc, cold, warm, block))
        by_class[(coll, sc)].setdefault(shape, {})[rank] = (ns, warm, cold)
    for (coll, sc), shapes in by_class.items():
        for shape, ranks in shapes.items():
            if len({(w, c) for (_, w, c) in ranks.values()}) != 1:
                fail("%s %s 2^%d bytes: the ranks logged different numbers of MPI trials: %s" % (coll, shape, sc, ranks))
    estimated = unestimated = 0
    for r in rows:
        if r["path"] not in NEXAR_PATHS or r["mode"] != "blocking":
            continue
        sc = int(r["size_from"]).bit_length() - 1
        calls, est_calls = int(r["calls"]), int(r["estimated_calls"])
        shapes = by_class.get((r["collective"], sc), {})
        if est_calls == 0:
            if r["mpi_estimate_seconds"] != "" or "no warm trial" not in r["note"]:
                fail("%s %s: no estimate, yet the CSV says estimate=%r note=%r"
                     % (r["collective"], r["size_from"], r["mpi_estimate_seconds"], r["note"]))
            unestimated += 1
            continue
        if not shapes:
            fail("%s %s: an estimate for %d calls, but no MPI trial was logged at that size"
                 % (r["collective"], r["size_from"], est_calls))
            continue
        # Each kind of buffers: the slowest rank's mean warm trial.
        means = [max(ns / warm for (ns, warm, _) in ranks.values()) * 1e-9 for ranks in shapes.values()]
        got = float(r["mpi_estimate_seconds"])
        lo, hi = min(means) * est_calls, max(means) * est_calls
        # The library rounds to the nanosecond; one kind of buffers: exact.
        slack = 1e-9 * (est_calls + 1) + 1e-6 * hi
        if not (lo - slack <= got <= hi + slack):
            fail("%s %s: estimate %s s for %d calls; the logged warm MPI trials give %.9g s%s"
                 % (r["collective"], r["size_from"], r["mpi_estimate_seconds"], est_calls, lo,
                    "" if len(means) == 1 else " to %.9g s (%d kinds of buffers)" % (hi, len(means))))
        if est_calls > calls:
            fail("%s %s: %d estimated calls of %d" % (r["collective"], r["size_from"], est_calls, calls))
        estimated += 1
    if not estimated:
        fail("no size class nexar took has an MPI estimate")
    colds = sum(c for (_, _, c) in trials.values())
    print("report_check: the MPI trials come in blocks with one cold call each (%d cold, left out); %d rows' "
          "MPI estimates equal their logged warm trials' mean times their calls; %d rows without say so"
          % (colds, estimated, unestimated))


if __name__ == "__main__":
    main()
