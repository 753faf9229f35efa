"""Commit-log lookup micro-benchmark: the batch and scalar status lookups the visibility
code makes, on a commit log with ``--xids`` recorded statuses (every third aborted).

Reports, best of ``--repeat``: batch lookups of 256 xids on one clog page and spread over
the whole range (ns per xid), scalar lookups (ns each) and status sets (ns each).

    python bench/clog_lookup.py [--xids 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from minidb.instance import Instance  # noqa: E402
from minidb.txn.clog import ABORTED, COMMITTED  # noqa: E402


def best(fn, repeat):
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xids", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        inst = Instance(os.path.join(d, "data"), max_worker_processes=0, shared_buffers=64)
        try:
            clog = inst.clog
            setter = getattr(clog, "set_status", None) or clog.set
            n = a.xids
            t0 = time.perf_counter()
            for x in range(3, n + 3):
                setter(x, ABORTED if x % 3 == 0 else COMMITTED)
            t_set = (time.perf_counter() - t0) / n
            rng = np.random.default_rng(1)
            near = [np.sort(rng.integers(n - 30000, n, 256)) for _ in range(2000)]
            far = [rng.integers(3, n, 256) for _ in range(2000)]
            scal = rng.integers(3, n, 50000).tolist()
            want = np.where(near[0] % 3 == 0, ABORTED, COMMITTED)
            assert (clog.statuses(near[0]) == want).all()

            def run_near():
                for b in near:
                    clog.statuses(b)

            def run_far():
                for b in far:
                    clog.statuses(b)

            def run_scalar():
                st = clog.status
                for x in scal:
                    st(x)

            tn = best(run_near, a.repeat) / (2000 * 256)
            tf = best(run_far, a.repeat) / (2000 * 256)
            ts = best(run_scalar, a.repeat) / len(scal)
            print(f"batch one page   {tn * 1e9:8.1f} ns/xid")
            print(f"batch spread     {tf * 1e9:8.1f} ns/xid")
            print(f"scalar           {ts * 1e9:8.1f} ns")
            print(f"set              {t_set * 1e9:8.1f} ns")
        finally:
            inst.close()


if __name__ == "__main__":
    main()
