"""Catalog benchmark: what the catalog in heap tables costs on pgbench's select-only path.

The statement is pgbench's select-only transaction, ``SELECT abalance FROM
pgbench_accounts WHERE aid = ?`` with random aids, through the DB-API (autocommit, the
engine's plan cache: a warm prepared point select), on a table of ``--rows`` rows with a
primary key, warm in shared buffers.  Its catalog work per statement is the plan cache's
version check and the executor's ``heap_rel`` / index lookups: with the catalog in heap
tables each is one read of the shared invalidation counter and a dict lookup.

Measured: CPU time per statement (``time.process_time``, so other load on the machine
counts less than in wall time) of this tree and of a baseline commit (``--base``, by
default main before the catalog moved into heap tables), each in a fresh subprocess that
imports minidb from its own tree (the baseline from a temporary ``git worktree``), runs
alternating (this tree first in odd runs, the baseline first in even ones).  Printed: the
median and the spread (min - max) of each, and the difference of the medians; the issue's
budget is at most 1.5 us per statement added (for the lock manager and the catalog
together).  Check: every statement returns exactly one row with abalance 0.

    python bench/catalog_bench.py [--base d04f2c4] [--rows 10000] [--statements 20000]
                                  [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
POINT_SQL = "SELECT abalance FROM pgbench_accounts WHERE aid = ?"


def worker(tree: str, rows: int, statements: int) -> dict:
    """In a subprocess: load, warm, measure; the minidb imported is ``tree``'s."""
    sys.path.insert(0, tree)
    import minidb
    assert os.path.dirname(os.path.dirname(os.path.abspath(minidb.__file__))) == tree
    d = tempfile.mkdtemp(prefix="minidb-catbench-")
    try:
        conn = minidb.connect(os.path.join(d, "data"), shared_buffers=2048)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE pgbench_accounts (aid integer PRIMARY KEY, bid integer, "
                    "abalance integer, filler char(84))")
        batch = 1000
        for lo in range(1, rows + 1, batch):
            vals = ", ".join(f"({a}, 1, 0, '')" for a in range(lo, min(lo + batch, rows + 1)))
            cur.execute(f"INSERT INTO pgbench_accounts VALUES {vals}")
        cur.execute("VACUUM ANALYZE pgbench_accounts")
        rng = random.Random(1)
        aids = [rng.randint(1, rows) for _ in range(statements)]
        for a in aids[:2000]:                      # warm: plans, buffers, caches
            cur.execute(POINT_SQL, (a,))
            cur.fetchall()
        c0, w0 = time.process_time(), time.perf_counter()
        for a in aids:
            cur.execute(POINT_SQL, (a,))
            if cur.fetchall() != [(0,)]:
                raise SystemExit(f"wrong result for aid {a}")
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        conn.close()
        return {"cpu_us": cpu / statements * 1e6, "wall_us": wall / statements * 1e6}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _run(tree: str, args) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", tree,
                          "--rows", str(args.rows), "--statements", str(args.statements)],
                         capture_output=True, text=True, cwd=tree,
                         env=dict(os.environ, PYTHONPATH=tree))
    if out.returncode != 0:
        raise SystemExit(f"worker for {tree} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="d04f2c4", help="baseline commit (default d04f2c4)")
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--statements", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--worker", metavar="TREE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.rows, args.statements)))
        return
    base_dir = tempfile.mkdtemp(prefix="minidb-base-")
    base = os.path.join(base_dir, "tree")
    subprocess.run(["git", "-C", TREE, "worktree", "add", "--detach", "-q", base, args.base],
                   check=True)
    try:
        res = {"this tree": [], args.base: []}
        for r in range(args.runs):
            order = [("this tree", TREE), (args.base, base)]
            if r % 2:
                order.reverse()
            for name, tree in order:
                got = _run(tree, args)
                res[name].append(got["cpu_us"])
                print(f"run {r + 1}: {name:>10}: {got['cpu_us']:7.1f} us CPU / statement "
                      f"({got['wall_us']:.1f} us wall)", flush=True)
    finally:
        subprocess.run(["git", "-C", TREE, "worktree", "remove", "--force", base], check=False)
        shutil.rmtree(base_dir, ignore_errors=True)
    print(f"\nprepared point select through the DB-API, {args.statements} statements, "
          f"{args.rows} rows, {args.runs} alternating runs")
    med = {}
    for name, vals in res.items():
        med[name] = statistics.median(vals)
        print(f"  {name:>10}: median {med[name]:7.2f} us CPU / statement, spread "
              f"{min(vals):.2f} - {max(vals):.2f}")
    diff = med["this tree"] - med[args.base]
    print(f"  difference of the medians: {diff:+.2f} us / statement "
          f"(budget: +1.5 us with the lock manager)")


if __name__ == "__main__":
    main()
