"""syncscan-parallel: six clients each running a parallel count of a large table,
synchronized scans on and off with large chunks across a sweep of the OS cache size, and
capped chunks and one block at a time (seed 000).

The seed (``000_5ff83a1e5d2edb37.txt``, David Rowley, 2020, while PostgreSQL 14's chunked
allocation was being written): an 800 GB table (104.9 M blocks), ``pgbench -c 6 -j 6`` with
the script ``select * from t where a < 0`` (a parallel seq scan that returns nothing), for
3 hours per setting (30 minutes for the later ones).  Average latency: chunks of 65,536
blocks (the patch's pow2(nblocks / 2048)) 372,738 ms with synchronize_seqscans on against
320,204 ms off (16% slower on); chunks capped at 8,192 blocks 321,969 against 321,390
(equal); master (one block at a time) 1,070,226 and 1,085,847 ms (3.3x slower).  This is
why PostgreSQL 14 caps chunks at 8,192 blocks (PARALLEL_SEQSCAN_MAX_CHUNK_SIZE).

Setup here: the table ``t`` (``common.load_scan_table``) of 800 GiB / ``--shrink`` (default
4,096: 200 MiB), an instance with the I/O model beneath the pool and ``shared_buffers``
1024, restarted on the same data directory for each OS cache size of the sweep (below).
For each setting, from a cold start (shared buffers and OS cache emptied; the syncscan
table keeps its hints, as PostgreSQL's shared memory did between the seed's runs): six
client processes, started together, each running ``--queries`` (default 2) parallel
counts of ``a < 0`` in a row, each with ``--workers`` workers (default 1: six leaders and
six workers, all launched, so every query has the same participants, as the seed's
lockstep runs with synchronization off imply: their latencies varied by 4 to 20 ms over
320 s).  Settings: ``synchronize_seqscans`` off and on, with chunks of 65,536 /
``--chunk-divisor`` and 8,192 / ``--chunk-divisor`` blocks (``pg14``, the first chunk at
that maximum, as the seed's table got them) and ``block``.  Reported: the average
latency per setting (as pgbench's), each query's, and the I/O model's counters; the
comparisons use each client's rounds after its first (a setting's first round starts
cold with all six together whatever the setting; the seed's 29 rounds made it negligible,
two rounds here would halve the difference).

The OS cache sweep.  The seed does not give its RAM, and its result turns on it: a query
that joins at another's reported position gains nothing if it trails the others by more
than the OS cache holds.  So the cache is swept, the points fixed in the code before any
run (``SPAN_OVER_CACHE``): the twelve participants' large chunks together span a quarter,
a half, one, two, four and eight times the cache.  At each point the large chunks run
with synchronization on and off (the headline is the range of their on / off ratio over
the sweep, and the report says whether the seed's ratio lies inside it); the capped
chunks (on and off) and one block at a time (off) run at one point, span = cache, to keep
the default run near six minutes on a quiet machine (their participants span at most an
eighth of the smallest cache).  ``--span-over-cache`` (repeatable) runs other points.

Scaling.  The seed's chunks were 4,096 and 512 of Linux's 16-block read-ahead windows
long.  Keeping their ratio to the table (1/1,600 and 1/12,800) would make them 32 and 4
blocks here, two windows and a quarter of one, so the capped chunks would pay for
read-ahead breaks the seed's did not, and the participants of all six queries would span a
few hundred blocks, far less than any OS cache: whatever synchronized scans did, every
query would find the others' pages cached.  So the chunks are divided by 128 instead (512
and 64 blocks: 32 and 4 windows, still 8x apart).  The device: the seed's six scans were
bound by its disks (800 GB in 320 s, 2.5 GB/s) on a 64-core machine with cores to spare;
here six scans and their workers share two cores, so the device is slowed to keep them
bound by it: the run first measures, on its own instance and table, how fast one process
decodes a cold scan (``common.calibrate_in_run``) and gives the simulated device a
bandwidth of that over ``--cpu-share`` (default 6: six scans sharing the device each get a
sixth of it, so decoding for all of them takes about one core of two).  The device is
solid state with a 2019 NVMe datasheet's latency (52.6 us) and queue depth (32), the
latency slowed by as much as the bandwidth is (the seed's 2.7 GB/s over this device's);
reads are PostgreSQL 14's, 8 kB a call.  The whole measurement is repeated ``--repeats``
times (default 3): each ratio's median, minimum and maximum and the machine's load at each
repeat are reported.

The kernel's read-ahead.  The seed does not state its kernel.  The OS cache sweep runs
under Linux's ondemand read-ahead (a 2020 Linux's; chunked scans keep read-ahead under
either policy, and the sweep is about the cache).  The point span / cache = 1 runs every
setting under each policy of ``--readahead-policy`` (default both: ``perfile``, read-ahead
state per open file, the mechanism seed 002's text gives for block-at-a-time's loss, and
``ondemand``), one instance restart each; its headlines (block at a time / capped chunks
above all) are reported as their range over the policies, with whether the seed's ratio
lies inside.

What produces the seed's direction here (the counters show it): with synchronization off,
six queries started together all begin at block 0 with the same chunk grid and the same
participants, so they stay in step round after round and the table is read from the disk
about once per round.  With it on, every participant reports its position every 16 blocks,
as it reads them (not when its chunk is handed out: PostgreSQL reports a page right before
reading it); with large chunks those positions lie up to a few chunks apart, so a query
that starts its next round a moment after another finished joins at one of them, on a
different chunk grid, and trails or leads the others by more than the OS cache holds:
pages are read from the disk twice, and the latency grows from the second round on (the
seed's first 600 s were 4.5% slower, its later ones 10-25%).  With capped chunks the
positions lie within the cache of each other and nothing is lost; with a cache that holds
the large chunks' span, neither is anything lost with them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

from minidb.experiments.common import (EXPERIMENT_IO, MB, NVME_QUEUE_DEPTH, NVME_SOURCE,
                                       READAHEAD_POLICIES, Report, calibrate_in_run, fmt,
                                       fmt_range, fmt_spread, io_delta, load_now,
                                       load_scan_table, log, make_cold, md_table,
                                       own_run_share, parallel_count, policy_range, ratio,
                                       run_clients,
                                       slowed_latency_ms, spread)

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
# PostgreSQL 14 read 8 kB a call; the kernel's read-ahead policy is set per point below
SEED_IO = dict(EXPERIMENT_IO)
# The read-ahead policy of the OS cache sweep when it is among those run: a 2020 Linux's
# (the sweep is about the cache, and chunked scans keep read-ahead under either policy);
# the settings at the one point run under every policy (common.READAHEAD_POLICIES).
SWEEP_READAHEAD = "ondemand"

# The OS cache sweep, fixed here before any run of it.  The seed does not give its RAM,
# and what decides its result is whether a query that joins at another's reported
# position trails the others by more than the OS cache holds: the participants' large
# chunks together ("chunk span": participants x large chunk) against the cache.  An
# earlier version picked one cache size (table / 16: span 3.8x the cache) after a run at
# another size had shown nothing, so the run now publishes on / off at each of these
# spans / cache: a quarter to eight times, in factors of two (six points: two below 1, 1
# itself, three above).  The headline is the range of the on / off ratio over the sweep.
SPAN_OVER_CACHE = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
# what runs at every point of the sweep: the large chunks, on and off
SWEPT = ("65536/on", "65536/off")
# and at one point only (to keep the default run near six minutes on a quiet machine): the
# capped chunks (on and off: the seed's control, equal) and one block at a time with
# synchronization off (the seed's block / capped ratio; each of its rounds costs three of
# the chunks').  Their participants span at most 768 blocks, an eighth of the smallest
# cache of the sweep, so the cache should not decide them; they run where the large
# chunks span exactly the cache, the sweep's middle.
AT_ONE_POINT = ("8192/on", "8192/off", "block/off")
ONE_POINT = 1.0


def _client(sess, engine, index, arg, t0):
    rel_name, queries, nworkers = arg
    be = sess.backend
    rel = be.catalog.heap_rel(rel_name)
    out = []
    for _ in range(queries):
        a = time.monotonic()
        count, seen, st = parallel_count(be, rel, nworkers, record_runs=True)
        out.append({"start": a - t0, "latency_s": time.monotonic() - a, "count": count,
                    "seen": seen, "launched": st.workers_launched,
                    "start_block": st.start_block, "own_run_share": own_run_share(st)})
    return out


def _label(key: str, chunk: int | None) -> str:
    if key == "block":
        return "block at a time"
    return f"max chunk {int(key):,} scaled: {chunk:,} blocks"


def run(shrink: int = 4096, clients: int = 6, queries: int = 2, nworkers: int = 1,
        cpu_share: float = 6.0, chunk_divisor: int = 128,
        sweep: tuple | list | None = None, swept: tuple | list | None = None,
        at_one_point: tuple | list | None = None, one_point: float = ONE_POINT,
        workdir: str | None = None, command: str | None = None,
        table_blocks: int | None = None, chunks: dict | None = None,
        device_mbps: float | None = None, repeats: int = 3,
        readahead_policies: tuple | list | None = None) -> Report:
    """``sweep``: the participants' large-chunk span over the OS cache at each point
    (default ``SPAN_OVER_CACHE``); ``swept``: the settings ("65536/on", ...) run at every
    point; ``at_one_point``: those run only at the point ``one_point`` (which is added to
    the sweep if missing).  ``readahead_policies`` (default both): the sweep runs under
    ``SWEEP_READAHEAD`` if it is given (else the first), and the point ``one_point`` with
    every setting (``swept`` and ``at_one_point``) under each other policy too.  ``table_blocks``, ``chunks`` ({"65536": blocks, "8192":
    blocks}) and ``device_mbps`` override the scaling (tests: a small table, chunks that
    differ, no calibration)."""
    t_start = time.perf_counter()
    nblocks = table_blocks or SEED_BLOCKS // shrink
    sweep = sorted(set(SPAN_OVER_CACHE if sweep is None else sweep))
    swept = list(SWEPT if swept is None else swept)
    at_one_point = list(AT_ONE_POINT if at_one_point is None else at_one_point)
    if at_one_point and one_point not in sweep:
        sweep = sorted(sweep + [one_point])
    serial_cpu = None
    sizes = {str(c): max(1, c // chunk_divisor) for c in SEED_CHUNKS}
    sizes.update(chunks or {})
    chosen = [(str(c), "pg14", sizes[str(c)]) for c in SEED_CHUNKS] + [("block", "block", None)]
    nparts = clients * (nworkers + 1)
    span_blocks = nparts * sizes["65536"]
    ras = list(dict.fromkeys(readahead_policies or READAHEAD_POLICIES))
    sweep_ra = SWEEP_READAHEAD if SWEEP_READAHEAD in ras else ras[0]
    # (read-ahead policy, span / cache, settings): the sweep, then the one point under
    # each other policy with every setting
    plan = [(sweep_ra, x, swept + (at_one_point if x == one_point else [])) for x in sweep]
    plan += [(ra, one_point, swept + at_one_point) for ra in ras if ra != sweep_ra]
    d = tempfile.mkdtemp(prefix="minidb-ssp-", dir=workdir)
    points: list = []
    describe = ""
    try:
        from minidb.instance import Instance
        datadir = os.path.join(d, "data")
        rel = nrows = None
        for ra, x, wanted in plan:
            # the OS cache and the kernel's read-ahead live in the shared segment: one
            # instance (restart) per point, on the same data directory
            os_cache_mb = max(1, round(span_blocks / x / 128))
            order = [(k, pol, ch, on) for k, pol, ch in chosen for on in ("on", "off")
                     if f"{k}/{on}" in wanted]
            with Instance(datadir, shared_buffers=1024, os_cache_mb=os_cache_mb,
                          max_connections=max(12, clients + 4), max_worker_processes=8,
                          io_model="custom", io_rotational=False,
                          io_queue_depth=NVME_QUEUE_DEPTH, io_seq_mb_per_s=1e6,
                          io_seek_ms=0.0, io_readahead_policy=ra, **SEED_IO) as inst:
                if rel is None:
                    rel, nrows, nblocks = load_scan_table(inst, "t", nblocks)
                    if device_mbps is None:  # calibrated in this run, on this table
                        serial_cpu = calibrate_in_run(inst, rel, nblocks)
                        device_mbps = round(serial_cpu / cpu_share, 1)
                else:
                    rel = inst.catalog.heap_rel("t")
                latency = slowed_latency_ms(SEED_DEVICE_MBPS, device_mbps)
                inst.iomodel.set_device(device_mbps, latency)
                if not describe:
                    decodes = (f"a serial scan decodes {serial_cpu:.0f} MB/s here; "
                               if serial_cpu else "")
                    log(f"syncscan-parallel: {decodes}device {device_mbps:.1f} MB/s, "
                        f"latency {latency * 1000:.0f} us, queue depth {NVME_QUEUE_DEPTH}")
                    describe = inst.iomodel.describe().replace(f" ({ra})", "")
                point = {"span_over_cache": x, "readahead": ra,
                         "span_over_cache_here": span_blocks / (os_cache_mb * 128),
                         "os_cache_mb": os_cache_mb, "repeats": [], "loads": []}
                for rep_i in range(max(1, repeats)):
                    point["loads"].append(load_now())
                    log(f"syncscan-parallel: span / cache {x:g} (OS cache {os_cache_mb} MB), "
                        f"read-ahead {ra}, repeat {rep_i + 1} of {repeats} (load "
                        f"{point['loads'][-1]:g})")
                    results: dict = {}
                    for key, policy, chunk, on in order:
                        results[(key, on)] = _setting(inst, rel, nrows, nblocks, key, policy,
                                                      chunk, on, clients, queries, nworkers)
                    point["repeats"].append(results)
                points.append(point)
    finally:
        shutil.rmtree(d, ignore_errors=True)

    rep = _report(points, chosen, sizes, ras, sweep_ra, shrink=shrink, clients=clients,
                  queries=queries, nworkers=nworkers, chunk_divisor=chunk_divisor,
                  one_point=one_point,
                  nblocks=nblocks, nrows=nrows, describe=describe, serial_cpu=serial_cpu,
                  device_mbps=device_mbps, command=command, repeats=repeats)
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
    later = [q["latency_s"] for r in res for q in r[1:]]  # every client's rounds but its first
    table_bytes = nblocks * 8192
    out = {"latency_avg_s": sum(lat) / len(lat), "latencies_s": lat, "wall_s": wall,
           "latency_later_s": sum(later) / len(later) if later else None,
           "io": io, "tables_read": io["bytes"] / table_bytes,
           "launched": [q["launched"] for q in qs],
           "start_blocks": [q["start_block"] for q in qs], "chunk": chunk,
           "own_run_share": _mean([q["own_run_share"] for q in qs])}
    log(f"  {_label(key, chunk)}, synchronize_seqscans={on}: latency "
        f"{out['latency_avg_s']:.2f} s, disk read {out['tables_read']:.2f} tables, "
        f"{io['seeks']:,} seeks")
    return out


def _mean(xs: list):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _lat(v: dict) -> float:
    """The latency a comparison uses: the average over each client's rounds after its
    first, when it ran more than one.  A setting's first round starts cold with all six
    clients together whatever the setting (synchronization can only move a round that
    starts after another's); the seed's 29 rounds made it negligible, two here would
    halve the difference.  The average over all rounds is in the tables too."""
    later = v.get("latency_later_s")
    return later if later is not None else v["latency_avg_s"]


def _median_repeat(runs: list) -> dict:
    """Per setting, the repeat with the median latency (``_lat``)."""
    keys = {k for r in runs for k in r}
    return {k: sorted((r[k] for r in runs if k in r), key=_lat)[len(runs) // 2]
            for k in keys}


def _ratios(runs: list, a: tuple, b: tuple) -> list:
    """Latency ratio a / b (``_lat``) in each repeat (None where either did not run)."""
    return [ratio(_lat(r[a]), _lat(r[b]), 4) if a in r and b in r else None for r in runs]


def _report(all_points: list, chosen: list, sizes: dict, ras: list, sweep_ra: str, *,
            shrink: int, clients: int, queries: int, nworkers: int, chunk_divisor: int,
            one_point: float, nblocks: int, nrows: int, describe: str, serial_cpu,
            device_mbps: float, command, repeats: int) -> Report:
    """The report: the scaling, the sweep (large chunks on / off at each cache size, the
    headline its range), the settings run at one point under each read-ahead policy
    beside the seed's (headlines: their range over the policies), the plot."""
    table_bytes = nblocks * 8192
    for pt in all_points:
        pt["results"] = _median_repeat(pt["repeats"])
        pt["on_off"] = _ratios(pt["repeats"], ("65536", "on"), ("65536", "off"))
    points = [pt for pt in all_points if pt["readahead"] == sweep_ra]   # the sweep
    mids = {pt["readahead"]: pt for pt in all_points if pt["span_over_cache"] == one_point}
    mids = {ra: mids[ra] for ra in ras if ra in mids}
    sweep_pts = [pt for pt in points if spread(pt["on_off"])[1] is not None]
    medians = [spread(pt["on_off"])[1] for pt in sweep_pts]
    seed_on_off = SEED_LATENCY[("65536", "on")] / SEED_LATENCY[("65536", "off")]
    lo = min(medians) if medians else None
    hi = max(medians) if medians else None
    inside = None if lo is None else lo <= seed_on_off <= hi
    rep = Report(NAME, "Synchronized scans with chunked parallel scans: six clients, each a "
                       "parallel count, across a sweep of the OS cache (seed 000)", SEED,
                 command or f"minidb experiment syncscan-parallel --shrink {shrink}"
                            f" --queries {queries} --chunk-divisor {chunk_divisor}")
    nparts = clients * (nworkers + 1)
    caches = [pt["os_cache_mb"] for pt in points]
    xs = [pt["span_over_cache"] for pt in points]
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
        ("OS cache", "not given (RAM not reported)",
         f"{min(caches)} to {max(caches)} MB: one instance restart per point",
         "swept, the points fixed in the code before any run (SPAN_OVER_CACHE)"),
        ("participants x large chunk / OS cache", "not given",
         ", ".join(f"{x:g}" for x in xs) + " (here: " + ", ".join(
             f"{pt['span_over_cache_here']:.2f}" for pt in points) + ")",
         "on both sides of 1 (the default: a quarter to eight times): where a query "
         "joining at another's position trails it by less, and by more, than the cache "
         "holds"),
        ("participants x capped chunk / OS cache", "not given",
         f"{nparts * sizes['8192'] / (min(caches) * 128):.2f} at most",
         "below 1 at every point"),
        ("settings at each point", "all six, one run each",
         f"large chunks on and off; capped chunks and block at a time at span / cache "
         f"{one_point:g} only"
         + "".join(f"; every setting again under {ra} at that point" for ra in ras
                   if ra != sweep_ra),
         "keeps the sweep's run near six minutes on a quiet machine (the one point under "
         "another read-ahead policy adds about two fifths of that)"),
        ("queries per client", "about 29 (3 h) / 6 (30 min)", f"{queries}",
         "fewer queries per point to keep the sweep near six minutes; the seed's "
         "difference shows from the second round on"),
        ("device", "disks delivering 2.5 GB/s, 64 cores", describe,
         (f"kept: six scans bound by the device: one process decodes {serial_cpu:.0f} MB/s "
          f"here (measured first in this run, on this table), the device gives "
          f"{device_mbps:.1f} MB/s; latency and queue depth from {NVME_SOURCE}, the "
          f"latency slowed as much as the bandwidth (from the seed's "
          f"{SEED_DEVICE_MBPS:,.0f} MB/s)") if serial_cpu else "given"),
        ("reads", "PostgreSQL 14: 8 kB a call", "io_combine_limit 1", "kept"),
        ("kernel read-ahead", "not stated",
         f"the sweep under {sweep_ra}; every setting at span / cache {one_point:g} under "
         + " and ".join(ras) + " (one instance restart each)",
         "swept at the one point: the seed does not state its kernel; a 2020 Linux's is "
         "ondemand, seed 002's explanation is perfile (per open file); headlines at the "
         "one point are ranges over the policies"),
        ("repeats", "one run per setting", f"{repeats} at each point, load "
         f"{', '.join(f'{x:g}' for pt in points for x in pt['loads'])}",
         "tables show each setting's median repeat; ratios give median (min-max)"),
    ]
    # the sweep
    rows = []
    for pt in points:
        r = pt["results"]
        on, off = r.get(("65536", "on")), r.get(("65536", "off"))
        rows.append([f"{pt['span_over_cache']:g}", f"{pt['span_over_cache_here']:.2f}",
                     fmt(pt["os_cache_mb"]),
                     fmt(_lat(on), 2) if on else "-",
                     fmt(_lat(off), 2) if off else "-",
                     fmt_spread(pt["on_off"]),
                     fmt(on["tables_read"], 2) if on else "-",
                     fmt(off["tables_read"], 2) if off else "-",
                     fmt(on["io"]["seeks"]) if on else "-",
                     fmt(off["io"]["seeks"]) if off else "-",
                     ", ".join(f"{x:g}" for x in pt["loads"])])
    rep.tables.append((f"The OS cache sweep: large chunks, synchronize_seqscans on and off "
                       f"(read-ahead {sweep_ra})",
                       md_table(["span / cache", "here", "OS cache MB", "latency on s*",
                                 "latency off s*", "on / off*", "disk read on (tables)",
                                 "disk read off (tables)", "seeks on", "seeks off", "load"],
                                rows, "rrrrrrrrrrl")))
    keys = [k for k, _, _ in chosen]
    if mids:
        rows = []
        for ra, m in mids.items():
            for k in keys:
                for on in ("on", "off"):
                    r = m["results"].get((k, on))
                    if r is None:
                        continue
                    seed = SEED_LATENCY[(k, on)] / 1000.0
                    rows.append([ra, _label(k, sizes.get(k)), on, fmt(r["latency_avg_s"], 2),
                                 fmt(_lat(r), 2), fmt(seed, 0), fmt(r["wall_s"], 1),
                                 fmt(r["tables_read"], 2), fmt(r["io"]["requests"]),
                                 fmt(r["io"]["seeks"]), fmt(r["io"]["readahead_pages"]),
                                 "-" if r.get("own_run_share") is None
                                 else f"{r['own_run_share']:.0%}",
                                 f"{sum(r['launched']) / len(r['launched']):.1f}"])
        some = next(iter(mids.values()))
        rep.tables.append((f"Average latency per setting at span / cache {one_point:g} "
                           f"(OS cache {some['os_cache_mb']} MB), under each read-ahead "
                           "policy", md_table(
            ["read-ahead", "chunks", "synchronize_seqscans", "latency s (all rounds)",
             "latency s*", "seed latency s", "wall s (all queries)", "disk read (tables)",
             "disk requests", "seeks", "read-ahead pages",
             "blocks continuing the participant's previous", "workers launched (mean)"],
            rows, "lllrrrrrrrrrr")))
    # beside the seed: the sweep's range first, then each point, then the one point's
    if medians:
        rep.comparisons.append((
            "large chunks: latency on / off, range over the sweep", f"{seed_on_off:.2f}",
            f"{lo:.2f} to {hi:.2f}",
            f"the seed's ratio lies {'inside' if inside else 'outside'} the range "
            f"(span / cache {min(xs):g} to {max(xs):g})"))
    for pt in sweep_pts:
        rep.comparisons.append((
            f"large chunks: on / off at span / cache {pt['span_over_cache']:g}",
            f"{seed_on_off:.2f}", fmt_spread(pt["on_off"]), "> 1: synchronized scans slower"))
    # the one point: each ratio's range over the read-ahead policies, then each policy's
    one_point_headlines = {}
    for label, a, b, note in (
            ("capped chunks: latency on / off", ("8192", "on"), ("8192", "off"),
             "the seed's control: equal"),
            ("block at a time: latency on / off", ("block", "on"), ("block", "off"), ""),
            ("block at a time / capped chunks, off", ("block", "off"), ("8192", "off"), ""),
            ("large chunks / capped chunks, on", ("65536", "on"), ("8192", "on"), ""),
            ("large chunks: latency on / off", ("65536", "on"), ("65536", "off"),
             "> 1: synchronized scans slower")):
        seed = round(SEED_LATENCY[a] / SEED_LATENCY[b], 2)
        vals = {ra: _ratios(m["repeats"], a, b) for ra, m in mids.items()}
        vals = {ra: v for ra, v in vals.items() if spread(v)[1] is not None}
        if not vals:
            continue
        plo, phi, pin = policy_range({ra: spread(v)[1] for ra, v in vals.items()}, seed)
        one_point_headlines[label] = {"per_policy": {ra: spread(v)[1] for ra, v in vals.items()},
                                      "range": (plo, phi), "seed": seed, "seed_inside": pin}
        at = f"span / cache {one_point:g}"
        if len(vals) > 1:
            rep.comparisons.append((f"{label}, {at}, range over the read-ahead policies",
                                    f"{seed:.2f}", fmt_range(plo, phi),
                                    f"the seed's ratio lies {'inside' if pin else 'outside'} "
                                    "the range"))
        for ra, v in vals.items():
            rep.comparisons.append((f"{label}, {at}, {ra}", f"{seed:.2f}", fmt_spread(v),
                                    note))
    if medians:
        rep.summary = (
            f"Large chunks, synchronize_seqscans on / off, across an OS cache that the "
            f"participants' large chunks span {min(xs):g} to {max(xs):g} times: median "
            + ", ".join(f"{spread(pt['on_off'])[1]:.2f} at {pt['span_over_cache']:g}"
                        for pt in sweep_pts)
            + f"; range {lo:.2f} to {hi:.2f}. The seed's {seed_on_off:.2f} lies "
            + ("inside" if inside else "outside") + " that range.")
    h = one_point_headlines.get("block at a time / capped chunks, off")
    if h is not None:
        rep.summary = (rep.summary + " " if rep.summary else "") + (
            f"Block at a time / capped chunks (off) at span / cache {one_point:g}: "
            f"{fmt_range(*h['range'])} over the read-ahead policies ("
            + ", ".join(f"{ra} {v:.2f}" for ra, v in h["per_policy"].items())
            + f"); the seed's {h['seed']:.2f} lies "
            + ("inside" if h["seed_inside"] else "outside") + " that range.")
    rep.notes = [
        "(*) Latencies and ratios marked * are the average over each client's rounds after "
        "its first (all rounds when there is one): a setting's first round starts cold "
        "with the six clients together whatever the setting, and only a later round can "
        "join another's position; the seed's 29 rounds made its first negligible.",
        "What to look for: the seed's six queries started together and, without "
        "synchronization, stayed together (all at block 0, the same chunk grid, the same "
        "participants), so the table came from the disk about once per round: 'disk read' "
        "near the number of rounds. With synchronization each participant reports its own "
        "position as it reads its pages; with large chunks those lie chunks apart, a query "
        "starting its next round joins at one of them on another chunk grid, and if it "
        "trails the others by more than the OS cache holds it reads pages the others "
        "already read: more disk read, longer latency from the second round on. So the "
        "ratio should grow with the span / cache: near 1 where the cache holds the "
        "participants' span, above 1 where it does not. Capped chunks keep the reported "
        "positions within the cache of each other. One block at a time defeats read-ahead "
        "only where each participant's reads are strided and the kernel keeps read-ahead "
        "state per open file (perfile); the column 'blocks continuing the participant's "
        "previous' measures how strided they were (PostgreSQL's participants, decoding a "
        "page before taking the next, take blocks nearly in turns: near 0%; minidb's are "
        "paced by their reads, so they take turns while their reads wait, but decode a "
        "batch of pages at a time, and take a batch's blocks in a row once read-ahead "
        "serves them from the cache).",
        "Where minidb departs: the chunks are 1/128 of the seed's (its ratio to the table "
        "would put them at the read-ahead window), the OS cache is swept because the seed "
        "does not give its RAM, two rounds per client at each point instead of 29, the "
        "capped chunks and block at a time at one point of the sweep only, the device is "
        "a model (an NVMe datasheet's latency and queue depth, slowed with its bandwidth), "
        "and six leaders with their workers share two cores.",
    ]

    def enc(res: dict) -> dict:
        return {f"{k}/{on}": v for (k, on), v in res.items()}
    rep.data = {"nblocks": nblocks, "nrows": nrows,
                "points": [{"span_over_cache": pt["span_over_cache"],
                            "readahead": pt["readahead"],
                            "span_over_cache_here": pt["span_over_cache_here"],
                            "os_cache_mb": pt["os_cache_mb"], "loads": pt["loads"],
                            "on_off": pt["on_off"], "results": enc(pt["results"]),
                            "repeats": [enc(r) for r in pt["repeats"]]} for pt in all_points],
                "sweep_range": (lo, hi), "seed_on_off": seed_on_off, "seed_inside": inside,
                "one_point": one_point, "readahead": ras, "sweep_readahead": sweep_ra,
                "one_point_headlines": one_point_headlines,
                "serial_cpu_mbps": serial_cpu, "device_mbps": device_mbps, "disk": describe}
    rep.plot = lambda plt: _plot(plt, points, mids, keys, round(SEED_BLOCKS / nblocks),
                                  chunk_divisor, sizes, seed_on_off)
    return rep


