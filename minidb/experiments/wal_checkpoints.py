"""WAL per transaction across checkpoints: a pgbench TPC-B-like run cut into slices, a
checkpoint every few slices, with full_page_writes on and off; the WAL bytes and full-page
images each slice wrote per transaction show the sawtooth PostgreSQL is known for - right
after a checkpoint every page's first change logs the whole page, then fewer and fewer do -
and that it is the images (full_page_writes off has no teeth).  PostgreSQL 15's pg_stat_wal
figures for the same slices are put beside minidb's when a server is reachable.

Method: ``pgbench -i`` at ``--scale``, then for each setting one instance runs ``--slices``
slices of ``--transactions`` TPC-B-like transactions (one client, prepared mode, no vacuum),
reading the WAL counters (``Instance.wal_stats()``: records, images, bytes - pg_stat_wal's)
around each slice, and runs CHECKPOINT after every ``--checkpoint-every`` slices (the
checkpoint a ``checkpoint_timeout`` of a few seconds would make; explicit so that the
teeth fall at the same places in every run).  The first slice follows a checkpoint too.
With ``--pg-dsn`` (and ``psql`` / ``pgbench`` on the PATH) the same is done on PostgreSQL:
``pgbench -i -s SCALE``, slices of ``pgbench -n -t N``, ``CHECKPOINT``, and
``pg_stat_wal`` read with psql around each slice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

from minidb.experiments.common import Report, fmt, log, md_table

SEED = "issue 14 (WAL): the full-page-image sawtooth after each checkpoint"


def _minidb_series(workdir: str, fpw: bool, scale: int, aps: int, slices: int,
                   transactions: int, every: int, shared_buffers: int) -> list[dict]:
    from minidb.instance import Instance
    from minidb.pgbench import init_pgbench, run_bench
    d = tempfile.mkdtemp(prefix=f"walckpt-{'fpw' if fpw else 'nofpw'}-", dir=workdir)
    base = dict(shared_buffers=shared_buffers, max_worker_processes=0)
    try:
        init_pgbench(os.path.join(d, "data"), scale, accounts_per_scale=aps, settings=base)
        inst = Instance(os.path.join(d, "data"), full_page_writes=fpw, **base)
        try:
            run_bench(inst, clients=1, transactions=1, accounts_per_scale=aps,
                      mode="prepared")   # pgbench's pre-run vacuum, outside the figures
            out = []
            for i in range(slices):
                after = i % every == 0
                if after:
                    inst.checkpoint()
                w0 = inst.wal_stats()
                res = run_bench(inst, clients=1, transactions=transactions, no_vacuum=True,
                                accounts_per_scale=aps, mode="prepared")
                w1 = inst.wal_stats()
                n = max(1, res.processed)
                out.append({"slice": i, "after_checkpoint": after, "transactions": n,
                            "records": (w1["wal_records"] - w0["wal_records"]) / n,
                            "fpi": (w1["wal_fpi"] - w0["wal_fpi"]) / n,
                            "bytes": (w1["wal_bytes"] - w0["wal_bytes"]) / n})
            return out
        finally:
            inst.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _psql(dsn: str, sql: str) -> str:
    return subprocess.run(["psql", "-X", "-Atq", "-d", dsn, "-c", sql], check=True,
                          capture_output=True, text=True, timeout=600).stdout.strip()


def _pg_series(dsn: str, fpw: bool, scale: int, slices: int, transactions: int,
               every: int) -> list[dict]:
    """The same slices on PostgreSQL (full_page_writes set with ALTER SYSTEM + reload)."""
    _psql(dsn, f"ALTER SYSTEM SET full_page_writes = {'on' if fpw else 'off'}")
    _psql(dsn, "SELECT pg_reload_conf()")
    subprocess.run(["pgbench", "-i", "-q", "-s", str(scale), dsn], check=True,
                   capture_output=True, timeout=3600)
    subprocess.run(["pgbench", "-n", "-t", "1", "-M", "prepared", dsn], check=True,
                   capture_output=True, timeout=600)
    q = "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal"
    out = []
    try:
        for i in range(slices):
            after = i % every == 0
            if after:
                _psql(dsn, "CHECKPOINT")
            r0 = [int(x) for x in _psql(dsn, q).split("|")]
            subprocess.run(["pgbench", "-n", "-t", str(transactions), "-M", "prepared", dsn],
                           check=True, capture_output=True, timeout=3600)
            time.sleep(0.6)  # pg_stat_wal is flushed by the backends at most every 0.5 s
            r1 = [int(x) for x in _psql(dsn, q).split("|")]
            d = [(b - a) / transactions for a, b in zip(r0, r1)]
            out.append({"slice": i, "after_checkpoint": after, "transactions": transactions,
                        "records": d[0], "fpi": d[1], "bytes": d[2]})
    finally:
        _psql(dsn, "ALTER SYSTEM RESET full_page_writes")
        _psql(dsn, "SELECT pg_reload_conf()")
    return out


def _pg_reachable(dsn: str | None) -> tuple[bool, str]:
    if not dsn:
        return False, "no --pg-dsn given"
    if not (shutil.which("psql") and shutil.which("pgbench")):
        return False, "psql / pgbench not on the PATH"
    try:
        v = _psql(dsn, "SHOW server_version_num")
    except (subprocess.SubprocessError, OSError) as e:
        return False, f"server not reachable ({e.__class__.__name__})"
    if int(v) < 140000:
        return False, f"server {v} has no pg_stat_wal.wal_fpi before 14"
    return True, f"PostgreSQL {v}"


def sawtooth(series: list[dict]) -> tuple[float, float]:
    """(mean images per transaction in the slices right after a checkpoint, mean in the
    last slice before each next checkpoint)."""
    first = [s["fpi"] for s in series if s["after_checkpoint"]]
    last = [series[i - 1]["fpi"] for i, s in enumerate(series) if s["after_checkpoint"] and i]
    last.append(series[-1]["fpi"])
    return sum(first) / len(first), sum(last) / len(last)


def run(scale: int = 1, accounts_per_scale: int = 100_000, slices: int = 12,
        transactions: int = 200, checkpoint_every: int = 4, shared_buffers: int = 2048,
        pg_dsn: str | None = None, workdir: str | None = None,
        command: str = "minidb experiment wal-checkpoints") -> Report:
    t0 = time.perf_counter()
    every = max(1, checkpoint_every)
    series = {}
    for fpw in (True, False):
        log(f"wal-checkpoints: minidb, full_page_writes={'on' if fpw else 'off'}")
        series[("minidb", fpw)] = _minidb_series(workdir, fpw, scale, accounts_per_scale,
                                                 slices, transactions, every, shared_buffers)
    ok, why = _pg_reachable(pg_dsn)
    if ok:
        for fpw in (True, False):
            log(f"wal-checkpoints: PostgreSQL, full_page_writes={'on' if fpw else 'off'}")
            series[("PostgreSQL", fpw)] = _pg_series(pg_dsn, fpw, scale, slices,
                                                     transactions, every)
    rows = []
    for i in range(slices):
        row = [i + 1, "yes" if series[("minidb", True)][i]["after_checkpoint"] else ""]
        for key in series:
            s = series[key][i]
            row += [fmt(s["bytes"], 0), fmt(s["fpi"], 2)]
        rows.append(row)
    headers = ["slice", "after CHECKPOINT"]
    for who, fpw in series:
        tag = f"{who} fpw {'on' if fpw else 'off'}"
        headers += [f"{tag}: bytes/tx", f"{tag}: images/tx"]
    on_first, on_last = sawtooth(series[("minidb", True)])
    off_first, off_last = sawtooth(series[("minidb", False)])
    mean = {k: sum(s["bytes"] for s in v) / len(v) for k, v in series.items()}
    rep = Report(name="wal-checkpoints", title="WAL per transaction across checkpoints",
                 seed=SEED, command=command)
    rep.summary = (
        f"With full_page_writes on, the slice right after a CHECKPOINT logs "
        f"{fmt(on_first, 2)} full-page images per transaction and the last slice before the "
        f"next one {fmt(on_last, 2)}: each page's first change after the redo point logs the "
        f"page whole, later changes only their delta.  Off: {fmt(off_first, 2)} and "
        f"{fmt(off_last, 2)}.  Mean WAL per transaction: {fmt(mean[('minidb', True)], 0)} "
        f"bytes on, {fmt(mean[('minidb', False)], 0)} off.")
    rep.scaling = [("pgbench scale", "-", str(scale), "accounts per scale "
                    f"{accounts_per_scale:,}"),
                   ("transactions per slice", "-", str(transactions), "one client"),
                   ("checkpoint", "checkpoint_timeout", f"every {every} slices",
                    "explicit, so the teeth fall at the same slices in every run")]
    rep.comparisons = [("images/tx after a checkpoint (fpw on)", "-", fmt(on_first, 2), ""),
                       ("images/tx before the next (fpw on)", "-", fmt(on_last, 2), ""),
                       ("WAL bytes/tx, fpw on / off", "-",
                        f"{fmt(mean[('minidb', True)], 0)} / {fmt(mean[('minidb', False)], 0)}",
                        "")]
    if ok:
        p_first, p_last = sawtooth(series[("PostgreSQL", True)])
        rep.comparisons += [
            ("PostgreSQL images/tx after / before (fpw on)", "-",
             f"{fmt(p_first, 2)} / {fmt(p_last, 2)}", why),
            ("PostgreSQL WAL bytes/tx, fpw on / off", "-",
             f"{fmt(mean[('PostgreSQL', True)], 0)} / {fmt(mean[('PostgreSQL', False)], 0)}",
             why)]
    else:
        rep.notes.append(f"PostgreSQL's figures are not shown: {why} (give --pg-dsn with a "
                         "PostgreSQL 15 server; its pgbench tables are re-initialised).")
    rep.tables = [("WAL per transaction, slice by slice", md_table(headers, rows))]
    rep.notes.append("minidb's images include new pages (PostgreSQL logs a new page with an "
                     "init flag and no image), and its heap and B-tree records are byte "
                     "deltas of the page rather than logical records: compare the shapes, "
                     "not the bytes.")
    rep.data = {"series": {f"{w} fpw={'on' if f else 'off'}": v for (w, f), v in series.items()},
                "sawtooth": {"on": (on_first, on_last), "off": (off_first, off_last)},
                "postgres": why}

    def plot(plt):
        fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for (who, fpw), v in series.items():
            x = [s["slice"] + 1 for s in v]
            style = "-" if who == "minidb" else "--"
            label = f"{who}, full_page_writes {'on' if fpw else 'off'}"
            axes[0].plot(x, [s["bytes"] for s in v], style, marker="o", label=label)
            axes[1].plot(x, [s["fpi"] for s in v], style, marker="o", label=label)
        for ax in axes:
            for s in series[("minidb", True)]:
                if s["after_checkpoint"]:
                    ax.axvline(s["slice"] + 0.5, color="grey", lw=0.8, ls=":")
        axes[0].set_ylabel("WAL bytes / transaction")
        axes[1].set_ylabel("full-page images / transaction")
        axes[1].set_xlabel(f"slice ({transactions} transactions each; dotted: CHECKPOINT)")
        axes[0].legend(fontsize=8)
        axes[0].set_title(rep.title)
        return fig
    rep.plot = plot
    rep.elapsed_s = time.perf_counter() - t0
    return rep
