"""dead-tuples: repeated pgbench runs without VACUUM, 2002's engine against today's (seed 003).

The seed (``003_334354fd6833822f.txt``, Tom Lane, pgsql-hackers, 24 May 2002): after
``pgbench -i -s 10``, three runs of ``pgbench -c 5 -t 1000 -n`` in a row (``-n``: no VACUUM
between them), so dead row versions pile up.  Before index tuple killing: 26.4, 18.8,
13.5 tps; with killing: 28.4, 23.5, 18.8; with killing and index scans forced
(``enable_seqscan = off``): 29.4, 30.3, 30.2, "the first time I have ever seen repeated
pgbench runs without substantial performance degradation".  The degradation left with
killing was in sequential scans: PostgreSQL 7's planner took a table's size from
``pg_class`` as the last VACUUM left it, so pgbench_branches (10 rows) and
pgbench_tellers (100 rows) kept looking tiny and kept being scanned sequentially, dead
versions and all.

Setup here, per configuration, from a fresh data directory: ``init_pgbench`` at
``--scale`` (with its VACUUM ANALYZE, as pgbench -i), one Instance kept open over the
runs (as the seed's postmaster, and with fsync off as the seed's), then ``--runs`` runs
of ``run_bench(clients=5, transactions=T, no_vacuum=True)``.  Configurations (session settings):

==================================  ==========================================================
2002                                hot_updates, heap_page_pruning, kill_index_tuples off;
                                    planner_trusts_stale_stats on (PostgreSQL 7's planner)
2002 + killing                      the same with kill_index_tuples on
2002 + killing, enable_seqscan=off  ... and index scans forced (the seed's ``PGOPTIONS=-fs``)
today                               every setting at its default (HOT, pruning, killing)
==================================  ==========================================================

Scaling.  The default is the seed's scale 10 (1,000 transactions per client and run).
Bloat per row is what the seed's runs build up: 5 clients x 1000 transactions over 10
branches = 500 new versions of each branch row per run (50 of each teller row, 1 of 200
accounts).  A smaller ``--scale`` keeps exactly those ratios with ``T = 500 x scale / 5``
(scale 4: 400 transactions per client).  ``shared_buffers`` keeps the seed's
ratio of buffers (1024, ``-B 1024``) to scale (10): 1024 x scale / 10.  What does not
scale: with fewer branches, the 5 clients collide more often on a branch row (2.5 clients
per branch instead of 0.5), and a sequential scan of a bloated table reads all its
versions, so it costs in proportion to the total (5 x T per run), not to the bloat per row.

``minidb demo`` (the README's first command) is this experiment at scale 1 (100
transactions per client: the same 500 new versions of each branch row per run, 5 clients on
one branch), in a data directory the user keeps: ``run(datadir=...)`` runs every
configuration there one after another (pgbench's tables re-created for each, a fresh
instance each), today's first and 2002's last so that its bloated tables stay, and
``summary_table`` prints the compact table it ends with.

Reported per run: tps, its ratio to the first run, buffer accesses and heap fetches per
transaction (counters, independent of the machine's speed: they show the degradation
without the noise of a shared machine), the plan the UPDATE of pgbench_branches gets,
and after the run the sizes of the small tables and of the indexes and the dead tuples.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time

from minidb.experiments.common import (Report, fmt, fmt_ratio, fmt_spread, load_now, log,
                                       md_table, ratio, text_table)

NAME = "dead-tuples"
SEED = "003_334354fd6833822f.txt"

SEED_SCALE, SEED_CLIENTS, SEED_TRANSACTIONS, SEED_BUFFERS = 10, 5, 1000, 1024
# The seed's postmaster ran with fsync off: a commit waited for no disk flush, so its tps
# measured the engine's work on dead versions, not the disk.
SEED_FSYNC = False

OLD = {"hot_updates": False, "heap_page_pruning": False, "kill_index_tuples": False,
       "planner_trusts_stale_stats": True}
CONFIGS = [
    ("2002", dict(OLD)),
    ("2002 + killing", dict(OLD, kill_index_tuples=True)),
    ("2002 + killing, enable_seqscan=off", dict(OLD, kill_index_tuples=True,
                                                enable_seqscan=False)),
    ("today", {}),
]
# tps of the seed's runs (Tom Lane's; the "today" row is PostgreSQL 15 on this machine:
# flat over five runs between 7,500 and 8,700 tps, no per-run figures)
SEED_TPS = {
    "2002": [26.4, 18.8, 13.5],
    "2002 + killing": [28.4, 23.5, 18.8],
    "2002 + killing, enable_seqscan=off": [29.4, 30.3, 30.2],
    "today": None,
}
SEED_FORCED_BEFORE = [28.8, 25.7, 22.6]   # enable_seqscan=off before killing (not rerun)
PG15_RANGE = (7500, 8700)

SMALL = ("pgbench_branches", "pgbench_tellers")


def derived(scale: int, clients: int, transactions: int | None, shared_buffers: int | None):
    if transactions is None:
        per_run = SEED_CLIENTS * SEED_TRANSACTIONS * scale // SEED_SCALE
        transactions = max(1, per_run // clients)
    if shared_buffers is None:
        shared_buffers = max(128, round(SEED_BUFFERS * scale / SEED_SCALE))
    return transactions, shared_buffers


def _plan(engine) -> str:
    rows = engine.execute("EXPLAIN UPDATE pgbench_branches SET bbalance = bbalance + 0 "
                          "WHERE bid = 1").rows
    for (line,) in rows:
        line = line.strip().lstrip("-> ").strip()
        if "Scan" in line:
            return line.split("  (")[0]
    return rows[-1][0].strip()


def run_config(label: str, settings: dict, *, scale: int, clients: int, transactions: int,
               runs: int, shared_buffers: int, mode: str, accounts_per_scale: int = 100_000,
               workdir: str | None = None, datadir: str | None = None,
               progress=log) -> dict:
    """One configuration from a fresh start; returns its figures.

    ``datadir``: the data directory to run in, kept afterwards (pgbench's four tables are
    dropped and re-created there, as ``pgbench -i`` does; other tables are left alone);
    default a new temporary one under ``workdir``, removed afterwards.  The instance runs
    with fsync off, as the seed's did (a kept ``datadir`` is closed cleanly, but an
    operating system crash during the run may lose it).  ``progress``: called with one
    line of text per run."""
    from minidb.pgbench import init_pgbench, run_bench
    from minidb.instance import Instance
    from minidb.session import Session
    from minidb.sql.engine import Engine

    d = None if datadir else tempfile.mkdtemp(prefix="minidb-dead-", dir=workdir)
    out = {"label": label, "settings": settings, "runs": []}
    try:
        with Instance(datadir or os.path.join(d, "data"), shared_buffers=shared_buffers,
                      max_connections=max(12, clients + 4), fsync=SEED_FSYNC) as inst:
            t0 = time.perf_counter()
            init_pgbench(inst, scale, accounts_per_scale=accounts_per_scale)
            progress(f"  {label}: pgbench tables initialised at scale {scale} "
                     f"({time.perf_counter() - t0:.1f} s)")
            sess = Session(inst)
            try:
                engine = Engine(sess)
                for k, v in settings.items():
                    engine.execute(f"SET {k} = {'on' if v is True else 'off' if v is False else v}")
                out["plan_before"] = _plan(engine)
                for i in range(runs):
                    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    r = run_bench(inst, clients=clients, transactions=transactions,
                                  no_vacuum=True, mode=mode, settings=settings,
                                  accounts_per_scale=accounts_per_scale)
                    if r.aborted:
                        raise RuntimeError(f"{label} run {i + 1} aborted: {r.aborted}")
                    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    n = max(1, r.processed)
                    # the clients' CPU time (they are reaped by the end of the run): what a
                    # transaction costs, whatever else the machine is doing meanwhile
                    cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
                    c = r.counters
                    tb, ta = r.tables_before, r.tables
                    run = {
                        "tps": r.tps, "processed": r.processed, "failed": r.failed,
                        "seconds": r.bench_duration, "cpu_ms_per_txn": cpu_s * 1000 / n,
                        "buffers_per_txn": (c.get("buffers_hit", 0) + c.get("buffers_read", 0)) / n,
                        "heap_fetches_per_txn": c.get("index_heap_fetches", 0) / n,
                        "items_killed": c.get("index_items_killed", 0),
                        "items_deleted": c.get("index_items_deleted", 0),
                        "plan": _plan(engine),
                        "tables": {t: {"pages": v["pages"], "indexes": dict(v["indexes"]),
                                       "n_dead_tup": v.get("n_dead_tup", 0),
                                       "n_live_tup": v.get("n_live_tup", 0)}
                                   for t, v in ta.items()},
                        "seq_scans": {t: ta[t].get("seq_scan", 0) - tb.get(t, {}).get("seq_scan", 0)
                                      for t in SMALL},
                        "idx_scans": {t: ta[t].get("idx_scan", 0) - tb.get(t, {}).get("idx_scan", 0)
                                      for t in SMALL},
                        "hot_updates": sum(ta[t].get("n_tup_hot_upd", 0)
                                           - tb.get(t, {}).get("n_tup_hot_upd", 0) for t in ta),
                    }
                    run["versions"] = count_versions(inst)
                    out["runs"].append(run)
                    progress(f"  {label}: run {i + 1}: {r.tps:,.1f} tps "
                             f"({r.bench_duration:.1f} s), {run['buffers_per_txn']:.0f} "
                             f"buffers/txn, branches "
                             f"{run['tables']['pgbench_branches']['pages']} pages, "
                             f"{run['plan']}")
            finally:
                sess.close()
    finally:
        if d:
            shutil.rmtree(d, ignore_errors=True)
    return out


def count_versions(inst) -> dict:
    """Per pgbench table: (row versions on its pages, live rows) - what a sequential scan
    steps over, and what it returns.  Counted by scanning (pg_stat's n_dead_tup is not
    lowered by pruning in minidb), in a transaction of its own after the run."""
    from minidb.heap.heapam import HeapScan
    from minidb.heap.mvcc import seq_scan
    out = {}
    with inst.connect() as be:
        for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts"):
            rel = inst.catalog.heap_rel(t)
            hs = HeapScan(be, rel, [0], use_ring=True, syncscan=False)
            for _ in hs:
                pass
            be.xact.start_statement()
            live = sum(len(b) for b in seq_scan(be, rel, [0]))
            be.xact.command_done(False)
            be.xact.commit()
            out[t] = (hs.tuples_seen, live)
    return out


def chosen_configs(configs: list | None) -> list:
    """``CONFIGS`` (label, settings) by label, in the order given (all: None)."""
    if configs is None:
        return list(CONFIGS)
    by_label = dict(CONFIGS)
    unknown = [c for c in configs if c not in by_label]
    if unknown:
        raise ValueError(f"unknown configuration {unknown[0]!r}; the configurations are "
                         + ", ".join(repr(c) for c, _ in CONFIGS))
    return [(c, by_label[c]) for c in dict.fromkeys(configs)]


def run(scale: int = SEED_SCALE, clients: int = SEED_CLIENTS, transactions: int | None = None,
        runs: int = 3, shared_buffers: int | None = None, mode: str = "prepared",
        configs: list | None = None, accounts_per_scale: int = 100_000,
        workdir: str | None = None, command: str | None = None,
        datadir: str | None = None, progress=log, repeats: int = 3) -> Report:
    """Run the configurations (labels of ``CONFIGS``; all when None) in the order given;
    the report lists them in ``CONFIGS``' order.  ``datadir``: run every configuration in
    this data directory, one after another, and keep the last one's tables there (see
    ``run_config``); default a temporary directory each.  ``progress``: a callable given
    one line of text per configuration and run (default: standard error).  ``repeats``:
    the whole set of configurations this many times, each from a fresh start; the report's
    ratios give the median, minimum and maximum over them."""
    t_start = time.perf_counter()
    transactions, shared_buffers = derived(scale, clients, transactions, shared_buffers)
    chosen = chosen_configs(configs)
    order = [c for c, _ in CONFIGS]
    repeated, loads = [], []
    for rep_i in range(max(1, repeats)):
        loads.append(load_now())
        results = []
        for label, settings in chosen:
            progress(f"dead-tuples: {label}" + (f" (repeat {rep_i + 1} of {repeats}, load "
                                                f"{loads[-1]:g})" if repeats > 1 else ""))
            results.append(run_config(label, settings, scale=scale, clients=clients,
                                      transactions=transactions, runs=runs,
                                      shared_buffers=shared_buffers, mode=mode,
                                      accounts_per_scale=accounts_per_scale, workdir=workdir,
                                      datadir=datadir, progress=progress))
        results.sort(key=lambda r: order.index(r["label"]))
        repeated.append(results)
    # the tables show the repeat whose first configuration's last run / first run is the
    # median; the comparisons give every ratio's median (min-max) over the repeats
    key = [ratio(r[0]["runs"][-1]["tps"], r[0]["runs"][0]["tps"], 6) or 0 for r in repeated]
    median = sorted(range(len(repeated)), key=lambda i: key[i])[len(repeated) // 2]
    rep = _report(repeated[median], len(chosen), scale=scale, clients=clients,
                  transactions=transactions, runs=runs, shared_buffers=shared_buffers,
                  mode=mode, accounts_per_scale=accounts_per_scale, command=command,
                  repeated=repeated, loads=loads)
    rep.elapsed_s = time.perf_counter() - t_start
    return rep


def _report(results: list, nconfigs: int, *, scale: int, clients: int, transactions: int,
            runs: int, shared_buffers: int, mode: str, accounts_per_scale: int,
            command: str | None, repeated: list | None = None,
            loads: list | None = None) -> Report:
    """The report of the configurations' runs: the scaling, the runs' table, the figures
    beside the seed's, the notes and the plot."""
    rep = Report(NAME, "Dead tuples, index tuple killing and a planner that trusts old "
                       "statistics (seed 003)", SEED,
                 command or f"minidb experiment dead-tuples --scale {scale} "
                            f"--runs {runs}")
    updates_per_branch = clients * transactions / scale
    rep.scaling = [
        ("pgbench scale (branches)", f"{SEED_SCALE}", f"{scale}",
         "kept" if scale == SEED_SCALE else "scaled down: the sequential scans' share of the "
         "dead-version work is smaller than the seed's"),
        ("fsync", "off", "on" if SEED_FSYNC else "off", "kept: commits wait for no disk"),
        ("clients x transactions per run", f"{SEED_CLIENTS} x {SEED_TRANSACTIONS}",
         f"{clients} x {transactions}", "kept: new versions per branch row per run"),
        ("new versions per branch row per run", "500", f"{updates_per_branch:,.0f}",
         "the seed's bloat per row"),
        ("new versions per teller row per run", "50", f"{updates_per_branch / 10:,.0f}", ""),
        ("accounts per unit of scale", "100,000", f"{accounts_per_scale:,}",
         "pgbench's" if accounts_per_scale == 100_000 else "shrunk (test)"),
        ("shared_buffers", "1024 (8 MB, -B 1024)", f"{shared_buffers}",
         "kept: buffers per unit of scale"),
        ("clients per branch", f"{SEED_CLIENTS / SEED_SCALE:g}", f"{clients / scale:g}",
         "not kept: more row-lock waits on branches"),
        ("runs", "3", f"{runs}", "no VACUUM between runs (-n)"),
        ("repeats", "one series", f"{len(repeated or [results])}" + (
            f", load {', '.join(f'{x:g}' for x in loads)}" if loads else ""),
         "the tables show the median series; ratios give median (min-max)"),
        ("query mode", "simple (pgbench 7.x)", mode,
         "minidb's parser (sqlglot) would dominate simple mode; prepared keeps the "
         "engine's work in view"),
    ]
    rep.tables.append(("Runs", _runs_table(results)))
    rep.comparisons.extend(_comparisons(results, repeated or [results]))
    rep.data = {"scale": scale, "clients": clients, "transactions": transactions,
                "shared_buffers": shared_buffers, "runs": runs, "mode": mode,
                "results": results}
    rep.summary = _summary(results)
    rep.notes = [
        "tps is wall-clock and this machine is shared: another job's burst can halve one "
        "run's tps. 'clients' CPU ms / txn' is the CPU time the five client processes used "
        "per committed transaction (getrusage of the reaped clients), which other jobs "
        "barely move; its growth from run 1 ('CPU per transaction xN', run n / run 1: "
        "higher is more work per transaction) is the degradation with the noise taken "
        "out.",
        "Dead versions are counted after each run by scanning: the row versions on the "
        "table's pages less the rows a new snapshot sees (pruning removes them from the "
        "pages, VACUUM is never run).",
        "Counters, not only tps: 'buffers / txn' is every buffer pin (hits and reads) per "
        "committed transaction, 'heap fetches / txn' the heap visits made by index scans "
        "(one per index item followed, a whole HOT chain each). They grow with the dead "
        "versions a transaction has to step over, whatever the machine's load.",
        "Where minidb departs from the seed: its sequential scan decides visibility for a "
        "whole batch of pages with numpy, so a dead version on a page it reads anyway "
        "costs it little, while each index item followed costs a heap fetch in Python. "
        "Without killing, every UPDATE of a branch or teller row checks the uniqueness of "
        "its new index entry against the entries of all the row's old versions, fetching "
        "each from the heap, so killing index items helps more than in the seed; below the "
        "seed's scale (fewer versions in the small tables' heaps, as many per row in their "
        "indexes) the bloated indexes also cost more than the sequential scans of the "
        "bloated heaps that hurt PostgreSQL 7, and 2002's runs degrade faster than the "
        "seed's. The seed's "
        "forced-index-scan runs before killing (28.8, 25.7, 22.6 tps) are not rerun here.",
    ]
    rep.plot = lambda plt: _plot(plt, results)
    return rep


