"""What the four seed experiments share: reports (markdown tables, plots, the seed's figures
beside minidb's as ratios, the scaling chosen), the scanned table, client processes.

A ``Report`` is what an experiment hands back: its title, the command that reproduces it,
the scaling it chose (each quantity as the seed had it and as this run has it), its tables,
its comparisons with the seed, and a plot function.  ``Report.write(out_dir)`` writes
``<name>.md`` and, when matplotlib can be imported, ``<name>.png`` (without matplotlib the
plot is skipped and the markdown says so: the figures that matter are in the tables).
``str(report)`` is the markdown, which the command line also prints.

Client processes (``run_clients``) are forked from the process that opened the instance,
as ``minidb bench``'s clients are (processes, not threads, as everywhere in minidb): each
opens its own session, waits at a barrier, then starts its work at its own offset from a
common start time, so staggered starts (seed 001) are measured from one clock.  Each
returns a picklable result through a pipe.

The scanned table (``load_scan_table``) is the same for the three scan experiments:
``t (a integer, b integer, filler character(84))``, pgbench_accounts' shape (55 rows a
page), with ``a`` = 1..n so that ``WHERE a < 0`` (seed 000's query) matches nothing and
every row is decoded, checked for visibility and tested.  It is bulk-loaded as
``COPY ... FREEZE`` loads (xmin = the frozen xid), scanned once so that nothing is left
for a measured scan to write, and checkpointed.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import textwrap
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from minidb.catalog import ColumnDef
from minidb.config import BLCKSZ
from minidb.heap.heapam import MAX_HEAP_TUPLES_PER_PAGE, heap_bulk_insert
from minidb.storage import page as pg

OUT_DIR = "minidb-results"          # relative to the current directory
MB = 1024 * 1024

LOAD_CHUNK = 200_000


# ---------------------------------------------------------------------------------------------
# formatting
def fmt(x, digits: int = 1) -> str:
    """A number for a table: thousands separated, ``digits`` decimals, '-' for None."""
    if x is None:
        return "-"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return f"{int(x):,}"
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:,.{digits}f}"


def ratio(a, b, digits: int = 2) -> float | None:
    if a is None or b is None or not b:
        return None
    return round(a / b, digits)


def fmt_ratio(a, b, digits: int = 2) -> str:
    r = ratio(a, b, digits + 2)
    return "-" if r is None else f"{r:.{digits}f}"


def md_table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A markdown table; ``align`` is one letter per column (l or r; default: first l)."""
    align = align or ("l" + "r" * (len(headers) - 1))
    out = ["| " + " | ".join(headers) + " |",
           "| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def text_table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """The same table as plain aligned text for a terminal: columns padded to their widest
    cell, two spaces apart, a rule under the headers; ``align`` as ``md_table``'s."""
    align = align or ("l" + "r" * (len(headers) - 1))
    cells = [[str(c) for c in r] for r in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w)
                         for c, w, a in zip(r, widths, align)).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in cells[1:]])


@dataclass
class Report:
    """One experiment's results (see the module docstring)."""
    name: str                       # file names: <name>.md, <name>.png
    title: str
    seed: str                       # the seed file it reproduces
    command: str                    # the command line that reproduces this run
    summary: str = ""               # what the run shows, in a few sentences
    scaling: list = field(default_factory=list)   # (quantity, seed, here, why)
    tables: list = field(default_factory=list)    # (heading, markdown table)
    comparisons: list = field(default_factory=list)  # (figure, seed, minidb, note)
    notes: list = field(default_factory=list)     # paragraphs: departures, caveats
    plot: object = None             # callable(plt, path) drawing the PNG
    data: dict = field(default_factory=dict)      # the raw figures (tests read them)
    elapsed_s: float = 0.0
    png: str | None = None          # path written, or None
    png_note: str = ""

    def markdown(self) -> str:
        out = [f"# {self.title}", "",
               f"Seed: `{self.seed}`. Reproduce: `{self.command}` "
               f"({self.elapsed_s:.0f} s on this machine: {machine()}).", ""]
        if self.summary:
            out += [self.summary, ""]
        if self.scaling:
            out += ["## Scaling", "",
                    md_table(["quantity", "seed", "this run", "why"],
                             [list(r) for r in self.scaling], "llll"), ""]
        if self.comparisons:
            out += ["## minidb beside the seed", "",
                    md_table(["figure", "seed", "minidb", "note"],
                             [list(r) for r in self.comparisons], "lrrl"), ""]
        for heading, table in self.tables:
            out += [f"## {heading}", "", table, ""]
        for n in self.notes:
            out += [n, ""]
        if self.png:
            out += [f"![{self.title}]({os.path.basename(self.png)})", ""]
        elif self.png_note:
            out += [f"(No plot: {self.png_note}.)", ""]
        return "\n".join(out).rstrip() + "\n"

    __str__ = markdown

    def terminal_summary(self) -> str:
        """What the terminal gets: the title, the summary, and the seed-beside-minidb
        figures one a line (the markdown file has everything)."""
        out = [self.title, f"  {self.elapsed_s:.0f} s; reproduce: {self.command}"]
        if self.summary:
            out += textwrap.wrap(self.summary, 88, initial_indent="  ",
                                 subsequent_indent="  ")
        if self.comparisons:
            out.append("  figure: seed / minidb")
            out += [f"    {fig}: {seed} / {mine}" for fig, seed, mine, _ in self.comparisons]
        return "\n".join(out)

    def write(self, out_dir: str = OUT_DIR, png: bool = True) -> str:
        """Write ``<name>.md`` (and ``<name>.png``); returns the markdown's path."""
        os.makedirs(out_dir, exist_ok=True)
        self.png = None
        if png and self.plot is not None:
            plt = pyplot()
            if plt is None:
                self.png_note = "matplotlib is not installed (pip install matplotlib)"
            else:
                path = os.path.join(out_dir, f"{self.name}.png")
                fig = self.plot(plt)
                fig.savefig(path, dpi=110, bbox_inches="tight")
                plt.close(fig)
                self.png = path
        md = os.path.join(out_dir, f"{self.name}.md")
        with open(md, "w") as f:
            f.write(self.markdown())
        return md


