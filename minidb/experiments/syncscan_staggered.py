"""syncscan-staggered: four staggered clients, each counting a large table twice, with
synchronized scans off and on (seed 001).

The seed (``001_d0e33e7e257af2c8.txt``, Jeff Davis, 2007, PostgreSQL 8.2 and his patch): an
11 GB table on a machine with 1 GB of RAM; 4 threads each running ``COUNT(*)`` twice,
started a minute apart; one scan alone took 334 s.  Unpatched 8.2 took 2,227 s for all
threads (about 2,100 s per thread) with shared_buffers 24 MB, and 2,842 s with 128 MB;
patched, 901 s (721 s per thread) and 899 s: 2.5x and 3.2x faster.

Setup here: the table ``t`` (``common.load_scan_table``) of ``--table-mb``; an instance
with the I/O model beneath the buffer pool, its OS cache ``--cache-ratio`` (11) times
smaller than the table, ``shared_buffers`` 1024 (8 MB: a scan of the table uses its 256 kB
bulk-read ring, and synchronizes when the setting is on).  First one scan alone, cold,
gives the single-scan time S.  Then, for ``synchronize_seqscans`` off and on, from a cold
start (shared buffers and OS cache emptied): 4 client processes, client i starting
``i x stagger x S`` after the first (stagger 0.18: the seed's 60 s / 334 s), each running
``SELECT count(*) FROM t`` twice through SQL, serially (``max_parallel_workers_per_gather``
0, as PostgreSQL 8.2 had no parallel scans).  Reported: the total time (first start to
last end), each client's time for its two scans, every scan's time, and the I/O model's
counters - bytes read from the disk (in tables), requests, seeks.

The disk.  The seed's disk read 33 MB/s (11 GB in 334 s), so its scans were bound by I/O
with the CPU mostly idle, even four at once.  Here the default device is the I/O model's
``custom`` disk at the seed's 33 MB/s with the ``hdd`` preset's 8 ms seek; with the ``hdd``
preset itself (150 MB/s, ``--disk hdd``) four scans share this machine's two cores and are
bound by CPU, which hides most of what synchronization saves on the disk (its counters
still show it).  The kernel is the seed's (Linux of early 2007): the CFQ scheduler with its
default slices (slice_sync 100 ms, slice_idle 8 ms), per-file read-ahead (the kernels
before 2.6.23), and PostgreSQL 8.2's 8 kB reads; the drive has an 8 MB read-ahead cache
(a 2006-2007 desktop drive's buffer).  The whole measurement (S, then off and on) is
repeated ``--repeats`` times (default 3); the report gives the headline ratios' median,
minimum and maximum and the machine's load at each repeat.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from minidb.experiments.common import (EXPERIMENT_IO, MB, Report, fmt, fmt_ratio,
                                       fmt_spread, io_delta, load_now, load_scan_table, log,
                                       make_cold, md_table, ratio, run_clients, sql_count,
                                       wait_until)

NAME = "syncscan-staggered"
SEED = "001_d0e33e7e257af2c8.txt"

SEED_SINGLE_S = 334.0
SEED_STAGGER_S = 60.0
SEED_TABLE_GB, SEED_RAM_GB = 11, 1
# (shared_buffers, total off, total on, per thread off, per thread on), seconds
SEED_RUNS = [("24 MB", 2227.0, 901.0, 2100.0, 721.0), ("128 MB", 2842.0, 899.0, 2600.0, 718.0)]
DISKS = {"seed": ("custom", 33.0, 8.0), "hdd": ("hdd", 150.0, 8.0), "ssd": ("ssd", 500.0, 0.1)}

# The seed's kernel (Linux of early 2007, 2.6.18 to 2.6.22): CFQ, the default scheduler
# since 2.6.18, with its default slices (io_cfq_slice_sync_ms 100, io_cfq_slice_idle_ms 8);
# the per-file read-ahead of the kernels before 2.6.23; PostgreSQL 8.2 read 8 kB a call.
# The drive's read-ahead cache keeps its default, 8 MB (a 2007 desktop drive's buffer).
SEED_IO = dict(EXPERIMENT_IO, io_scheduler="cfq", io_readahead_policy="perfile")

QUERY = "SELECT count(*) FROM t"
SERIAL = "SET max_parallel_workers_per_gather = 0"  # the seed's scans were serial (8.2)


def _client(sess, engine, index, arg, t0):
    offset, scans = arg
    wait_until(t0 + offset)
    out = []
    for _ in range(scans):
        a = time.monotonic()
        n = sql_count(engine, QUERY)
        out.append((a - t0, time.monotonic() - t0, n))
    return out


def run(table_mb: int = 128, clients: int = 4, scans: int = 2, stagger: float = 0.18,
        cache_ratio: float = SEED_TABLE_GB / SEED_RAM_GB, disk: str = "seed",
        shared_buffers: int = 1024, workdir: str | None = None,
        command: str | None = None, repeats: int = 3) -> Report:
    t_start = time.perf_counter()
    model, mbps, seek = DISKS[disk]
    nblocks = table_mb * MB // 8192
    os_cache_mb = max(1, round(table_mb / cache_ratio))
    d = tempfile.mkdtemp(prefix="minidb-sss-", dir=workdir)
    settings = dict(io_model=model, os_cache_mb=os_cache_mb, shared_buffers=shared_buffers,
                    max_connections=max(12, clients + 4), **SEED_IO)
    if model == "custom":
        settings.update(io_seq_mb_per_s=mbps, io_seek_ms=seek)
    runs, loads = [], []
    try:
        from minidb.instance import Instance
        with Instance(os.path.join(d, "data"), **settings) as inst:
            rel, nrows, nblocks = load_scan_table(inst, "t", nblocks)
            describe = inst.iomodel.describe()
            table_bytes = nblocks * 8192
            for rep_i in range(max(1, repeats)):
                loads.append(load_now())
                single, single_io = _single_scan(inst, rel, nrows)
                log(f"syncscan-staggered: repeat {rep_i + 1} of {repeats} (load "
                    f"{loads[-1]:g}): {describe}; one scan alone {single:.2f} s")
                results = {}
                for on in (False, True):
                    results["on" if on else "off"] = _staggered(
                        inst, rel, nrows, table_bytes, on, clients, scans, stagger * single,
                        single)
                runs.append((results, single, single_io))
    finally:
        shutil.rmtree(d, ignore_errors=True)

    # the tables show the repeat with the median headline ratio (total off / on)
    order = sorted(range(len(runs)), key=lambda i: runs[i][0]["off"]["total_s"]
                   / runs[i][0]["on"]["total_s"])
    results, single, single_io = runs[order[len(order) // 2]]
    rep = _report(results, single, single_io, table_mb=table_mb, clients=clients,
                  scans=scans, stagger=stagger, cache_ratio=cache_ratio, disk=disk,
                  shared_buffers=shared_buffers, os_cache_mb=os_cache_mb, nblocks=nblocks,
                  nrows=nrows, describe=describe, command=command, runs=runs, loads=loads)
    rep.elapsed_s = time.perf_counter() - t_start
    return rep


def _single_scan(inst, rel, nrows: int) -> tuple[float, dict]:
    """S: one serial count of the cold table alone (seconds, I/O counters)."""
    from minidb.session import Session
    from minidb.sql.engine import Engine
    sess = Session(inst)
    try:
        engine = Engine(sess)
        engine.execute(SERIAL)
        make_cold(inst, rel)
        c0 = inst.io_counters()
        a = time.monotonic()
        assert sql_count(engine, QUERY) == nrows
        return time.monotonic() - a, io_delta(c0, inst.io_counters())
    finally:
        sess.close()


def _staggered(inst, rel, nrows: int, table_bytes: int, on: bool, clients: int, scans: int,
               gap_s: float, single: float) -> dict:
    """One setting: from a cold start, ``clients`` processes started ``gap_s`` apart, each
    counting the table ``scans`` times; checks every count, returns the figures."""
    make_cold(inst, rel)
    c0 = inst.io_counters()
    args = [(i * gap_s, scans) for i in range(clients)]
    res = run_clients(inst, _client, args, settings={
        "synchronize_seqscans": on, "max_parallel_workers_per_gather": 0})
    io = io_delta(c0, inst.io_counters())
    counts = [x[2] for r in res for x in r]
    if any(c != nrows for c in counts):
        raise AssertionError(f"a scan counted {counts}, expected {nrows}")
    first = min(x[0] for r in res for x in r)
    total = max(x[1] for r in res for x in r) - first
    log(f"  synchronize_seqscans={'on' if on else 'off'}: total {total:.1f} s "
        f"({total / single:.2f} single scans), disk read {io['bytes'] / table_bytes:.2f}"
        f" tables, {io['seeks']:,} seeks")
    return {"total_s": total, "per_client_s": [r[-1][1] - r[0][0] for r in res],
            "scans_s": [[x[1] - x[0] for x in r] for r in res],
            "starts_s": [[x[0] for x in r] for r in res], "io": io,
            "tables_read": io["bytes"] / table_bytes}


def _report(results: dict, single: float, single_io: dict, *, table_mb: int, clients: int,
            scans: int, stagger: float, cache_ratio: float, disk: str, shared_buffers: int,
            os_cache_mb: int, nblocks: int, nrows: int, describe: str, command,
            runs: list | None = None, loads: list | None = None) -> Report:
    """The report: the scaling, the totals beside the seed's (the median repeat; the
    headline ratios as median (min-max) over the repeats), the runs, the notes, the
    plot."""
    runs = runs or [(results, single, single_io)]
    loads = loads or []
    rep = Report(NAME, "Synchronized scans: four staggered clients counting a table eight "
                       "times larger than the OS cache (seed 001)", SEED,
                 command or f"minidb experiment syncscan-staggered --table-mb "
                            f"{table_mb} --disk {disk}")
    off, on = results["off"], results["on"]
    rep.scaling = [
        ("table", f"{SEED_TABLE_GB} GB", f"{nblocks * 8192 / MB:,.0f} MB ({nblocks:,} blocks, "
         f"{nrows:,} rows)", "minutes, not hours"),
        ("table / OS cache", f"{SEED_TABLE_GB / SEED_RAM_GB:g} (1 GB RAM)",
         f"{nblocks * 8192 / MB / os_cache_mb:.1f} (os_cache_mb {os_cache_mb})", "kept"),
        ("clients x scans each", "4 x 2", f"{clients} x {scans}", "kept"),
        ("stagger / single-scan time", f"{SEED_STAGGER_S / SEED_SINGLE_S:.2f} (60 s / 334 s)",
         f"{stagger:.2f} ({stagger * single:.2f} s / {single:.2f} s)", "kept"),
        ("disk", "33 MB/s (11 GB in 334 s)", describe,
         "kept: a scan is bound by I/O" if disk == "seed" else "the preset"),
        ("shared_buffers", "24 MB and 128 MB", f"{shared_buffers} ({shared_buffers * 8192 / MB:g}"
         " MB)", "either way the table is over a quarter of it: 256 kB ring, synchronized"),
        ("kernel", "Linux of 2007 (2.6.18-2.6.22)", "CFQ (slice_sync 100 ms, slice_idle 8 ms), "
         "per-file read-ahead, 8 kB reads", "the kernel defaults of the seed's era, set before "
         "any run; the slices are not scaled with the table"),
        ("drive", "a consumer disk of 2007", "8 MB read-ahead cache",
         "a 2006-2007 7,200 rpm desktop drive's buffer (datasheets)"),
        ("repeats", "one run each", f"{len(runs)}, load {', '.join(f'{x:g}' for x in loads)}",
         "tables show the median repeat; ratios give median (min-max)"),
    ]
    seed_ratio = [r[1] / r[2] for r in SEED_RUNS]
    rep.comparisons = [
        ("total time off / on", " and ".join(f"{x:.1f}x" for x in seed_ratio),
         fmt_spread([ratio(r["off"]["total_s"], r["on"]["total_s"], 4) for r, _, _ in runs])
         + "x", "median (min-max) of the repeats; same direction if > 1"),
        ("total off, in single-scan times", " and ".join(f"{r[1] / SEED_SINGLE_S:.2f}"
                                                          for r in SEED_RUNS),
         fmt(off["total_s"] / single, 2), ""),
        ("total on, in single-scan times", " and ".join(f"{r[2] / SEED_SINGLE_S:.2f}"
                                                         for r in SEED_RUNS),
         fmt(on["total_s"] / single, 2), ""),
        ("per client off / on", " and ".join(f"{r[3] / r[4]:.1f}x" for r in SEED_RUNS),
         fmt_ratio(sum(off["per_client_s"]), sum(on["per_client_s"]), 2) + "x", "means"),
        ("disk bytes off / on", "not reported",
         fmt_spread([ratio(r["off"]["io"]["bytes"], r["on"]["io"]["bytes"], 4)
                     for r, _, _ in runs]) + "x",
         f"{off['tables_read']:.2f} against {on['tables_read']:.2f} tables read"),
    ]
    rows = []
    for label, r in (("off", off), ("on", on)):
        rows.append([label, fmt(r["total_s"], 1), fmt(r["total_s"] / single, 2),
                     ", ".join(fmt(x, 1) for x in r["per_client_s"]),
                     "; ".join(", ".join(fmt(s, 1) for s in c) for c in r["scans_s"]),
                     fmt(r["tables_read"], 2), fmt(r["io"]["requests"]), fmt(r["io"]["seeks"]),
                     fmt(r["io"]["cache_hits"])])
    rep.tables.append(("Runs", md_table(
        ["synchronize_seqscans", "total s", "total / S", "per client s (2 scans)",
         "each scan s (client by client)", "disk read (tables)", "disk requests", "seeks",
         "OS cache hits"], rows, "lrrllrrrr")))
    rep.tables.append(("One scan alone (S)", md_table(
        ["S", "MB/s", "disk requests", "seeks"],
        [[f"{single:.2f} s", fmt(nblocks * 8192 / MB / single, 1),
          fmt(single_io["requests"]), fmt(single_io["seeks"])]], "rrrr")))
    rep.tables.append(("The seed", md_table(
        ["shared_buffers", "total off s", "total on s", "off / on", "per thread off s",
         "per thread on s"],
        [[r[0], fmt(r[1], 0), fmt(r[2], 0), f"{r[1] / r[2]:.1f}x", fmt(r[3], 0), fmt(r[4], 0)]
         for r in SEED_RUNS], "lrrrrr")))
    rep.summary = (f"Synchronized scans cut the total time from {off['total_s']:.1f} s to "
                   f"{on['total_s']:.1f} s ({ratio(off['total_s'], on['total_s'])}x; the seed: "
                   f"2.5x and 3.2x) and the bytes read from the disk from "
                   f"{off['tables_read']:.2f} to {on['tables_read']:.2f} tables.")
    rep.notes = [
        "Without synchronization each scan starts at block 0; the OS cache holds only the "
        f"last 1/{cache_ratio:g} of the table, so a scan that starts later finds little of "
        "what the others read and the disk serves several streams at once, seeking "
        "between them. With synchronization a scan starts where another one is (the shared "
        "position table, reported every 16 blocks) and the clients move as a pack: the "
        "first reads, the others find its pages in the OS cache.",
        "Where minidb departs: read-ahead is the seed's kernel's, per file (Linux before "
        "2.6.23), so when the scan at the front of the pack changes, the new front "
        "runner's window starts at its own position; the drive's read-ahead cache spares "
        "it the seek when it continues where the disk stopped. CFQ is modelled by its "
        "effect on the disk's work (a seek per slice, not per switch between streams), "
        "not by reordering requests; its 100 ms slice is the kernel's default, not scaled "
        "with the table, so it covers a larger share of a scan here than in the seed. "
        "The seed's shared_buffers puzzle (128 MB slower than 24 MB unpatched) is not "
        "modelled.",
    ]
    rep.data = {"repeats": [r for r, _, _ in runs], "loads": loads,
                "single_s": single, "single_io": single_io, "nblocks": nblocks, "nrows": nrows,
                "os_cache_mb": os_cache_mb, "results": results, "disk": describe}
    rep.plot = lambda plt: _plot(plt, results, single, clients, stagger)
    return rep


def _plot(plt, results, single, clients, stagger=0.18):
    """Each client's scans over time, off and on, and beside them the totals in single-scan
    times: minidb's and the seed's (both of its shared_buffers settings)."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8),
                             gridspec_kw={"width_ratios": [2, 2, 1.3]})
    for ax, label in zip(axes[:2], ("off", "on")):
        r = results[label]
        for c in range(clients):
            for k, (start, dur) in enumerate(zip(r["starts_s"][c], r["scans_s"][c])):
                ax.barh(c, dur, left=start, color=("tab:blue", "tab:orange")[k % 2],
                        edgecolor="black", height=0.6)
        ax.set_title(f"minidb, synchronize_seqscans = {label}: {r['total_s']:.1f} s, "
                     f"{r['tables_read']:.2f} tables read", fontsize=9)
        ax.set_yticks(range(clients))
        ax.set_yticklabels([f"client {c + 1}" for c in range(clients)])
        ax.set_ylabel("client")
        ax.set_xlabel("time since the first start (s; one scan alone: %.1f s)" % single)
        ax.invert_yaxis()
    axes[1].sharex(axes[0])
    ax = axes[2]
    groups = [("minidb", results["off"]["total_s"] / single, results["on"]["total_s"] / single)]
    groups += [(f"seed, {r[0]}", r[1] / SEED_SINGLE_S, r[2] / SEED_SINGLE_S) for r in SEED_RUNS]
    x = range(len(groups))
    w = 0.38
    ax.bar([i - w / 2 for i in x], [g[1] for g in groups], w, color="tab:gray", label="off")
    ax.bar([i + w / 2 for i in x], [g[2] for g in groups], w, color="tab:green", label="on")
    for i, g in enumerate(groups):
        ax.text(i, max(g[1], g[2]), f"{g[1] / g[2]:.1f}x", ha="center", va="bottom",
                fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylabel("total time / one scan alone (ratio)")
    ax.set_title("all clients' total, off / on above", fontsize=9)
    ax.set_ylim(0, 1.45 * max(max(g[1], g[2]) for g in groups))
    ax.legend(fontsize=7, title="synchronize_seqscans", title_fontsize=7, loc="upper left",
              ncol=2)
    fig.suptitle(f"count(*) twice per client, clients staggered by {stagger:g} of a scan "
                 "(blue: 1st scan, orange: 2nd); right: minidb beside the seed (2007, 11 GB)")
    fig.tight_layout()
    return fig
