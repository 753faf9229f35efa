"""The ``minidb`` command (click).

``minidb demo`` is the main job of the quick start: on the default data directory
(``./minidb-data``) it loads a pgbench_accounts-shaped table the first time, then scans it
through the shared buffer pool and prints what the buffer manager did, so that a fresh
install shows the engine working end to end.  Later layers add the SQL REPL and
``minidb bench`` here.
"""

from __future__ import annotations

import os
import time

import click
import numpy as np

DEFAULT_DATADIR = "minidb-data"

ACCOUNTS = [("aid", "integer"), ("bid", "integer"), ("abalance", "integer"),
            ("filler", "character(84)")]


@click.group()
@click.version_option(package_name="minidb")
def main() -> None:
    """minidb: a relational storage engine built the way PostgreSQL is built."""


@main.command()
@click.option("-D", "--datadir", default=DEFAULT_DATADIR, show_default=True,
              help="data directory (created if new)")
@click.option("-s", "--scale", default=5, show_default=True,
              help="pgbench scale: 100,000 accounts rows per unit")
@click.option("--shared-buffers", default=16384, show_default=True,
              help="buffers of 8 kB in the shared pool")
def demo(datadir: str, scale: int, shared_buffers: int) -> None:
    """Load pgbench_accounts (first run) and scan it through the buffer pool."""
    from minidb.catalog import ColumnDef
    from minidb.errors import Error
    from minidb.heap.heapam import HeapRel, HeapScan, heap_bulk_insert
    from minidb.heap.layout import Column, RowLayout
    from minidb.instance import Instance

    try:
        inst = Instance(datadir, shared_buffers=shared_buffers)
    except Error as e:
        raise click.ClickException(str(e)) from None
    with inst:
        layout = RowLayout([Column(n, t) for n, t in ACCOUNTS])
        nrows = scale * 100_000
        if "pgbench_accounts" not in inst.catalog.tables:
            t = inst.catalog.create_table("pgbench_accounts",
                                          [ColumnDef(n, ty) for n, ty in ACCOUNTS])
            rel = HeapRel(t.name, t.relfilenode, layout)
            t0 = time.perf_counter()
            with inst.connect() as be:
                for lo in range(0, nrows, 100_000):
                    aid = np.arange(lo + 1, min(lo + 100_000, nrows) + 1, dtype=np.int32)
                    heap_bulk_insert(be.bufmgr, rel, {
                        "aid": aid, "bid": (aid - 1) // 100_000 + 1,
                        "abalance": np.zeros(len(aid), dtype=np.int32),
                        "filler": [""] * len(aid)}, len(aid), xmin=2)
            click.echo(f"loaded {nrows:,} rows into {os.path.abspath(datadir)} in "
                       f"{time.perf_counter() - t0:.1f} s")
        t = inst.catalog.table("pgbench_accounts")
        rel = HeapRel(t.name, t.relfilenode, layout)
        with inst.connect() as be:
            for attempt in ("first", "second"):
                before = be.counters()
                t0 = time.perf_counter()
                rows = matches = 0
                for batch in HeapScan(be.bufmgr, rel, [2]):
                    vals, _ = batch.columns[0]
                    rows += len(vals)
                    matches += int(np.count_nonzero(vals < 0))
                secs = time.perf_counter() - t0
                after = be.counters()
                d = {k: after[k] - before[k] for k in after}
                click.echo(f"{attempt} scan: {rows:,} rows, {matches} with abalance < 0, "
                           f"{secs:.2f} s ({rows / max(secs, 1e-9) / 1e6:.1f} M rows/s); "
                           f"buffers hit {d['buffers_hit']:,}, read {d['buffers_read']:,}, "
                           f"ring reuses {d['ring_reused']:,}")


if __name__ == "__main__":
    main()