def pyplot():
    """matplotlib.pyplot with a non-interactive backend, or None if it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def machine() -> str:
    la = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {la[0]:.1f} (shared with other jobs)"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# the scanned table
def scan_columns(filler: int = 84) -> list:
    return [("a", "integer"), ("b", "integer"), ("filler", f"character({filler})")]


def rows_per_page(layout) -> int:
    data, lengths = layout.encode_batch({"a": np.ones(1, np.int32), "b": np.ones(1, np.int32),
                                         "filler": [""]}, 1, xmin=2)
    size = pg.maxalign(int(lengths[0])) + pg.ITEMID_SIZE
    return min(MAX_HEAP_TUPLES_PER_PAGE, (BLCKSZ - pg.PAGE_HEADER_SIZE) // size)


def load_scan_table(inst, name: str, nblocks: int, log_progress: bool = True,
                    filler: int = 84):
    """Create and fill ``name`` with ``nblocks`` full pages of ``t``'s rows (see the module
    docstring; ``filler``: the width of the char column, 84 as pgbench_accounts'); returns
    ``(HeapRel, rows, blocks)``."""
    t0 = time.perf_counter()
    inst.catalog.create_table(name, [ColumnDef(n, ty, not_null=(n == "a"))
                                     for n, ty in scan_columns(filler)])
    rel = inst.catalog.heap_rel(name)
    nrows = nblocks * rows_per_page(rel.layout)
    with inst.connect() as be:
        for lo in range(0, nrows, LOAD_CHUNK):
            n = min(LOAD_CHUNK, nrows - lo)
            a = np.arange(lo + 1, lo + n + 1, dtype=np.int32)
            heap_bulk_insert(be, rel, {"a": a, "b": a % 1000,
                                              "filler": [""] * n}, n, xmin=2)
        # one scan, as a first reader would, so that a measured scan has nothing to write
        from minidb.heap.mvcc import seq_scan
        be.xact.start_statement()
        seen = sum(len(b) for b in seq_scan(be, rel, [0]))
        be.xact.command_done(False)
        be.xact.commit()
        assert seen == nrows, (seen, nrows)
        be.bufmgr.flush_buffers()
        blocks = be.bufmgr.smgr.nblocks(rel.relfilenode)
    if log_progress:
        log(f"loaded {name}: {nrows:,} rows, {blocks:,} blocks ({blocks * BLCKSZ / MB:,.0f} MB)"
            f" in {time.perf_counter() - t0:.1f} s")
    return rel, nrows, blocks


# The seeds of 2020 (000 and 002) ran on NVMe SSDs of their time.  Their parameters, taken
# before any run from a 2019 NVMe drive's datasheet (Samsung 970 EVO Plus 1 TB): 4 kB random
# reads at queue depth 1, 19,000 IOPS, i.e. 52.6 us a request; random reads rated at queue
# depth 32 (600,000 IOPS there: the drive overlaps about 32 requests).
NVME_LATENCY_MS = 1000.0 / 19_000
NVME_QUEUE_DEPTH = 32
NVME_SOURCE = ("a 2019 NVMe SSD's datasheet (Samsung 970 EVO Plus 1 TB: 4 kB random reads "
               "19,000 IOPS at queue depth 1 = 52.6 us each, rated at queue depth 32)")
# Every experiment reads one 8 kB block per call, as PostgreSQL 7.x to 16 did
EXPERIMENT_IO = {"io_combine_limit": 1}
# The kernel's read-ahead where a seed does not say which kernel it ran (seeds 002 and
# 000): both of io_readahead_policy's values are run and the headline is the range over
# them.  perfile is the mechanism seed 002's text gives ("each process's file handle sees
# a strided pattern and read-ahead stops": state per open file, no look at the page
# cache); ondemand is Linux's since 2.6.23 (with 2.6.31's context read-ahead), what a
# Linux of 2020 ran.
READAHEAD_POLICIES = ("perfile", "ondemand")
READAHEAD_SOURCE = ("the seed does not state its OS or kernel, so both are run and the "
                    "headline is the range over them: perfile (read-ahead state per open "
                    "file, the mechanism seed 002's text gives for block-at-a-time's loss) "
                    "and ondemand (Linux's since 2.6.23, with its context read-ahead "
                    "through the page cache: a 2020 Linux's)")


def policy_range(values: dict, seed: float | None) -> tuple:
    """(lo, hi, inside) of a headline's medians over the read-ahead policies
    (``values``: policy -> median or None); ``inside``: whether ``seed`` lies in [lo, hi]
    (None when there is nothing to compare)."""
    vals = [v for v in values.values() if v is not None]
    if not vals:
        return None, None, None
    lo, hi = min(vals), max(vals)
    return lo, hi, (None if seed is None else lo <= seed <= hi)


def fmt_range(lo, hi, digits: int = 2) -> str:
    if lo is None:
        return "-"
    if f"{lo:.{digits}f}" == f"{hi:.{digits}f}":
        return f"{lo:.{digits}f}"
    return f"{lo:.{digits}f} to {hi:.{digits}f}"


def slowed_latency_ms(seed_device_mbps: float, here_mbps: float) -> float:
    """The NVMe latency for a device slowed from the seed's ``seed_device_mbps`` to
    ``here_mbps`` to fit this machine: the latency slows by the same factor."""
    return NVME_LATENCY_MS * seed_device_mbps / here_mbps


def calibrate_in_run(inst, rel, nblocks: int, repeat: int = 2) -> float:
    """MB/s of a cold serial ``count(*) ... WHERE a < 0`` of ``rel`` on ``inst`` (the
    run's own instance and table) while the device costs nothing (10^6 MB/s, no seek or
    latency): what one process's CPU allows here.  The caller then sets the device it
    derives from this with ``inst.iomodel.set_device``; the best of ``repeat``."""
    from minidb.session import Session
    from minidb.sql.engine import Engine
    inst.iomodel.set_device(1e6, 0.0)
    sess = Session(inst)
    try:
        engine = Engine(sess)
        engine.execute("SET max_parallel_workers_per_gather = 0")  # one process
        engine.execute("SET synchronize_seqscans = off")
        best = 0.0
        for _ in range(repeat):
            make_cold(inst, rel)
            a = time.perf_counter()
            assert sql_count(engine, "SELECT count(*) FROM t WHERE a < 0") == 0
            best = max(best, nblocks * 8192 / 1e6 / (time.perf_counter() - a))
    finally:
        sess.close()
    return best


def spread(values: list) -> tuple:
    """(min, median, max) of a headline ratio over an experiment's repeats (None if any
    repeat had none)."""
    vals = [v for v in values if v is not None]
    if not vals or len(vals) != len(values):
        return (None, None, None)
    return (min(vals), float(np.median(vals)), max(vals))


def fmt_spread(values: list, digits: int = 2) -> str:
    """'median (min-max)' of the repeats' values, or the one value."""
    lo, med, hi = spread(values)
    if med is None:
        return "-"
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def load_now() -> float:
    """The machine's 1-minute load average (reported beside each repeat)."""
    return round(os.getloadavg()[0], 2)


