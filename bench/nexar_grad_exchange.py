#!/usr/bin/python3
"""A data-parallel gradient exchange as an mpi4py + numpy user writes it.

One rank of the job (bench/nexar-mpi4py-bench starts it under mpirun, with
and without nexar preloaded).  The gradients are shaped like GPT-2 small's
148 fp32 parameter tensors (124 M parameters, 475 MiB), allocated once with
numpy, which puts large arrays on transparent huge pages (madvise) where the
kernel allows.  Every step allreduces them in place with MPI.SUM:

  per-tensor  one MPI_Allreduce per tensor, last layer first, as a naive
              training loop does;
  bucketed    tensors packed into buckets of --bucket-mb MiB (the last
              layers first, as PyTorch DDP does), one MPI_Allreduce per
              bucket, then unpacked; packing and unpacking are part of the
              step.

Prints one line per run, `grad_exchange: key=value ...`, with the best and
the median over the timed steps of the step time and of the time inside
MPI_Allreduce (each step's slowest rank), and how much of the tensors'
memory the kernel backed with huge pages (AnonHugePages of /proc/self/smaps).
The first and the last step start from known values that differ by element
and rank, and every element of their results is checked against the exact
sums (the last step runs with whatever copy mode nexar settled on).
"""
import argparse
import sys
import time

import numpy as np
from mpi4py import MPI


def gpt2_small_shapes(layers=12, d=768, vocab=50257, context=1024):
    shapes = [(vocab, d), (context, d)]  # token and position embeddings
    for _ in range(layers):
        shapes += [(d,), (d,),                      # ln_1
                   (d, 3 * d), (3 * d,),            # attention qkv
                   (d, d), (d,),                    # attention projection
                   (d,), (d,),                      # ln_2
                   (d, 4 * d), (4 * d,),            # mlp up
                   (4 * d, d), (d,)]                # mlp down
    shapes += [(d,), (d,)]                          # ln_f
    return shapes


def huge_page_bytes(arrays):
    """Bytes of `arrays` in mappings backed by huge pages: each mapping's
    AnonHugePages, shared out by how much of the mapping the arrays cover."""
    ranges = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays)
    total = 0.0
    start = end = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = head.split("-")
                start, end = int(lo, 16), int(hi, 16)
            elif head == "AnonHugePages:" and start is not None:
                huge = int(line.split()[1]) * 1024
                if huge == 0:
                    continue
                covered = sum(max(0, min(e, end) - max(s, start)) for s, e in ranges)
                total += huge * covered / (end - start)
    return int(total)


def make_buckets(tensors, bucket_bytes):
    """Lists of tensor indices, last tensors first, each at most bucket_bytes
    (a larger tensor is a bucket of its own)."""
    buckets, current, size = [], [], 0
    for i in reversed(range(len(tensors))):
        n = tensors[i].nbytes
        if current and size + n > bucket_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += n
    if current:
        buckets.append(current)
    return buckets


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["per-tensor", "bucketed"], default="bucketed")
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--steps", type=int, default=12, help="timed steps (after --warmup)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--label", default="")
    a = p.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    tensors = [np.empty(s, dtype=np.float32) for s in gpt2_small_shapes()]

    # Small integers, exact in float32 whatever the order of the sums.
    def fill(r):
        for t in tensors:
            t.reshape(-1)[:] = np.arange(t.size, dtype=np.int64) % 13 + r + 1

    def wrong_tensors():
        bad = 0
        for t in tensors:
            base = (np.arange(t.size, dtype=np.int64) % 13 + 1) * size + size * (size - 1) // 2
            bad += int(not np.array_equal(t.reshape(-1), base.astype(np.float32)))
        return bad

    fill(rank)
    total = sum(t.nbytes for t in tensors)
    huge = comm.allreduce(huge_page_bytes(tensors), op=MPI.MIN)

    buckets = make_buckets(tensors, int(a.bucket_mb * 2**20))
    flat = [np.empty(sum(tensors[i].size for i in b), dtype=np.float32) for b in buckets] \
        if a.mode == "bucketed" else []

    def step():
        inside = 0.0
        if a.mode == "per-tensor":
            for t in reversed(tensors):
                t0 = time.perf_counter()
                comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)
                inside += time.perf_counter() - t0
        else:
            for b, buf in zip(buckets, flat):
                off = 0
                for i in b:
                    n = tensors[i].size
                    buf[off:off + n] = tensors[i].reshape(-1)
                    off += n
                t0 = time.perf_counter()
                comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                inside += time.perf_counter() - t0
                off = 0
                for i in b:
                    n = tensors[i].size
                    tensors[i].reshape(-1)[:] = buf[off:off + n]
                    off += n
        return inside

    step_times, inside_times = [], []
    last = a.warmup + a.steps - 1
    for k in range(a.warmup + a.steps):
        if k == last and last > 0:
            fill(rank)
        comm.Barrier()
        t0 = time.perf_counter()
        inside = step()
        elapsed = time.perf_counter() - t0
        if k == 0 or k == last:
            bad = comm.allreduce(wrong_tensors(), op=MPI.MAX)
            if bad:
                if rank == 0:
                    print("grad_exchange: FAIL: %d tensors hold wrong sums after step %d" % (bad, k), flush=True)
                comm.Abort(1)
            fill(rank)  # keep the values small
        if k >= a.warmup:
            step_times.append(comm.allreduce(elapsed, op=MPI.MAX))
            inside_times.append(comm.allreduce(inside, op=MPI.MAX))

    if rank == 0:
        def ms(v):
            return "%.1f" % (1e3 * v)
        print("grad_exchange: label=%s mode=%s ranks=%d tensors=%d calls_per_step=%d MiB=%.0f huge_MiB=%.0f steps=%d "
              "allreduce_ms_best=%s allreduce_ms_median=%s step_ms_best=%s step_ms_median=%s"
              % (a.label or "-", a.mode, size, len(tensors), len(tensors) if a.mode == "per-tensor" else len(buckets),
                 total / 2**20, huge / 2**20, a.steps, ms(min(inside_times)), ms(float(np.median(inside_times))),
                 ms(min(step_times)), ms(float(np.median(step_times)))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
