"""Parallel sequential scan benchmark: wall-clock and CPU speedup of leader + workers over the
serial plan (and PostgreSQL's in the same run), and chunking against block allocation on a
modelled disk (seed 002, "Parallel Seq Scan vs kernel read ahead", scaled down).

Part 1 - warm, CPU-bound.  Setup: ``--rows`` pgbench_accounts rows (scan_bench's loader;
1,000,000 by default, ``--big`` adds 10,000,000 = pgbench scale 100, 1.4 GB, where
PostgreSQL's pg14 chunks are 64 blocks), in a pool that holds them all, read once so that
every hint bit is set, and each parallel plan run until its pool workers have mapped the
pool's pages (under one minor fault per 256 pages they scan: the steady state of a
long-lived worker, which the leader's prewarm gives the serial plan).  Run:
``SELECT count(*) FROM pgbench_accounts WHERE abalance < 0``
(no row matches, so every row is decoded, checked for visibility and tested) as
  * the serial plan: one ``seq_scan`` with the MVCC filter, opportunistic pruning's
    check (as a session runs it), the predicate and a count;
  * ``ParallelSeqScan`` with 0 workers (the leader alone, through the block allocator:
    the parallel machinery's own cost, which should be none);
  * the leader and 1 worker (the target: >= 1.7x the serial plan by the wall clock on this
    2-core machine), and the leader and 2 workers;
  * with ``--pg`` (a throw-away local PostgreSQL server, ``compare_postgres.local_server``)
    or ``--dsn``: the same table and query on PostgreSQL, serial
    (``max_parallel_workers_per_gather = 0``) and with 1 worker (parallel costs 0), the
    same ``shared_buffers``, prewarmed, through one client session (its round trip is in
    its times).
The plans run alternately, ``--repeat`` rounds (each round in a rotated order), so that a
change in the machine's load hits every plan; every figure is the median and the spread
(min-max) over the rounds.  Check: every run counts 0 of ``--rows``, reads no page, and its
participants' pages add up to the table.

Which clock.  The wall clock of each plan, and the CPU time of every process: the leader's
thread (``time.thread_time`` around the whole query: set-up, its share of the scan, the
Gather's loop) and each worker's task (``ParticipantStats.task_cpu_s``: from the task's
start to its final message).  The speedup by CPU (serial CPU / the busiest process's CPU)
is what the wall-clock speedup would be if every process had a core to itself; with the
CPU of all processes summed it shows what the parallel machinery costs beyond the scan.
The other processes of the machine share its 2 cores: the load average (1 minute) is
printed before every round; a wall-clock figure under load is below its CPU figure, and
``preempted`` (involuntary context switches of the participants' scans) says by how much
they were crowded out.  Under load a wall-clock gain needs more than an idle core: Linux
shares the CPU fairly between *sessions* first (``sched_autogroup``, on here), and the
leader and its pool workers are one session, so when other sessions keep both cores busy a
parallel plan's processes split one session's share (PostgreSQL's server is one session too:
its ratio in the same run falls too, if less).  PostgreSQL's CPU is its server's (every
process, ``/proc``: 10 ms ticks).

Part 2 - cold, ``io_model=hdd`` (150 MB/s, 8 ms seek, 128 kB read-ahead).  Setup: a table
of ``--io-mb`` megabytes, a simulated OS cache of an eighth of it, shared_buffers far
below a quarter of it (so scans use their 256 kB rings).  Run: the same count with 1, 2 and
4 workers (and the leader) under ``block`` allocation, ``pg14`` as PostgreSQL computes it
for a table this small, and ``pg14`` scaled (``parallel_seqscan_nchunks`` chosen so that
chunks are 64 blocks, as in the seed's first patch: the seed's ratio of chunk size to the
read-ahead window, 64 : 16, is kept and the table is shrunk instead); each run cold (OS
cache dropped, the table's buffers dropped).  Reported: MB/s by the wall clock (the
modelled disk's waits are sleeps: wall time is what the model is about), the CPU seconds
of all the participants together, the I/O model's requests and seeks.  Check: every run
counts 0 of the table's rows.

    python bench/parallel_bench.py [--rows 1000000] [--big] [--repeat 5] [--pg | --dsn DSN]
                                   [--io-mb 32] [--skip-io] [--skip-cpu]
"""

