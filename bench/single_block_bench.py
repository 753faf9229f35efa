"""Block-at-a-time CPU per page against the serial scan, at zero I/O cost (issue 17, cause 1).

A parallel participant of a ``block``-allocated scan gets runs of one block.  This checks
that such a scan's CPU per page does not depend on the allocation policy: its reads are
issued one block at a time, in allocation order, but the pages are decoded in batches as
a serial scan's are.  Target: block-at-a-time CPU per page within 1.5x of serial.

Setup: the experiments' table ``t`` (pgbench_accounts-shaped rows, ``a`` = 1..n) of
``--table-mb``, shared_buffers 1024 (so every scan reads through a 256 kB ring), and the I/O
model's ``custom`` device at 10^6 MB/s and no seek: the model runs (its bookkeeping is part
of a read's CPU) but costs no time.  Each of ``--repeat`` rounds runs, each cold (the table's
buffers and the simulated OS cache emptied), the serial plan (``SELECT count(*) FROM t WHERE
a < 0`` with ``max_parallel_workers_per_gather = 0``) and the leader alone (0 workers) through
the block allocator with ``parallel_chunk_policy`` ``block``, ``fixed`` (64 blocks) and
``pg14``, with ``io_combine_limit`` 1 (one block per read call, as PostgreSQL 14/15 and the
experiments); the variants alternate (each round starts one later in the list), so a change
of the machine's load reaches all of them alike.  Reported: CPU microseconds per page of the
scanning process (``time.process_time`` around the scan), median (min-max) over the rounds,
and each variant's ratio to the serial scan of the same round, median (min-max), against the
1.5x target; the load average before and after.

    python bench/single_block_bench.py [--table-mb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minidb.experiments.common import (MB, load_scan_table, make_cold,  # noqa: E402
                                       parallel_count, sql_count)

VARIANTS = [("serial", None), ("block", "block"), ("fixed 64", "fixed"), ("pg14", "pg14")]
TARGET = 1.5  # issue 17: block-at-a-time CPU per page within 1.5x of serial


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table-mb", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5, help="alternated rounds")
    ap.add_argument("--io-combine-limit", type=int, default=1,
                    help="blocks per read call (1: PostgreSQL 14/15, as the experiments)")
    args = ap.parse_args()
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql.engine import Engine
    load0 = os.getloadavg()[0]
    d = tempfile.mkdtemp(prefix="minidb-sbb-")
    try:
        with Instance(os.path.join(d, "data"), shared_buffers=1024, max_connections=4,
                      max_worker_processes=0, io_model="custom", io_seq_mb_per_s=1e6,
                      io_seek_ms=0.0, os_cache_mb=max(1, args.table_mb // 8)) as inst:
            rel, nrows, nblocks = load_scan_table(inst, "t", args.table_mb * MB // 8192)
            sess = Session(inst)
            try:
                engine = Engine(sess)
                engine.execute("SET max_parallel_workers_per_gather = 0")
                engine.execute(f"SET io_combine_limit = {args.io_combine_limit}")
                be = sess.backend
                us = {label: [] for label, _ in VARIANTS}
                ratios = {label: [] for label, _ in VARIANTS}
                for r in range(args.repeat):
                    k = r % len(VARIANTS)
                    got = {}
                    for label, policy in VARIANTS[k:] + VARIANTS[:k]:
                        make_cold(inst, rel)
                        c0 = time.process_time()
                        if policy is None:
                            assert sql_count(engine, "SELECT count(*) FROM t WHERE a < 0") == 0
                        else:
                            be.settings.set("parallel_chunk_policy", policy)
                            count, seen, _ = parallel_count(be, rel, 0)
                            assert count == 0 and seen == nrows, (count, seen)
                        got[label] = (time.process_time() - c0) * 1e6 / nblocks
                    for label, v in got.items():
                        us[label].append(v)
                        ratios[label].append(v / got["serial"])
            finally:
                sess.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    load1 = os.getloadavg()[0]
    print(f"{nblocks:,} blocks, zero I/O cost; CPU us per page, median (min-max) of "
          f"{args.repeat} alternated rounds; load average {load0:.1f} before, {load1:.1f} "
          f"after, on {os.cpu_count()} cores:")
    for label, _ in VARIANTS:
        r = statistics.median(ratios[label])
        verdict = "" if label == "serial" else ("  within 1.5x" if r <= TARGET
                                                else "  OVER 1.5x")
        print(f"  {label:9s} {_spread(us[label], 1)} us/page  "
              f"{_spread(ratios[label], 2)}x serial{verdict}")


def _spread(values: list, digits: int) -> str:
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


if __name__ == "__main__":
    main()
