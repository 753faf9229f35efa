"""OLTP benchmark: pgbench's single-row statements through minidb's SQL engine, prepared and
in the simple protocol, each beside sqlite3 doing the same statements in the same run.

Setup: pgbench's four tables at ``--scale`` (``minidb.pgbench.init_pgbench``: 100,000
accounts per unit, primary keys), warm in a pool that holds them; the same rows in an
in-memory sqlite3 database with the same primary keys (INTEGER PRIMARY KEY on the key
columns, sqlite's rowid B-tree).  minidb's session runs with ``--synchronous-commit``
(default off, as the issue's targets are stated; on adds a WAL flush per commit).

Run (one connection; the random keys are the same for both engines, and each workload of a
round draws its own keys, so none reads the rows another just updated):
  1. point select   ``SELECT abalance FROM pgbench_accounts WHERE aid = ?``, autocommit,
     prepared (``Engine.prepare`` once, then ``execute(params)``);
  2. UPDATE by key  ``UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?``,
     autocommit (sqlite3 in autocommit mode too: ``isolation_level=None``);
  3. pgbench's TPC-B-like transaction: BEGIN, three UPDATEs (account, teller, branch), a
     SELECT, an INSERT into pgbench_history, COMMIT;
  4. and 5. the point select and the TPC-B-like transaction in the simple protocol: each
     statement a new text with its values written in, through ``Engine.execute`` (pgbench's
     default ``-M simple``; minidb parameterizes the literals, ``minidb.sql.normalize``).

Figures: per operation, the CPU time of every process involved - this process (the driver
and the instance's threads, the WAL writer among them) and every process forked from it
(``cpu_all``: ``/proc``'s utime + stime) - and the wall clock; the median and the CPU's
spread over ``--repeat`` rounds, minidb and sqlite3 taking turns in each round, so a change
of the machine's load hits both.  The load average is printed: prefer the CPU figures on a
loaded machine.

Check: every point select returns exactly one row, every UPDATE reports exactly one row,
and at the end the sum of abalance equals the sum of the deltas applied, in both engines
(and minidb's sum of tbalance / bbalance equals the TPC-B deltas), so a fast wrong result
cannot pass.

    python bench/oltp_bench.py [--scale 1] [--ops 5000] [--repeat 3] [--synchronous-commit off]

Where a prepared point select's ~120-180 us go (measured piece by piece after the OLTP
pass): the B-tree descent, three levels of pin, share lock, 8 KB copy, binary search,
unlock, unpin, ~16-23 us (of each level's ~3 us, the lock round trips are most; the copy
is 0.2 us, so searching pages in place does not pay); the index scan's set-up and its leaf
batches ~15-25 us; the heap fetch (HOT chain, MVCC, decode) ~25 us; the executor (context,
compiled expressions, one-row chunks, projection) ~25-30 us; the engine, snapshot, commit
and statistics flush ~20 us.  An UPDATE by key adds opportunistic pruning of its page
(pgbench_accounts pages are full at fillfactor 100, so each update's page is pruned on the
next visit, as in PostgreSQL), heap_update and, when not HOT, an index insertion.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

if "PYTHONPATH" not in os.environ:   # compare_commits sets it to the commit's tree
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from minidb.pgbench import init_pgbench  # noqa: E402
from minidb.instance import Instance  # noqa: E402
from minidb.session import Session  # noqa: E402
from minidb.sql import Engine  # noqa: E402

SELECT_SQL = "SELECT abalance FROM pgbench_accounts WHERE aid = ?"
UPDATE_SQL = "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"
TPCB = ["UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?",
        "SELECT abalance FROM pgbench_accounts WHERE aid = ?",
        "UPDATE pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?",
        "UPDATE pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?",
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
        "VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)"]


def _draws(scale: int, n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """(aid, tid, bid, delta) per operation, as pgbench's tpcb-like script draws them."""
    rnd = random.Random(seed)
    return [(rnd.randint(1, 100_000 * scale), rnd.randint(1, 10 * scale),
             rnd.randint(1, scale), rnd.randint(-5000, 5000)) for _ in range(n)]