from __future__ import annotations

import argparse
import os
from functools import partial
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.scan_bench import make_accounts  # noqa: E402
from minidb.heap.mvcc import seq_scan  # noqa: E402
from minidb.heap.prune import heap_page_prune_opt  # noqa: E402
from minidb.heap.parallel import initial_chunk_size  # noqa: E402
from minidb.instance import Instance  # noqa: E402
from minidb.exec.gather import Aggregate, ParallelSeqScan  # noqa: E402

ABALANCE = 2
QUERY = "SELECT count(*) FROM pbench_accounts WHERE abalance < 0"
WARM_RUNS = 20  # warm-up runs of a parallel plan at most (until its workers take no fault)


class AbalanceNegative:
    """WHERE abalance < 0, on the scan's only column (picklable: sent to the workers)."""

    def __call__(self, cols):
        return cols[0][0] < 0


def serial_count(be, rel) -> tuple[int, int]:
    """The serial plan, as a session runs it: with the opportunistic pruning hook (the
    parallel participants run it too)."""
    rows = matches = 0
    for batch in seq_scan(be, rel, [ABALANCE], prepare_pages=partial(heap_page_prune_opt,
                                                                     be, rel)):
        vals = batch.columns[0][0]
        rows += len(vals)
        matches += int(np.count_nonzero(vals < 0))
    be.xact.command_done(False)
    return rows, matches


def parallel_count(be, rel, nworkers: int) -> tuple[int, int, object]:
    total = ParallelSeqScan(be, rel, [ABALANCE], predicate=AbalanceNegative(),
                            aggregates=[Aggregate("count")], nworkers=nworkers)
    (matches,) = total.aggregate()
    rows = total.stats.total("visible")
    be.xact.command_done(False)
    return rows, matches, total.stats


class Sample:
    """One run of one plan: wall seconds, the leader's CPU, each worker's, the split."""

    __slots__ = ("wall", "leader_cpu", "worker_cpu", "pages", "preempted", "start_ms",
                 "total_cpu", "faults")

    def __init__(self, wall, leader_cpu, worker_cpu=(), pages=(), preempted=0, start_ms=0.0,
                 total_cpu=None, faults=0):
        self.wall = wall
        self.leader_cpu = leader_cpu
        self.worker_cpu = list(worker_cpu)
        self.pages = list(pages)
        self.preempted = preempted
        self.start_ms = start_ms
        self.total_cpu = total_cpu  # only the sum is known (PostgreSQL's server)
        self.faults = faults        # the workers' minor faults while they scanned

    @property
    def busiest(self) -> float:
        return max([self.leader_cpu] + self.worker_cpu)

    @property
    def all_cpu(self) -> float:
        if self.total_cpu is not None:
            return self.total_cpu
        return self.leader_cpu + sum(self.worker_cpu)


def run_minidb(be, rel, nrows: int, nblocks: int, nworkers: int | None) -> Sample:
    """One run (``nworkers`` None: the serial plan), checked."""
    c0, t0 = time.thread_time(), time.perf_counter()
    res = serial_count(be, rel) if nworkers is None else parallel_count(be, rel, nworkers)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    assert res[:2] == (nrows, 0), res
    if nworkers is None:
        return Sample(wall, cpu)
    st = res[2]
    assert st.workers_launched == nworkers, (st.workers_launched, st.reason)
    assert st.total("buffers_read") == 0, "not warm"
    assert st.total("pages") == nblocks
    workers = sorted((p for p in st.participants if p.who != "leader"), key=lambda p: p.who)
    lead = [p for p in st.participants if p.who == "leader"]
    start = max((p.started - st.began for p in workers), default=0.0)
    return Sample(wall, cpu, [p.task_cpu_s for p in workers],
                  [p.pages for p in lead + workers],
                  sum(p.preempted for p in st.participants), start * 1e3,
                  faults=sum(p.page_faults for p in workers))


def med(xs) -> str:
    """Two table cells: the median of seconds in ms, and the spread (min-max) - a cell of
    its own, so that bench/compare_commits.py collects the median as a number."""
    xs = [x * 1e3 for x in xs]
    if any(x != x for x in xs):  # not measured
        return "- | -"
    return f"{statistics.median(xs):.1f} | {min(xs):.1f}-{max(xs):.1f}"


