"""syncscan-parallel: six clients each running a parallel count of a large table,
synchronized scans on and off, with large chunks, capped chunks and one block at a time
(seed 000).

The seed (``000_5ff83a1e5d2edb37.txt``, David Rowley, 2020, while PostgreSQL 14's chunked
allocation was being written): an 800 GB table (104.9 M blocks), ``pgbench -c 6 -j 6`` with
the script ``select * from t where a < 0`` (a parallel seq scan that returns nothing), for
3 hours per setting (30 minutes for the later ones).  Average latency: chunks of 65,536
blocks (the patch's pow2(nblocks / 2048)) 372,738 ms with synchronize_seqscans on against
320,204 ms off (16% slower on); chunks capped at 8,192 blocks 321,969 against 321,390
(equal); master (one block at a time) 1,070,226 and 1,085,847 ms (3.3x slower).  This is
why PostgreSQL 14 caps chunks at 8,192 blocks (PARALLEL_SEQSCAN_MAX_CHUNK_SIZE).

Setup here: the table ``t`` (``common.load_scan_table``) of 800 GiB / ``--shrink`` (default
4,096: 200 MiB), an instance with the I/O model beneath the pool, ``shared_buffers`` 1024
and an OS cache of the table / ``--cache-ratio`` (default 16).  For each setting, from a
cold start (shared buffers and OS cache emptied; the syncscan table keeps its hints, as
PostgreSQL's shared memory did between the seed's runs): six client processes, started
together, each running ``--queries`` parallel counts of ``a < 0`` in a row, each with
``--workers`` workers (default 1: six leaders and six workers, all launched, so every
query has the same participants, as the seed's lockstep runs with synchronization off
imply: their latencies varied by 4 to 20 ms over 320 s).  Settings: ``synchronize_seqscans``
off and on, crossed with chunks of 65,536 / ``--chunk-divisor`` and 8,192 /
``--chunk-divisor`` blocks (``pg14``, the first chunk at that maximum, as the seed's table
got them) and ``block``.  Reported: the average latency per setting (as pgbench's), each
query's, and the I/O model's counters.

Scaling.  The seed's chunks were 4,096 and 512 of Linux's 16-block read-ahead windows
long.  Keeping their ratio to the table (1/1,600 and 1/12,800) would make them 32 and 4
blocks here, two windows and a quarter of one, so the capped chunks would pay for
read-ahead breaks the seed's did not, and the participants of all six queries would
span a few hundred blocks, far less than any OS cache: whatever synchronized scans did,
every query would find the others' pages cached.  So the chunks are divided by 128
instead (512 and 64 blocks: 32 and 4 windows, still 8x apart), and the OS cache is
1/16 of the table, so that what decides the seed's result stays on the same side of
the line: the twelve participants' large chunks together span more than the OS cache
(a query that joins at another query's reported position can trail it by more than the
cache holds), the capped ones less.  The device: the seed's six scans were bound by its
disks (800 GB in 320 s, 2.5 GB/s) on a 64-core machine with cores to spare; here six
scans and their workers share two cores, so the device is slowed to keep them bound by
it: the run first measures, on its own instance and table, how fast one process decodes
a cold scan (``common.calibrate_in_run``) and gives the simulated device a bandwidth of
that over ``--cpu-share`` (default 6: six scans sharing the device each get a sixth of
it, so decoding for all of them takes about one core of two).  The device is solid state
with a 2019 NVMe datasheet's latency (52.6 us) and queue depth (32), the latency slowed by
as much as the bandwidth is (the seed's 2.7 GB/s over this device's); reads are
PostgreSQL 14's, 8 kB a call, under Linux's ondemand read-ahead.  The whole measurement
is repeated ``--repeats`` times (default 3): each ratio's median, minimum and maximum
and the machine's load at each repeat are reported.

What produces the seed's direction here (the counters show it): with synchronization
off, six queries started together all begin at block 0 with the same chunk grid and the
same participants, so they stay in step round after round and the table is read from
the disk about once per round.  With it on, every participant reports its position
every 16 blocks; with large chunks those positions lie up to a few chunks apart, so a
query that starts its next round a moment after another finished joins at one of them,
on a different chunk grid, and trails or leads the others by more than the OS cache
holds: pages are read from the disk twice, and the latency grows from the second round
on (the seed's first 600 s were 4.5% slower, its later ones 10-25%).  With capped chunks
the positions lie within the cache of each other and nothing is lost.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from minidb.experiments.common import (EXPERIMENT_IO, MB, NVME_QUEUE_DEPTH, NVME_SOURCE,
                                       Report, calibrate_in_run, fmt, fmt_spread,
                                       io_delta, load_now, load_scan_table, log, make_cold,
                                       md_table, parallel_count, ratio, run_clients,
                                       slowed_latency_ms)

NAME = "syncscan-parallel"
SEED = "000_5ff83a1e5d2edb37.txt"

SEED_BLOCKS = 104_857_600          # 800 GiB of 8 kB blocks
SEED_CHUNKS = (65536, 8192)
# (setting, synchronize_seqscans, average latency ms)
SEED_LATENCY = {("65536", "on"): 372738.134, ("65536", "off"): 320204.028,
                ("8192", "on"): 321969.172, ("8192", "off"): 321389.523,
                ("block", "on"): 1070226.162, ("block", "off"): 1085846.859}
# the seed's device: 800 GiB read in 320 s (synchronize_seqscans off) = 2.7 GB/s
SEED_DEVICE_MBPS = SEED_BLOCKS * 8192 / 1e6 / (SEED_LATENCY[("65536", "off")] / 1000)
# the seed's kernel (Linux, 2020): ondemand read-ahead; PostgreSQL 14 read 8 kB a call
SEED_IO = dict(EXPERIMENT_IO, io_readahead_policy="ondemand")


def _client(sess, engine, index, arg, t0):
    rel_name, queries, nworkers = arg
    be = sess.backend
    rel = be.catalog.heap_rel(rel_name)
    out = []
    for _ in range(queries):
        a = time.monotonic()
        count, seen, st = parallel_count(be, rel, nworkers)
        out.append({"start": a - t0, "latency_s": time.monotonic() - a, "count": count,
                    "seen": seen, "launched": st.workers_launched,
                    "start_block": st.start_block})
    return out


def _label(key: str, chunk: int | None) -> str:
    if key == "block":
        return "block at a time"
    return f"max chunk {int(key):,} scaled: {chunk:,} blocks"


def run(shrink: int = 4096, clients: int = 6, queries: int = 3, nworkers: int = 1,
        cpu_share: float = 6.0, cache_ratio: float = 16.0, chunk_divisor: int = 128,
        settings: list | None = None,
        workdir: str | None = None, command: str | None = None,
        table_blocks: int | None = None, chunks: dict | None = None,
        device_mbps: float | None = None, repeats: int = 3) -> Report:
    """``table_blocks``, ``chunks`` ({"65536": blocks, "8192": blocks}) and ``device_mbps``
    override the scaling (tests: a small table, chunks that differ, no calibration)."""
    t_start = time.perf_counter()
    nblocks = table_blocks or SEED_BLOCKS // shrink
    table_mb = max(1, nblocks * 8192 // MB)
    os_cache_mb = max(1, round(table_mb / cache_ratio))
    serial_cpu = None
    sizes = {str(c): max(1, c // chunk_divisor) for c in SEED_CHUNKS}
    sizes.update(chunks or {})
    chosen = [(str(c), "pg14", sizes[str(c)]) for c in SEED_CHUNKS] + [("block", "block", None)]
    order = [(k, pol, ch, on) for k, pol, ch in chosen for on in ("on", "off")
             if settings is None or f"{k}/{on}" in settings]
    d = tempfile.mkdtemp(prefix="minidb-ssp-", dir=workdir)
    runs: list = []
    loads: list = []
    try:
        from minidb.instance import Instance
        with Instance(os.path.join(d, "data"), shared_buffers=1024, os_cache_mb=os_cache_mb,
                      max_connections=max(12, clients + 4), max_worker_processes=8,
                      io_model="custom", io_rotational=False,
                      io_queue_depth=NVME_QUEUE_DEPTH, io_seq_mb_per_s=1e6, io_seek_ms=0.0,
                      **SEED_IO) as inst:
            rel, nrows, nblocks = load_scan_table(inst, "t", nblocks)
            if device_mbps is None:  # calibrated in this run, on this table
                serial_cpu = calibrate_in_run(inst, rel, nblocks)
                device_mbps = round(serial_cpu / cpu_share, 1)
            latency = slowed_latency_ms(SEED_DEVICE_MBPS, device_mbps)
            inst.iomodel.set_device(device_mbps, latency)
            log(f"syncscan-parallel: a serial scan decodes "
                f"{serial_cpu or 0:.0f} MB/s here; device {device_mbps:.1f} MB/s, latency "
                f"{latency * 1000:.0f} us, queue depth {NVME_QUEUE_DEPTH}")
            describe = inst.iomodel.describe()
            for rep_i in range(max(1, repeats)):
                loads.append(load_now())
                log(f"syncscan-parallel: repeat {rep_i + 1} of {repeats} (load {loads[-1]:g})")
                results: dict = {}
                for key, policy, chunk, on in order:
                    results[(key, on)] = _setting(inst, rel, nrows, nblocks, key, policy,
                                                  chunk, on, clients, queries, nworkers)
                runs.append(results)
    finally:
        shutil.rmtree(d, ignore_errors=True)

    rep = _report(runs, loads, chosen, sizes, shrink=shrink, clients=clients, queries=queries,
                  nworkers=nworkers, cache_ratio=cache_ratio, chunk_divisor=chunk_divisor,
                  os_cache_mb=os_cache_mb, nblocks=nblocks, nrows=nrows, describe=describe,
                  serial_cpu=serial_cpu, device_mbps=device_mbps, command=command)
    rep.elapsed_s = time.perf_counter() - t_start
    return rep


def _setting(inst, rel, nrows: int, nblocks: int, key: str, policy: str, chunk, on: str,
             clients: int, queries: int, nworkers: int) -> dict:
    """One setting from a cold start: ``clients`` processes started together, each running
    ``queries`` parallel counts; checks every answer and returns the figures."""
    sess_settings = {"synchronize_seqscans": on == "on", "parallel_chunk_policy": policy,
                     "max_parallel_workers_per_gather": nworkers}
    if chunk:
        sess_settings.update(parallel_max_chunk_blocks=chunk,
                             parallel_seqscan_nchunks=max(1, nblocks // chunk))
    make_cold(inst, rel)
    c0 = inst.io_counters()
    a = time.monotonic()
    res = run_clients(inst, _client, [("t", queries, nworkers)] * clients,
                      settings=sess_settings)
    wall = time.monotonic() - a
    io = io_delta(c0, inst.io_counters())
    qs = [q for r in res for q in r]
    bad = [q for q in qs if q["count"] != 0 or q["seen"] != nrows]
    if bad:
        raise AssertionError(f"{key}/{on}: wrong answers {bad[:3]}")
    lat = [q["latency_s"] for q in qs]
    table_bytes = nblocks * 8192
    out = {"latency_avg_s": sum(lat) / len(lat), "latencies_s": lat, "wall_s": wall,
           "io": io, "tables_read": io["bytes"] / table_bytes,
           "launched": [q["launched"] for q in qs],
           "start_blocks": [q["start_block"] for q in qs], "chunk": chunk}
    log(f"  {_label(key, chunk)}, synchronize_seqscans={on}: latency "
        f"{out['latency_avg_s']:.2f} s, disk read {out['tables_read']:.2f} tables, "
        f"{io['seeks']:,} seeks")
    return out


def _report(runs: list, loads: list, chosen: list, sizes: dict, *, shrink: int, clients: int,
            queries: int, nworkers: int, cache_ratio: float, chunk_divisor: int,
            os_cache_mb: int, nblocks: int, nrows: int, describe: str, serial_cpu,
            device_mbps: float, command) -> Report:
    """The report: the scaling, latency per setting beside the seed's, the ratios within
    the run (median, min and max over the repeats), the notes, the plot."""
    table_bytes = nblocks * 8192
    results = {k: sorted((r[k] for r in runs), key=lambda v: v["latency_avg_s"])[len(runs) // 2]
               for k in runs[0]}  # per setting, the median repeat
    rep = Report(NAME, "Synchronized scans with chunked parallel scans: six clients, each a "
                       "parallel count (seed 000)", SEED,
                 command or f"minidb experiment syncscan-parallel --shrink {shrink}"
                            f" --queries {queries} --chunk-divisor {chunk_divisor}"
                            f" --cache-ratio {cache_ratio:g}")
    nparts = clients * (nworkers + 1)
    rep.scaling = [
        ("table", "800 GiB (104,857,600 blocks)", f"{table_bytes / MB:,.0f} MiB "
         f"({nblocks:,} blocks)", f"1/{SEED_BLOCKS / nblocks:,.0f}"),
        ("max chunk 65,536", "65,536 blocks (4,096 read-ahead windows; 1/1,600 of the table)",
         f"{sizes['65536']:,} blocks ({sizes['65536'] / 16:g} windows; "
         f"1/{nblocks / sizes['65536']:,.0f} of the table)",
         f"1/{chunk_divisor}: kept far above the read-ahead window"),
        ("max chunk 8,192", "8,192 blocks (512 windows)",
         f"{sizes['8192']:,} blocks ({sizes['8192'] / 16:g} windows)",
         "kept 8x smaller than the large chunk"),
        ("read-ahead window", "16 blocks (Linux's 128 kB)", "16 blocks", "kept"),
        ("clients x parallel workers", "6 x 2 planned (8 workers in all)",
         f"{clients} x {nworkers} (all launched)",
         "every query with the same participants, as the seed's lockstep runs imply"),
        ("participants x large chunk / OS cache", "not given (RAM not reported)",
         f"{nparts * sizes['65536'] / (os_cache_mb * 128):.1f}",
         "> 1: a query can join more than a cache away from the others"),
        ("participants x capped chunk / OS cache", "not given",
         f"{nparts * sizes['8192'] / (os_cache_mb * 128):.2f}", "< 1"),
        ("queries per client", "about 29 (3 h) / 6 (30 min)", f"{queries}", "minutes"),
        ("device", "disks delivering 2.5 GB/s, 64 cores", describe,
         (f"kept: six scans bound by the device: one process decodes {serial_cpu:.0f} MB/s "
          f"here (measured first in this run, on this table), the device gives "
          f"{device_mbps:.1f} MB/s; latency and queue depth from {NVME_SOURCE}, the "
          f"latency slowed as much as the bandwidth (from the seed's "
          f"{SEED_DEVICE_MBPS:,.0f} MB/s)") if serial_cpu else "given"),
        ("reads", "PostgreSQL 14: 8 kB a call; Linux ondemand read-ahead",
         "io_combine_limit 1, io_readahead_policy ondemand", "kept"),
        ("repeats", "one run per setting", f"{len(runs)}, load "
         f"{', '.join(f'{x:g}' for x in loads)}",
         "tables show each setting's median repeat; ratios give median (min-max)"),
        ("OS cache", "not given", f"{os_cache_mb} MB (table {cache_ratio:g}x larger)",
         "see participants x chunk above"),
    ]
    keys = [k for k, _, _ in chosen]
    rows = []
    for k in keys:
        for on in ("on", "off"):
            r = results.get((k, on))
            if r is None:
                continue
            seed = SEED_LATENCY[(k, on)] / 1000.0
            rows.append([_label(k, sizes.get(k)), on, fmt(r["latency_avg_s"], 2), fmt(seed, 0),
                         fmt(r["wall_s"], 1), fmt(r["tables_read"], 2), fmt(r["io"]["requests"]),
                         fmt(r["io"]["seeks"]),
                         f"{sum(r['launched']) / len(r['launched']):.1f}"])
    rep.tables.append(("Average latency per setting", md_table(
        ["chunks", "synchronize_seqscans", "latency s", "seed latency s", "wall s (all queries)",
         "disk read (tables)", "disk requests", "seeks", "workers launched (mean)"],
        rows, "llrrrrrrr")))
    # comparisons, as ratios within each repeat: median (min-max)
    def lat(k, on, r=None):
        v = (r or results).get((k, on))
        return v["latency_avg_s"] if v else None

    def spread_of(a, b):
        return fmt_spread([ratio(lat(*a, r), lat(*b, r), 4) for r in runs])
    for k in keys:
        s = SEED_LATENCY[(k, "on")] / SEED_LATENCY[(k, "off")]
        rep.comparisons.append((f"{_label(k, sizes.get(k))}: latency on / off", f"{s:.2f}",
                                spread_of((k, "on"), (k, "off")),
                                "> 1: synchronized scans slower"))
    b = SEED_LATENCY[("block", "off")] / SEED_LATENCY[("8192", "off")]
    rep.comparisons.append(("block at a time / capped chunks, off", f"{b:.2f}",
                            spread_of(("block", "off"), ("8192", "off")), ""))
    b = SEED_LATENCY[("65536", "on")] / SEED_LATENCY[("8192", "on")]
    rep.comparisons.append(("large chunks / capped chunks, on", f"{b:.2f}",
                            spread_of(("65536", "on"), ("8192", "on")), ""))
    rep.summary = "Average latency: " + "; ".join(
        f"{_label(k, sizes.get(k))} {lat(k, 'on'):.2f} s on, {lat(k, 'off'):.2f} s off"
        for k in keys if lat(k, "on") is not None and lat(k, "off") is not None) + "."
    rep.notes = [
        "What to look for: the seed's six queries started together and, without "
        "synchronization, stayed together (all at block 0, the same chunk grid, the same "
        "participants), so the table came from the disk about once per round: 'disk read' "
        "near the number of rounds. With synchronization each participant reports its own "
        "position; with large chunks those lie chunks apart, a query starting its next "
        "round joins at one of them on another chunk grid, trails the others by more than "
        "the OS cache holds, and reads pages the others already read: more disk read, "
        "longer latency from the second round on. Capped chunks keep the reported "
        "positions within the cache of each other. One block at a time defeats read-ahead "
        "whatever the setting.",
        "Where minidb departs: the chunks are 1/128 of the seed's (its ratio to the table "
        "would put them at the read-ahead window), the OS cache is chosen so that the large "
        "chunks' span exceeds it and the capped ones' does not (the seed does not give its "
        "RAM), three rounds per client instead of 29, the device is a model (an NVMe "
        "datasheet's latency and queue depth, slowed with its bandwidth), and six leaders "
        "with their workers share two cores.",
    ]
    rep.data = {"nblocks": nblocks, "nrows": nrows, "results": {f"{k}/{on}": v for (k, on), v
                                                                 in results.items()},
                "serial_cpu_mbps": serial_cpu, "device_mbps": device_mbps, "disk": describe,
                "repeats": [{f"{k}/{on}": v for (k, on), v in r.items()} for r in runs],
                "loads": loads}
    rep.plot = lambda plt: _plot(plt, results, keys, round(SEED_BLOCKS / nblocks),
                                  chunk_divisor, sizes)
    return rep


def _plot(plt, results, keys, shrink, divisor, sizes=None):
    """Average latency per setting as a ratio to capped chunks with syncscan off: minidb's
    (its own chunk sizes on the axis) beside the seed's."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.0))
    x = range(len(keys))
    w = 0.38
    for j, on in enumerate(("on", "off")):
        mine = [results[(k, on)]["latency_avg_s"] / results[("8192", "off")]["latency_avg_s"]
                if (k, on) in results and ("8192", "off") in results else 0 for k in keys]
        seed = [SEED_LATENCY[(k, on)] / SEED_LATENCY[("8192", "off")] for k in keys]
        color = ("tab:orange", "tab:blue")[j]
        ax1.bar([i + (j - 0.5) * w for i in x], mine, w, label=f"syncscan {on}", color=color)
        ax2.bar([i + (j - 0.5) * w for i in x], seed, w, label=f"syncscan {on}", color=color)
    sizes = sizes or {}

    def names(own: bool) -> list[str]:
        out = []
        for k in keys:
            if k == "block":
                out.append("block at a time")
            elif own and sizes.get(k):
                out.append(f"chunk {sizes[k]:,} blocks\n(seed's {int(k):,} / {divisor})")
            else:
                out.append(f"chunk {int(k):,} blocks")
        return out
    for ax, title, own in ((ax1, "minidb", True), (ax2, "the seed (800 GB)", False)):
        ax.set_xticks(list(x))
        ax.set_xticklabels(names(own), fontsize=8)
        ax.set_ylabel("latency / capped chunks' with syncscan off\n(ratio of average "
                      "latencies)", fontsize=9)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle(f"Six clients, each a parallel count (table 1/{shrink:,}, chunks 1/{divisor} "
                 "of the seed's)")
    fig.tight_layout()
    return fig