class MinidbSide:
    def __init__(self, inst, **settings):
        self.session = Session(inst, **settings)
        self.engine = e = Engine(self.session)
        self.sel = e.prepare(SELECT_SQL)
        self.upd = e.prepare(UPDATE_SQL)
        self.begin, self.commit = e.prepare("BEGIN"), e.prepare("END")
        self.tpcb = [e.prepare(s) for s in TPCB]

    def selects(self, draws):
        ex = self.sel.execute
        for aid, _t, _b, _d in draws:
            r = ex((aid,)).rows
            assert len(r) == 1, r

    def updates(self, draws):
        ex = self.upd.execute
        for aid, _t, _b, delta in draws:
            assert ex((delta, aid)).rowcount == 1

    def tpcb_like(self, draws):
        ua, sa, ut, ub, ih = (p.execute for p in self.tpcb)
        begin, commit = self.begin.execute, self.commit.execute
        for aid, tid, bid, delta in draws:
            begin()
            assert ua((delta, aid)).rowcount == 1
            assert len(sa((aid,)).rows) == 1
            assert ut((delta, tid)).rowcount == 1
            assert ub((delta, bid)).rowcount == 1
            ih((tid, bid, aid, delta))
            commit()

    def selects_simple(self, draws):
        ex = self.engine.execute
        for aid, _t, _b, _d in draws:
            r = ex(f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}").rows
            assert len(r) == 1, r

    def tpcb_simple(self, draws):
        ex = self.engine.execute
        for aid, tid, bid, delta in draws:
            ex("BEGIN")
            assert ex(f"UPDATE pgbench_accounts SET abalance = abalance + {delta} "
                      f"WHERE aid = {aid}").rowcount == 1
            assert len(ex(f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}").rows) == 1
            assert ex(f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} "
                      f"WHERE tid = {tid}").rowcount == 1
            assert ex(f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} "
                      f"WHERE bid = {bid}").rowcount == 1
            ex(f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
               f"VALUES ({tid}, {bid}, {aid}, {delta}, CURRENT_TIMESTAMP)")
            ex("END")

    def sums(self):
        q = self.engine.execute
        return tuple(q(f"SELECT sum({c}) FROM {t}").rows[0][0] or 0 for t, c in
                     (("pgbench_accounts", "abalance"), ("pgbench_tellers", "tbalance"),
                      ("pgbench_branches", "bbalance")))