def make_cold(inst, rel) -> None:
    """Nothing of ``rel`` in shared buffers nor in the simulated OS cache."""
    with inst.connect() as be:
        be.bufmgr.flush_buffers()
        be.bufmgr.drop_relation_buffers(rel.relfilenode)
    inst.drop_os_cache()


def io_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


class ALessThan:
    """``WHERE a < value`` on a scan whose first column is ``a`` (picklable: the parallel
    scan sends it to its workers)."""

    def __init__(self, value: int = 0):
        self.value = value

    def __call__(self, cols):
        return cols[0][0] < self.value


# ---------------------------------------------------------------------------------------------
# counting, in the calling process
def sql_count(engine, sql: str) -> int:
    return int(engine.execute(sql).rows[0][0])


def parallel_count(backend, rel, nworkers: int, where=None, record_runs: bool = False):
    """``SELECT count(*) FROM rel WHERE a < 0`` as a Gather over a parallel seq scan with
    ``nworkers`` workers planned: returns ``(count, rows scanned, GatherStats)``;
    ``record_runs``: each participant's runs are kept in its stats (``own_run_share``)."""
    from minidb.exec.gather import Aggregate, ParallelSeqScan
    xact = backend.xact
    snap = xact.start_statement()
    try:
        scan = ParallelSeqScan(backend, rel, ["a"], snap, predicate=where or ALessThan(0),
                               aggregates=[Aggregate("count")], nworkers=nworkers,
                               record_runs=record_runs)
        (count,) = scan.aggregate()
        xact.command_done(False)
    except BaseException:
        xact.fail()
        raise
    xact.commit()
    return count, scan.stats.total("visible"), scan.stats