def _runs_table(results: list) -> str:
    """One row per configuration and run: tps beside the seed's, the counters, the plan,
    the tables' and indexes' pages and the dead versions."""
    rows = []
    for res in results:
        seed = SEED_TPS.get(res["label"])
        t1 = res["runs"][0]["tps"] if res["runs"] else None
        for i, r in enumerate(res["runs"]):
            tabs = r["tables"]
            s = seed[i] if seed and i < len(seed) else None
            rows.append([
                res["label"] if i == 0 else "", i + 1, fmt(r["tps"]), fmt_ratio(r["tps"], t1),
                fmt(s) if s else ("7,500-8,700" if res["label"] == "today" else "-"),
                fmt_ratio(s, seed[0]) if s else ("flat" if res["label"] == "today" else "-"),
                fmt(r["cpu_ms_per_txn"], 2),
                fmt(r["buffers_per_txn"], 0), fmt(r["heap_fetches_per_txn"], 1),
                r["plan"],
                fmt(tabs["pgbench_branches"]["pages"]), fmt(tabs["pgbench_tellers"]["pages"]),
                fmt(tabs["pgbench_accounts"]["pages"]),
                " / ".join(fmt(tabs[t]["indexes"].get(f"{t}_pkey", 0))
                           for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts")),
                " / ".join(fmt(r["versions"][t][0] - r["versions"][t][1])
                           for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts")),
            ])
    return md_table(
            ["configuration", "run", "tps", "/ run 1", "seed tps", "seed / run 1",
             "clients' CPU ms / txn", "buffers / txn", "heap fetches / txn", "branches UPDATE plan after the run",
             "branches pages", "tellers pages", "accounts pages",
             "pkey pages (b / t / a)", "dead versions (b / t / a)"],
            rows, "lrrrrrrrrlrrrrr")


def _comparisons(results: list, repeated: list | None = None) -> list:
    """(figure, seed, minidb, note) rows: each configuration's last run against its first
    (median (min-max) over the repeats), the fix's total effect, today's first run."""
    repeated = repeated or [results]
    out = []
    for res in results:
        rs = res["runs"]
        if len(rs) < 2:
            continue
        seed = SEED_TPS.get(res["label"])
        last = len(rs)
        seed = seed or None
        k = min(last, len(seed)) if seed else last
        mine_buf = ratio(rs[k - 1]["buffers_per_txn"], rs[0]["buffers_per_txn"])
        cpu = ratio(rs[k - 1]["cpu_ms_per_txn"], rs[0]["cpu_ms_per_txn"])
        note = (f"CPU per transaction x{cpu:.2f}, buffer accesses per transaction "
                f"x{mine_buf:.2f} (run {k} / run 1)")
        vals = []
        for series in repeated:
            rr = next(x["runs"] for x in series if x["label"] == res["label"])
            vals.append(ratio(rr[k - 1]["tps"], rr[0]["tps"], 4))
        out.append((f"{res['label']}: tps of run {k} / run 1",
                                fmt_ratio(seed[k - 1], seed[0]) if seed
                                else "about 1 (7,500-8,700 tps)",
                                fmt_spread(vals), note))
    byl = {r["label"]: r for r in results}
    if "2002" in byl and "2002 + killing, enable_seqscan=off" in byl:
        a = byl["2002"]["runs"][-1]["tps"]
        b = byl["2002 + killing, enable_seqscan=off"]["runs"][-1]["tps"]
        k = len(byl["2002"]["runs"])
        s = SEED_TPS["2002 + killing, enable_seqscan=off"][min(k, 3) - 1] / SEED_TPS["2002"][min(k, 3) - 1]
        out.append(("last run: forced index scans with killing / 2002",
                                f"{s:.2f}", fmt_ratio(b, a), "the fix's total effect"))
    if "today" in byl and byl["today"]["runs"]:
        t = byl["today"]["runs"][0]["tps"]
        out.append(("today's first run, tps", "7,500-8,700 (PostgreSQL 15, "
                                "scale 10, simple mode)", fmt(t),
                                f"{t / 8000:.3f} of PostgreSQL 15 (different scale and mode)"))
    return out


def summary_table(results) -> str:
    """A compact plain-text table for a terminal (``minidb demo``): per configuration, the
    tps of each run, each later run's tps over the first beside the seed's ratios, and two
    counters that do not depend on the machine's speed: buffer accesses per transaction
    (first run -> last) and the heap pages of pgbench_branches / pgbench_tellers after the
    last run (both 1 after ``pgbench -i``).  A legend follows the table."""
    rows = []
    for res in results:
        rs = res["runs"]
        if not rs:
            continue
        seed = SEED_TPS.get(res["label"])
        if seed:
            seed_cell = ", ".join(fmt_ratio(x, seed[0]) for x in seed[1:len(rs)]) or "-"
        else:
            seed_cell = "flat (PostgreSQL 15)"
        pages = rs[-1]["tables"]
        rows.append([res["label"], ", ".join(fmt(r["tps"], 0) for r in rs),
                     ", ".join(fmt_ratio(r["tps"], rs[0]["tps"]) for r in rs[1:]) or "-",
                     seed_cell,
                     f"{fmt(rs[0]['buffers_per_txn'], 0)} -> {fmt(rs[-1]['buffers_per_txn'], 0)}",
                     f"{pages['pgbench_branches']['pages']} / {pages['pgbench_tellers']['pages']}"])
    table = text_table(["configuration", "tps per run", "/ run 1", "seed / run 1",
                        "buffers/txn", "pages b/t"], rows, "llllrr")
    return table + (
        "\n\n'/ run 1': each later run's tps over the first's; 'seed / run 1': the same in "
        "Tom Lane's\nruns (2002; for today's engine, PostgreSQL 15 on this machine). tps "
        "moves with the machine's\nload, the last two columns do not: 'buffers/txn' is "
        "buffer accesses per committed\ntransaction, first run -> last; 'pages b/t' the "
        "heap pages of pgbench_branches /\npgbench_tellers after the last run (1 / 1 after "
        "pgbench -i).")


def _summary(results) -> str:
    parts = []
    for res in results:
        rs = res["runs"]
        if rs:
            parts.append(f"{res['label']}: " + ", ".join(f"{r['tps']:,.0f}" for r in rs)
                         + " tps")
    return ("tps per run, each configuration from a fresh start: " + "; ".join(parts) + ".")


def _plot(plt, results):
    """Three panels over the runs: tps as a ratio to run 1, CPU per transaction as a ratio
    to run 1 (higher: each transaction costs more), buffer accesses per transaction.  The
    seed's tps (dashed) is drawn on the first panel, and its time per transaction (run 1's
    tps / run n's: the seed measured no CPU) on the second."""
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.2))
    colors = ["tab:red", "tab:orange", "tab:blue", "tab:green"]
    for c, res in zip(colors, results):
        rs = res["runs"]
        x = list(range(1, len(rs) + 1))
        ax1.plot(x, [r["tps"] / rs[0]["tps"] for r in rs], "o-", color=c, label=res["label"])
        ax2.plot(x, [r["cpu_ms_per_txn"] / rs[0]["cpu_ms_per_txn"] for r in rs], "o-",
                 color=c, label=res["label"])
        seed = SEED_TPS.get(res["label"])
        if seed:
            sx = list(range(1, len(seed) + 1))
            ax1.plot(sx, [s / seed[0] for s in seed], "s--", color=c, alpha=0.5)
            ax2.plot(sx, [seed[0] / s for s in seed], "s--", color=c, alpha=0.5)
        ax3.plot(x, [r["buffers_per_txn"] for r in rs], "o-", color=c, label=res["label"])
    ax1.set_title("throughput (higher: faster)")
    ax1.set_ylabel("tps of run n / tps of run 1 (ratio)")
    ax2.set_title("cost of a transaction (higher: more work each)")
    ax2.set_ylabel("CPU ms per transaction, run n / run 1 (ratio)")
    ax3.set_title("buffer accesses per transaction")
    ax3.set_ylabel("buffer accesses per transaction (count, log scale)")
    ax3.set_yscale("log")
    for ax in (ax1, ax2, ax3):
        ax.set_xlabel("run (no VACUUM between runs)")
        ax.set_xticks(range(1, max(len(r["runs"]) for r in results) + 1))
    for ax in (ax1, ax2):
        ax.axhline(1.0, color="gray", lw=0.5)
        ax.set_ylim(bottom=0)
    ax1.legend(fontsize=8)
    fig.suptitle("pgbench -c 5 -n, repeated runs: minidb (solid) against the seed (dashed, "
                 "2002; on the middle panel its time per transaction, from tps)")
    fig.tight_layout()
    return fig