def med1(xs) -> str:
    """median (min-max) of seconds, in ms, as one cell."""
    xs = [x * 1e3 for x in xs]
    return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"


class PgSide:
    """The same table and query on a PostgreSQL server (``compare_postgres.PG``)."""

    def __init__(self, dsn: str, nrows: int):
        from bench.compare_postgres import PG
        self.pg = PG(dsn)
        pg = self.pg
        self.version = pg.version()
        pg.execute("DROP TABLE IF EXISTS pbench_accounts")
        pg.execute("CREATE TABLE pbench_accounts (aid integer NOT NULL, bid integer, "
                   "abalance integer, filler character(84)) WITH (autovacuum_enabled = off)")
        pg.execute("INSERT INTO pbench_accounts SELECT g, (g - 1) / 100000 + 1, 0, '' "
                   f"FROM generate_series(1, {nrows}) g")
        pg.execute("VACUUM (FREEZE, ANALYZE) pbench_accounts")
        for stmt in ("SET parallel_setup_cost = 0", "SET parallel_tuple_cost = 0",
                     "SET min_parallel_table_scan_size = 0",
                     "SET parallel_leader_participation = on"):
            pg.execute(stmt)
        self.nrows = nrows
        for nw in (0, 1, 0):  # warm: the table in shared_buffers
            self.run(nw)

    def run(self, nworkers: int) -> Sample:
        pg = self.pg
        pg.execute(f"SET max_parallel_workers_per_gather = {nworkers}")
        c0 = pg.cpu()
        wall = pg.timed(QUERY)
        c1 = pg.cpu()
        cpu = None if c0 is None or c1 is None else c1 - c0
        # the server's processes together (its worker's and leader's CPU are not told apart)
        return Sample(wall, float("nan"), (), (), 0, 0.0, cpu)

    def close(self):
        try:
            self.pg.execute("DROP TABLE IF EXISTS pbench_accounts")
        finally:
            self.pg.close()