class SqliteSide:
    def __init__(self, scale: int):
        self.con = con = sqlite3.connect(":memory:", isolation_level=None)
        con.execute("CREATE TABLE pgbench_branches (bid INTEGER PRIMARY KEY, bbalance integer, "
                    "filler character(88))")
        con.execute("CREATE TABLE pgbench_tellers (tid INTEGER PRIMARY KEY, bid integer, "
                    "tbalance integer, filler character(84))")
        con.execute("CREATE TABLE pgbench_accounts (aid INTEGER PRIMARY KEY, bid integer, "
                    "abalance integer, filler character(84))")
        con.execute("CREATE TABLE pgbench_history (tid integer, bid integer, aid integer, "
                    "delta integer, mtime timestamp, filler character(22))")
        con.execute("BEGIN")
        con.executemany("INSERT INTO pgbench_branches VALUES (?, 0, NULL)",
                        ((i,) for i in range(1, scale + 1)))
        con.executemany("INSERT INTO pgbench_tellers VALUES (?, ?, 0, NULL)",
                        ((i, (i - 1) // 10 + 1) for i in range(1, 10 * scale + 1)))
        filler = " " * 84
        con.executemany("INSERT INTO pgbench_accounts VALUES (?, ?, 0, ?)",
                        ((i, (i - 1) // 100_000 + 1, filler)
                         for i in range(1, 100_000 * scale + 1)))
        con.execute("COMMIT")

    def selects(self, draws):
        ex = self.con.execute
        for aid, _t, _b, _d in draws:
            r = ex(SELECT_SQL, (aid,)).fetchall()
            assert len(r) == 1, r

    def updates(self, draws):
        ex = self.con.execute
        for aid, _t, _b, delta in draws:
            assert ex(UPDATE_SQL, (delta, aid)).rowcount == 1

    def tpcb_like(self, draws):
        ex = self.con.execute
        ua, sa, ut, ub, ih = TPCB
        for aid, tid, bid, delta in draws:
            ex("BEGIN")
            assert ex(ua, (delta, aid)).rowcount == 1
            assert len(ex(sa, (aid,)).fetchall()) == 1
            assert ex(ut, (delta, tid)).rowcount == 1
            assert ex(ub, (delta, bid)).rowcount == 1
            ex(ih, (tid, bid, aid, delta))
            ex("COMMIT")

    def selects_simple(self, draws):
        ex = self.con.execute
        for aid, _t, _b, _d in draws:
            r = ex(f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}").fetchall()
            assert len(r) == 1, r

    def tpcb_simple(self, draws):
        ex = self.con.execute
        for aid, tid, bid, delta in draws:
            ex("BEGIN")
            assert ex(f"UPDATE pgbench_accounts SET abalance = abalance + {delta} "
                      f"WHERE aid = {aid}").rowcount == 1
            assert len(ex(f"SELECT abalance FROM pgbench_accounts "
                          f"WHERE aid = {aid}").fetchall()) == 1
            assert ex(f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} "
                      f"WHERE tid = {tid}").rowcount == 1
            assert ex(f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} "
                      f"WHERE bid = {bid}").rowcount == 1
            ex(f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
               f"VALUES ({tid}, {bid}, {aid}, {delta}, CURRENT_TIMESTAMP)")
            ex("COMMIT")

    def sums(self):
        q = self.con.execute
        return tuple(q(f"SELECT coalesce(sum({c}), 0) FROM {t}").fetchone()[0] for t, c in
                     (("pgbench_accounts", "abalance"), ("pgbench_tellers", "tbalance"),
                      ("pgbench_branches", "bbalance")))


WORKLOADS = ("selects", "updates", "tpcb_like", "selects_simple", "tpcb_simple")
NAMES = {"selects": "point select by key",
         "updates": "UPDATE by key (autocommit)",
         "tpcb_like": "TPC-B-like transaction (6 statements + BEGIN/END)",
         "selects_simple": "point select, simple protocol (literals in the text)",
         "tpcb_simple": "TPC-B-like, simple protocol"}


def _proc_cpu(pid: int) -> float:
    """utime + stime of one process (all its threads) in seconds, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def cpu_all() -> float:
    """CPU seconds of every process involved: this one (the driver and the instance's
    threads: the WAL writer, the reaper; ``time.process_time`` counts all threads) and
    every process forked from it (the parallel worker pool, idle or not)."""
    return time.process_time() + sum(_proc_cpu(p) for p in _descendants(os.getpid()))


def run(scale: int, ops: int, repeat: int, sync_commit: bool) -> dict:
    datadir = tempfile.mkdtemp(prefix="minidb-oltpbench-")
    times = {(side, w): [] for side in ("minidb", "sqlite") for w in WORKLOADS}
    expect = [0, 0, 0]   # sums of deltas applied: accounts, tellers, branches
    try:
        init_pgbench(datadir, scale)
        with Instance(datadir, shared_buffers=max(4096, 3000 * scale)) as inst:
            m = MinidbSide(inst, synchronous_commit=sync_commit)
            s = SqliteSide(scale)
            # prewarm (as pg_prewarm would): a select of every 50th key reads every page of
            # pgbench_accounts (61 rows a page) and every leaf of its key; random keys, as
            # this once drew, left about a fifth of the pages to the first measured round
            m.selects([(aid, 0, 0, 0) for aid in range(1, 100_000 * scale + 1, 50)])
            for r in range(repeat):
                for wi, w in enumerate(WORKLOADS):
                    # each workload its own rows: with one draw per round, the simple-protocol
                    # select read exactly the rows the TPC-B round had just updated and paid
                    # for pruning them (~3x a select of other rows), which the prepared
                    # select, run first, did not
                    draws = _draws(scale, ops, 1 + r * len(WORKLOADS) + wi)
                    for side, impl in (("minidb", m), ("sqlite", s)):
                        c0, t0 = cpu_all(), time.perf_counter()
                        getattr(impl, w)(draws)
                        t1, c1 = time.perf_counter(), cpu_all()
                        times[side, w].append((c1 - c0, t1 - t0))
                    if w in ("updates", "tpcb_like", "tpcb_simple"):
                        d = sum(x[3] for x in draws)
                        expect[0] += d
                        if w != "updates":
                            expect[1] += d
                            expect[2] += d
            got_m, got_s = m.sums(), s.sums()
            assert got_m == tuple(expect), (got_m, expect)
            assert got_s == tuple(expect), (got_s, expect)
            counters = dict(m.engine.counters)
            m.session.close()
    finally:
        shutil.rmtree(datadir, ignore_errors=True)
    return {"times": times, "ops": ops, "scale": scale, "counters": counters}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--synchronous-commit", choices=("on", "off"), default="off")
    args = ap.parse_args()
    r = run(args.scale, args.ops, args.repeat, args.synchronous_commit == "on")
    n = r["ops"]
    print(f"pgbench tables at scale {r['scale']}; {n:,} operations per round, median "
          f"(min-max) of {args.repeat} alternated rounds; one connection; synchronous_commit "
          f"{args.synchronous_commit}; CPU of every process involved; load average "
          f"{os.getloadavg()[0]:.2f}")
    print()
    print("| workload | minidb CPU us | minidb wall us | minidb CPU spread | sqlite3 CPU us "
          "| minidb / sqlite3 CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for w in WORKLOADS:
        mc = [c / n * 1e6 for c, _ in r["times"]["minidb", w]]
        mw = [t / n * 1e6 for _, t in r["times"]["minidb", w]]
        sc = [c / n * 1e6 for c, _ in r["times"]["sqlite", w]]
        cm, wm, cs = statistics.median(mc), statistics.median(mw), statistics.median(sc)
        print(f"| {NAMES[w]} | {cm:,.1f} | {wm:,.1f} | {min(mc):,.0f}-{max(mc):,.0f} | "
              f"{cs:,.1f} | {cm / cs:.2f} |")
    c = r["counters"]
    print(f"plan cache: {c['parses']} parses, {c['plans']} plans, {c['plan_cache_hits']:,} "
          f"hits; {c.get('fast_path', 0):,} statements on the point path, "
          f"{c.get('parameterized', 0):,} simple texts parameterized")


if __name__ == "__main__":
    main()
