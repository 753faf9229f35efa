"""Table growth under repeated single-row updates: what pruning and HOT each save.

Setup: a table of 10 rows of about 256 bytes (an integer key, an integer counter and a
char(200) filler: about 30 versions fit on a page), in a data directory of its own, one
configuration at a time:
  1. ``heap_page_pruning = on``,  ``hot_updates = on``  (today's engine);
  2. ``heap_page_pruning = on``,  ``hot_updates = off`` (every update also inserts index
     entries - there is no index here, but the new version goes wherever there is room and
     the old one can only be cut to a dead line pointer);
  3. ``heap_page_pruning = off``, ``hot_updates = off`` (2002's engine: only VACUUM frees).
Run: ``--updates`` single-row updates (``counter = counter + 1``), row ``k % 10`` at step
``k``, each its own transaction through ``minidb.session.Session``; no VACUUM.
The figure: the table's pages at the end (it starts with 1); the baseline in the same run is
the first configuration's.
Check: every row's counter equals ``--updates / 10`` at the end (a lost update would show),
and ``check_heap`` passes.

    python bench/update_growth.py [--updates 10000]

It prints one line per configuration.  The same table with pruning and HOT on is asserted
to stay at its size in ``tests/heap/test_prune.py`` (``-k updated_table``); this script is
where the three figures of the README come from.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from minidb.catalog import ColumnDef  # noqa: E402
from minidb.heap.check import check_heap  # noqa: E402
from minidb.instance import Instance  # noqa: E402
from minidb.session import Session  # noqa: E402

CONFIGS = (("pruning on,  HOT on ", True, True),
           ("pruning on,  HOT off", True, False),
           ("pruning off, HOT off", False, False))


def grow(datadir: str, pruning: bool, hot: bool, updates: int) -> tuple[int, int, float]:
    """(pages at the start, pages at the end, CPU seconds) of one configuration."""
    inst = Instance(datadir, shared_buffers=1024)
    try:
        inst.catalog.create_table("t", [ColumnDef("id", "integer"), ColumnDef("n", "integer"),
                                        ColumnDef("f", "char(200)")])
        s = Session(inst, heap_page_pruning=pruning, hot_updates=hot)
        for i in range(10):
            s.insert("t", (i, 0, "x"))
        rel = s.rel("t")
        start = inst.smgr.nblocks(rel.relfilenode)
        cpu0 = time.process_time()
        for k in range(updates):
            i = k % 10
            s.update("t", lambda r, i=i: r[0] == i, lambda r: (r[0], r[1] + 1, r[2]))
        cpu = time.process_time() - cpu0
        end = inst.smgr.nblocks(rel.relfilenode)
        got = sorted(r[:2] for r in s.select("t"))
        want = [(i, updates // 10) for i in range(10)]
        if got != want:
            raise SystemExit(f"wrong counters after the updates: {got[:3]} ...")
        check_heap(s.backend, rel)
        s.close()
        return start, end, cpu
    finally:
        inst.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=10_000)
    args = ap.parse_args()
    if args.updates % 10:
        ap.error("--updates must be a multiple of 10")
    top = tempfile.mkdtemp(prefix="minidb-growth-")
    try:
        base = None
        print(f"{args.updates:,} single-row updates of a 10-row table, no VACUUM")
        for i, (label, pruning, hot) in enumerate(CONFIGS):
            start, end, cpu = grow(os.path.join(top, str(i)), pruning, hot, args.updates)
            base = base or end
            print(f"  {label}: {start} -> {end:4d} pages ({end / base:6.1f}x the first;"
                  f" {cpu / args.updates * 1e6:6.0f} us CPU per update)")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