def cpu_part(nrows: int, repeat: int, dsn: str | None) -> dict:
    """Part 1; returns the samples of every plan (for the smoke test)."""
    datadir = tempfile.mkdtemp(prefix="minidb-pbench-")
    pgside = None
    try:
        with Instance(datadir, shared_buffers=nrows // 50 + 2048) as inst:
            t0 = time.perf_counter()
            rel = make_accounts(inst, nrows)
            load_s = time.perf_counter() - t0
            with inst.connect() as be:
                nblocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
                # prewarm (as pg_prewarm does: a plain scan of a table larger than a
                # quarter of the pool would go through its ring), setting hint bits
                assert sum(len(b) for b in seq_scan(be, rel, [ABALANCE],
                                                    use_ring=False)) == nrows
                be.xact.command_done(False)
                be.bufmgr.flush_buffers()
                reads = be.counters()["buffers_read"]
                plans = {"serial plan (seq_scan)": None, "leader + 0 workers": 0,
                         "leader + 1 worker": 1, "leader + 2 workers": 2}
                runs = {name: [] for name in plans}
                if dsn:
                    pgside = PgSide(dsn, nrows)
                    for name in ("PostgreSQL serial", "PostgreSQL leader + 1 worker"):
                        runs[name] = []
                names = list(runs)
                for name in names:  # runs of each, not counted: the workers start (fork +
                    if name.startswith("PostgreSQL"):  # connect) and map the pool's pages
                        continue
                    # A pool worker maps a page of the shared pool when it first touches
                    # it (a minor fault: ~5 us for 16 pages here); one run maps only the
                    # pages that worker scanned, and the next runs' workers fault on the
                    # rest (about 800, 370, 370, 30 faults in the first runs after one).
                    # Warm until the workers take under one fault per 256 pages they scan
                    # (the leader mapped every page in the prewarm), as a long-lived pool
                    # worker has mapped them - at most WARM_RUNS runs.
                    for _ in range(WARM_RUNS):
                        w = run_minidb(be, rel, nrows, nblocks, plans[name])
                        if w.faults * 256 < max(1, sum(w.pages[1:])):
                            break
                loads = []
                for r in range(repeat):
                    loads.append(os.getloadavg()[0])
                    for name in names[r % len(names):] + names[:r % len(names)]:
                        if name.startswith("PostgreSQL"):
                            runs[name].append(pgside.run(0 if "serial" in name else 1))
                        else:
                            runs[name].append(run_minidb(be, rel, nrows, nblocks,
                                                         plans[name]))
                assert be.counters()["buffers_read"] == reads, "the serial plan was not warm"
                loads.append(os.getloadavg()[0])
        chunk = initial_chunk_size("pg14", nblocks, 8192, 64)
        print(f"Part 1: warm count(*) WHERE abalance < 0 over {nrows:,} rows (loaded in "
              f"{load_s:.0f} s), {nblocks:,} pages (pg14 chunks of {chunk} blocks); "
              f"{repeat} alternated rounds, median (min-max); {os.cpu_count()} CPUs, load "
              f"average {min(loads):.1f}-{max(loads):.1f} (other processes share the CPUs)"
              + (f"; PostgreSQL {pgside.version}" if pgside else ""))
        print("| plan | wall ms | (min-max) | M rows/s (wall) | speedup (wall) | leader CPU ms "
              "| (min-max) | worker CPU ms, each | all processes CPU ms | (min-max) "
              "| speedup (CPU of the busiest) | pages per participant | last worker started, ms "
              "| preempted |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- "
              "| ---: | ---: |")
        base = runs["serial plan (seq_scan)"]
        pg_base = runs.get("PostgreSQL serial")
        for name, samples in runs.items():
            ref = pg_base if name.startswith("PostgreSQL") else base
            wall = statistics.median(s.wall for s in samples)
            sp_wall = statistics.median(s.wall for s in ref) / wall
            pg = name.startswith("PostgreSQL")
            sp_cpu = "-" if pg else "%.2f" % (statistics.median(s.busiest for s in ref)
                                              / statistics.median(s.busiest for s in samples))
            nw = max(len(s.worker_cpu) for s in samples)
            wcpu = " / ".join(med1([s.worker_cpu[i] for s in samples]) for i in range(nw)) \
                or "-"
            pages = " / ".join(str(int(statistics.median(s.pages[i] for s in samples)))
                               for i in range(len(samples[0].pages))) or "-"
            start = f"{statistics.median(s.start_ms for s in samples):.1f}" if nw else "-"
            lead = "- | -" if pg else med(s.leader_cpu for s in samples)
            print(f"| {name} | {med(s.wall for s in samples)} | {nrows / wall / 1e6:.1f} "
                  f"| {sp_wall:.2f} | {lead} | {wcpu} "
                  f"| {med(s.all_cpu for s in samples)} | {sp_cpu} | {pages} | {start} "
                  f"| {statistics.median(s.preempted for s in samples):.0f} |")
        one = runs["leader + 1 worker"]
        ratio = statistics.median(s.wall for s in base) / statistics.median(
            s.wall for s in one)
        ratio_cpu = statistics.median(s.busiest for s in base) / statistics.median(
            s.busiest for s in one)
        line = (f"ratio (leader + 1 worker) / serial plan = {ratio:.2f} by the wall clock "
                f"(target >= 1.7), {ratio_cpu:.2f} by CPU of the busiest process")
        if pg_base:
            pg_ratio = statistics.median(s.wall for s in pg_base) / statistics.median(
                s.wall for s in runs["PostgreSQL leader + 1 worker"])
            line += f"; PostgreSQL's in the same run: {pg_ratio:.2f}"
        print(line)
        return runs
    finally:
        if pgside is not None:
            pgside.close()
        shutil.rmtree(datadir, ignore_errors=True)


def io_part(table_mb: int, model: str = "hdd", workers=(1, 2, 4)) -> None:
    datadir = tempfile.mkdtemp(prefix="minidb-pbench-io-")
    nrows = table_mb * 1024 * 1024 // 8192 * 55  # about 55 pgbench rows per page
    os_cache_mb = max(1, table_mb // 8)
    try:
        with Instance(datadir, shared_buffers=1024, io_model=model,
                      os_cache_mb=os_cache_mb) as inst:
            rel = make_accounts(inst, nrows)
            with inst.connect() as be:
                bm = be.bufmgr
                nblocks = bm.smgr.nblocks(rel.relfilenode)
                assert serial_count(be, rel) == (nrows, 0)  # set hint bits
                bm.flush_buffers()
                mb = nblocks * 8192 / 1e6
                pg14_chunk = initial_chunk_size("pg14", nblocks, 8192, 64)
                scaled = max(1, nblocks // 64)
                print(f"\nPart 2: {inst.iomodel.describe()}; table "
                      f"{nblocks:,} blocks = {mb:.0f} MB = {nblocks / inst.seg.oc_tag.size:.0f}x "
                      f"the OS cache; cold runs; shared_buffers 1024 (rings)")
                print(f"scaling: seed 002 read ~100 GB with chunks of 64..16384 blocks against "
                      f"a 16-block read-ahead; here pg14's own formula gives chunks of "
                      f"{pg14_chunk} blocks, so 'pg14 scaled' sets parallel_seqscan_nchunks = "
                      f"{scaled} for chunks of 64")
                print("MB/s by the wall clock (the modelled disk's waits are sleeps, so this is "
                      "the figure the model is about); CPU s: the leader's thread plus every "
                      "worker's (time.thread_time), summed")
                print("| plan | workers | MB/s (wall) | wall s | CPU s (all processes) | "
                      "requests | seeks | read-ahead pages |")
                print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

                def run(label, nw, policy, nchunks=2048):
                    be.settings.set("parallel_chunk_policy", policy)
                    be.settings.set("parallel_seqscan_nchunks", nchunks)
                    bm.drop_relation_buffers(rel.relfilenode)
                    inst.drop_os_cache()
                    before = inst.io_counters()
                    c0, t0 = time.thread_time(), time.perf_counter()
                    if nw < 0:
                        res = serial_count(be, rel)
                    else:
                        res = parallel_count(be, rel, nw)
                    secs, cpu = time.perf_counter() - t0, time.thread_time() - c0
                    assert res[:2] == (nrows, 0), res
                    if nw >= 0:   # the leader's share is in its participant entry
                        cpu = sum(p.cpu_s for p in res[2].participants)
                    d = {k: v - before[k] for k, v in inst.io_counters().items()}
                    print(f"| {label} | {max(nw, 0)} | {mb / secs:.1f} | {secs:.2f} | {cpu:.2f} "
                          f"| {d['requests']:,} | {d['seeks']:,} | {d['readahead_pages']:,} |",
                          flush=True)

                run("serial plan", -1, "pg14")
                for nw in workers:
                    run(f"pg14 (chunk {pg14_chunk})", nw, "pg14")
                    run("pg14 scaled (chunk 64)", nw, "pg14", scaled)
                    run("block", nw, "block")
    finally:
        shutil.rmtree(datadir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000,
                    help="pgbench_accounts rows of part 1 (1,000,000 = scale 10)")
    ap.add_argument("--big", action="store_true",
                    help="part 1 also at 10,000,000 rows (scale 100; 1.4 GB of pool)")
    ap.add_argument("--repeat", type=int, default=5, help="alternated rounds (>= 3)")
    ap.add_argument("--pg", action="store_true",
                    help="start a throw-away local PostgreSQL server (compare_postgres's "
                         "local_server) and run its serial and 1-worker plans in the rounds")
    ap.add_argument("--dsn", default=None, help="run PostgreSQL's plans on this server")
    ap.add_argument("--io-mb", type=int, default=32, help="table size of part 2")
    ap.add_argument("--io-model", default="hdd", choices=("hdd", "ssd"))
    ap.add_argument("--skip-io", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    args = ap.parse_args()
    sizes = [args.rows] + ([10_000_000] if args.big and args.rows != 10_000_000 else [])
    if not args.skip_cpu:
        for nrows in sizes:
            if args.pg:
                from bench.compare_postgres import local_server
                mb = (nrows // 50 + 2048) * 8192 // (1 << 20)
                with local_server(options=[f"shared_buffers={mb}MB"]) as dsn:
                    cpu_part(nrows, max(3, args.repeat), dsn)
            else:
                cpu_part(nrows, max(3, args.repeat), args.dsn)
    if not args.skip_io:
        io_part(args.io_mb, args.io_model)


if __name__ == "__main__":
    main()