def _plot(plt, points, mids, keys, shrink, divisor, sizes, seed_on_off):
    """Left: the large chunks' on / off ratio across the sweep (median, min-max bars) with
    the seed's; right: at the one point, each setting's latency as a ratio to capped
    chunks with syncscan off, minidb's under each read-ahead policy beside the seed's."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.0))
    xs, med, err_lo, err_hi = [], [], [], []
    for pt in points:
        lo, m, hi = spread(pt["on_off"])
        if m is None:
            continue
        xs.append(pt["span_over_cache_here"])
        med.append(m)
        err_lo.append(m - lo)
        err_hi.append(hi - m)
    if xs:
        ax1.errorbar(xs, med, yerr=[err_lo, err_hi], fmt="o-", color="tab:orange",
                     capsize=3, label=f"minidb ({points[0]['readahead']}), median (min-max)")
        ax1.set_xscale("log", base=2)
    ax1.axhline(seed_on_off, color="tab:blue", linestyle="--",
                label=f"the seed ({seed_on_off:.2f}, RAM not given)")
    ax1.axhline(1.0, color="grey", linewidth=0.8)
    ax1.set_xlabel("participants x large chunk / OS cache (log scale)", fontsize=9)
    ax1.set_ylabel("latency on / off (average latencies,\nrounds after the first)",
                   fontsize=9)
    ax1.set_title(f"large chunks ({sizes['65536']:,} blocks), synchronize_seqscans")
    ax1.legend(fontsize=8)
    mids = {ra: m for ra, m in mids.items() if ("8192", "off") in m["results"]}
    if mids:
        present = [(k, on) for k in keys for on in ("on", "off")
                   if any((k, on) in m["results"] for m in mids.values())]
        x = list(range(len(present)))
        w = 0.8 / (len(mids) + 1)
        colors = {"ondemand": "tab:orange", "perfile": "tab:red"}
        for i, (ra, m) in enumerate(mids.items()):
            res = m["results"]
            base = _lat(res[("8192", "off")])
            mine = [_lat(res[p]) / base if p in res else 0.0 for p in present]
            ax2.bar([j + (i - len(mids) / 2) * w for j in x], mine, w,
                    label=f"minidb, read-ahead {ra}", color=colors.get(ra, "tab:green"))
        seed = [SEED_LATENCY[p] / SEED_LATENCY[("8192", "off")] for p in present]
        ax2.bar([j + (len(mids) / 2) * w for j in x], seed, w, label="the seed (800 GB)",
                color="tab:blue")
        names = []
        for k, on in present:
            if k == "block":
                names.append(f"block at a time\n{on}")
            else:
                names.append(f"chunk {sizes[k]:,}\n(seed's {int(k):,}) {on}")
        ax2.set_xticks(x)
        ax2.set_xticklabels(names, fontsize=7)
        ax2.set_ylabel("latency / capped chunks' with syncscan off", fontsize=9)
        ax2.set_title(f"at span / cache {next(iter(mids.values()))['span_over_cache']:g}")
        ax2.legend(fontsize=7)
    else:
        ax2.set_axis_off()
    fig.suptitle(f"Six clients, each a parallel count (table 1/{shrink:,}, chunks 1/{divisor} "
                 "of the seed's)")
    fig.tight_layout()
    return fig