def own_run_share(stats) -> float | None:
    """Of the blocks a parallel scan's participants were handed (``record_runs``), the
    share that continue the same participant's previous block: what each process's file
    descriptor sees as sequential.  Near 0 when the participants take blocks in turns
    (the strided pattern seed 002's text describes), near 1 when each takes runs of
    consecutive blocks.  None if no runs were recorded."""
    follow = total = 0
    for p in stats.participants:
        prev = None
        for first, k in p.runs or ():
            if k <= 0:
                continue
            follow += (k - 1) + (prev is not None and first == prev)
            total += k
            prev = first + k
    return follow / total if total else None


def serial_scan_rows(backend, rel) -> int:
    """A plain count of the visible rows by the serial scan (no SQL), for checks."""
    from minidb.heap.mvcc import seq_scan
    backend.xact.start_statement()
    n = sum(len(b) for b in seq_scan(backend, rel, [0]))
    backend.xact.command_done(False)
    backend.xact.commit()
    return n


# ---------------------------------------------------------------------------------------------
# client processes
@dataclass
class ClientResult:
    index: int
    ok: bool
    value: object = None
    error: str = ""


def _client_main(fn, inst, index, arg, settings, barrier, start, conn):
    from minidb.session import Session
    from minidb.sql.engine import Engine
    try:
        sess = Session(inst)
        try:
            engine = Engine(sess)
            for k, v in (settings or {}).items():
                engine.execute(f"SET {k} = {_literal(v)}")
            barrier.wait(120)
            value = fn(sess, engine, index, arg, start.value)
        finally:
            sess.close()
        conn.send(ClientResult(index, True, value))
    except BaseException:
        try:
            conn.send(ClientResult(index, False, error=traceback.format_exc()))
        except Exception:
            pass
    finally:
        conn.close()


def _literal(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return "'" + str(v).replace("'", "''") + "'"


def run_clients(inst, fn, args: list, settings: dict | None = None,
                timeout: float = 1800.0, delay: float = 0.05) -> list:
    """Fork one process per element of ``args``; each opens a session (with ``settings``
    SET), waits for the others, then calls ``fn(session, engine, index, arg, t0)`` where
    ``t0`` is the common start (``time.monotonic()``, the same clock in every process).
    Returns the values in order; a client's exception is re-raised here with its
    traceback."""
    ctx = multiprocessing.get_context("fork")
    n = len(args)
    barrier = ctx.Barrier(n + 1)
    start = ctx.Value("d", 0.0, lock=False)
    procs, pipes = [], []
    for i, arg in enumerate(args):
        r, w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_client_main, args=(fn, inst, i, arg, settings, barrier,
                                                   start, w), daemon=True)
        p.start()
        w.close()
        procs.append(p)
        pipes.append(r)
    start.value = time.monotonic() + delay
    try:
        barrier.wait(120)
    except Exception:
        for p in procs:
            p.kill()
        raise RuntimeError("clients did not all connect") from None
    results: list = [None] * n
    deadline = time.monotonic() + timeout
    try:
        for i, r in enumerate(pipes):
            left = deadline - time.monotonic()
            if left <= 0 or not r.poll(left):
                raise TimeoutError(f"client {i} did not finish in {timeout:.0f} s")
            try:
                res = r.recv()
            except EOFError:
                raise RuntimeError(f"client {i} died without a result") from None
            if not res.ok:
                raise RuntimeError(f"client {i} failed:\n{res.error}")
            results[i] = res.value
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
        for r in pipes:
            r.close()
    return results


def wait_until(t: float) -> None:
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
