"""``minidb experiment NAME [options]``: run one seed experiment (or ``all``),
write ``<out>/<name>.md`` and ``<out>/<name>.png``, print a short summary (the report's
summary and its seed-beside-minidb figures; the whole markdown is in the file).

``list`` prints each experiment's whole description (its module docstring's first
paragraph); ``NAME --help`` shows every option's default and where it comes from: the
seed's own figure, a physical default chosen for this machine (with the reason), or a
sweep where the seed does not say (every value run, the headline the range over them).

    minidb experiment list
    minidb experiment dead-tuples [--scale 10] [--runs 3] [--transactions N] [--repeats 3]
    minidb experiment syncscan-staggered [--table-mb 128] [--disk seed|hdd|ssd]
    minidb experiment parallel-readahead [--table-mb 512] [--workers 7] [--disk auto]
                                         [--readahead-policy perfile|ondemand ...]
    minidb experiment syncscan-parallel [--shrink 4096] [--queries 2] [--repeats 3]
                                        [--span-over-cache X ...]
                                        [--readahead-policy perfile|ondemand ...]
    minidb experiment wal-checkpoints [--slices 12] [--checkpoint-every 4] [--pg-dsn DSN]
    minidb experiment all [--out DIR]

Common options: ``--out DIR`` (default ``./minidb-results``), ``--no-plot``, ``--workdir DIR``
(where the temporary data directories go; default the system's temporary directory).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import textwrap
import time

from minidb.experiments import EXPERIMENTS, dead_tuples
from minidb.experiments.common import OUT_DIR


SEED, PHYSICAL, SWEPT = "from the seed", "physical default", "swept"


def _opt(p, flag: str, default, source: str, why: str, help: str = "", shown=None,
         **kw) -> None:
    """An option whose help ends with its default and where the default comes from:
    ``SEED`` (the seed's own figure), ``PHYSICAL`` (chosen for this machine: the seed's
    would take hours or not fit) or ``SWEPT`` (the seed does not say: every value is run
    and the headline is the range over them), with the reason."""
    if shown is not None:
        pass
    elif default is None:
        shown = "all" if kw.get("action") == "append" else "derived"
    else:
        shown = default
    text = f"{help} " if help else ""
    p.add_argument(flag, default=default,
                   help=f"{text}[default: {shown}, {source}: {why}]".replace("%", "%%"), **kw)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="minidb experiment",
                                 description="Rerun the four seed experiments on minidb, "
                                             "and the WAL's checkpoint sawtooth.")
    sub = ap.add_subparsers(dest="name", required=True)

    def common(p):
        p.add_argument("--out", default=OUT_DIR,
                       help="where <name>.md and <name>.png go [default: ./minidb-results]")
        p.add_argument("--no-plot", action="store_true", help="skip the PNG")
        p.add_argument("--workdir", default=None,
                       help="where temporary data directories go [default: the system's "
                            "temporary directory]")

    def new(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=_description(name).split(". ")[0],
                              description=_description(name))

    sub.add_parser("list", help="list the experiments")
    p = new("dead-tuples")
    _opt(p, "--scale", 10, SEED, "pgbench -i -s 10 (a smaller scale keeps the new versions "
         "per row but shrinks the sequential scans' share of the dead-version work)",
         "pgbench scale", type=int)
    _opt(p, "--clients", 5, SEED, "pgbench -c 5", type=int)
    _opt(p, "--transactions", None, SEED, "500 x scale / clients, the seed's 500 new "
         "versions of each branch row per run (-t 1000 at scale 10)",
         "per client and run", type=int)
    _opt(p, "--runs", 3, SEED, "three runs in a row without VACUUM", type=int)
    _opt(p, "--shared-buffers", None, SEED, "1024 x scale / 10, the seed's -B 1024 at "
         "scale 10", type=int)
    _opt(p, "--mode", "prepared", PHYSICAL, "the seed's pgbench sent simple queries; "
         "minidb's SQL parser would be most of a simple-mode transaction",
         choices=("simple", "extended", "prepared"))
    _opt(p, "--config", None, SEED, "the seed's three configurations and today's engine",
         "only this configuration (repeatable; run in the order given)", action="append",
         choices=[label for label, _ in dead_tuples.CONFIGS])
    _opt(p, "--repeats", 3, PHYSICAL, "each repeat is every configuration from a fresh "
         "start (at scale 10 about 9 CPU-minutes, 5 minutes on a quiet 2-core machine); the "
         "report gives each ratio's median (min-max) over the repeats and the load at each",
         "times the whole measurement is run", type=int)
    common(p)
    p = new("syncscan-staggered")
    _opt(p, "--table-mb", 128, PHYSICAL, "the seed's 11 GB, so that one scan takes "
         "seconds", type=int)
    _opt(p, "--clients", 4, SEED, "four threads", type=int)
    _opt(p, "--scans", 2, SEED, "each thread counted the table twice", type=int)
    _opt(p, "--stagger", 0.18, SEED, "60 s between starts / 334 s for one scan",
         "fraction of a single scan's time between client starts", type=float)
    _opt(p, "--cache-ratio", 11.0, SEED, "an 11 GB table, 1 GB of RAM", "table / OS cache",
         type=float)
    _opt(p, "--disk", "seed", SEED, "a device as slow against one scan's decoding as the "
         "seed's disk (33 MB/s; 8 ms seek, the hdd preset's), with the seed's kernel: the CFQ "
         "scheduler, Linux's default from 2.6.18, with its default slices (slice_sync 100 "
         "ms, slice_idle 8 ms: block/cfq-iosched.c), per-file read-ahead (kernels before "
         "2.6.23), and an 8 MB drive read-ahead cache (a 2006-2007 7,200 rpm desktop "
         "drive's buffer, from its datasheet)", choices=("seed", "hdd", "ssd"))
    _opt(p, "--repeats", 3, PHYSICAL, "the report gives each ratio's median (min-max) over "
         "the repeats and the load at each", "times the whole measurement is run", type=int)
    common(p)
    p = new("parallel-readahead")
    _opt(p, "--table-mb", 512, PHYSICAL, "the seed's table of about 100 GB, so that a run "
         "takes minutes", type=int)
    _opt(p, "--workers", 7, SEED, "0 to 7 workers", type=int)
    _opt(p, "--disk", "auto", PHYSICAL, "a solid-state device as much faster than one "
         "process's decoding (measured first in the same run, on the same table) as the "
         "seed's was (1,198 / 742.7 MB/s), with a 2019 NVMe datasheet's latency (52.6 us: "
         "19,000 IOPS at queue depth 1, Samsung 970 EVO Plus) slowed as much as the "
         "bandwidth, and its queue depth (32); 8 kB reads (PostgreSQL 13/14)",
         choices=("auto", "ssd", "hdd"))
    _readahead_opt(p)
    _opt(p, "--policy", None, SEED, "one block at a time and chunks up to 64, 1,024, 8,192 "
         "and 16,384 blocks", "block, 64, 1024, 8192, 16384 (repeatable)", action="append")
    _opt(p, "--repeats", 3, PHYSICAL, "the report gives each ratio's median (min-max) over "
         "the repeats and the load at each", "times the whole measurement is run", type=int)
    common(p)
    p = new("syncscan-parallel")
    _opt(p, "--shrink", 4096, PHYSICAL, "the seed's 800 GiB table / 4,096 = 200 MiB",
         "the seed's table divided by this", type=int)
    _opt(p, "--chunk-divisor", 128, PHYSICAL, "the seed's chunks (65,536 and 8,192 blocks) "
         "/ 128 stay far above the read-ahead window", type=int)
    _opt(p, "--span-over-cache", None, PHYSICAL, "the seed gives no RAM: a sweep fixed "
         "before any run, 0.25, 0.5, 1, 2, 4 and 8 (a quarter to eight times)",
         "participants x large chunk / OS cache at a point of the sweep (repeatable; 1, "
         "where the capped chunks and block at a time run, is always added)",
         type=float, action="append")
    _opt(p, "--clients", 6, SEED, "pgbench -c 6 -j 6", type=int)
    _opt(p, "--queries", 2, PHYSICAL, "the seed ran about 29 per client (3 hours); two "
         "keep the sweep's default run near six minutes on a quiet machine, and the seed's "
         "difference shows from the second on", "per client, setting and point", type=int)
    _opt(p, "--workers", 1, PHYSICAL, "the seed planned 2 per query on 64 cores; here 2 "
         "cores", "per query", type=int)
    _opt(p, "--cpu-share", 6.0, PHYSICAL, "six scans share the device, each bound by it "
         "as the seed's were by its disks; the decoding rate is measured first in the same "
         "run, on the same table; the device is solid state with a 2019 NVMe datasheet's "
         "latency (52.6 us, slowed as much as the bandwidth from the seed's 2.7 GB/s) and "
         "queue depth (32), and 8 kB reads (PostgreSQL 14)",
         "device bandwidth = one process's decoding rate / this", type=float)
    _readahead_opt(p, "the OS cache sweep (large chunks on and off) runs under ondemand "
                      "when it is given (a 2020 Linux's), every setting at span / cache 1 "
                      "under each")
    _opt(p, "--repeats", 3, PHYSICAL, "the report gives each ratio's median (min-max) over "
         "the repeats and the load at each", "times the whole measurement is run", type=int)
    common(p)
    p = new("wal-checkpoints")
    _opt(p, "--scale", 1, PHYSICAL, "pgbench -s 1 (100,000 accounts): enough pages that "
         "the images fall off over several slices", type=int)
    _opt(p, "--accounts-per-scale", 100_000, SEED, "pgbench's 100,000 accounts per scale "
         "unit", type=int)
    _opt(p, "--slices", 12, PHYSICAL, "three checkpoint intervals of four slices",
         type=int)
    _opt(p, "--transactions", 200, PHYSICAL, "a slice of about a second or two here",
         "per slice", type=int)
    _opt(p, "--checkpoint-every", 4, PHYSICAL, "a CHECKPOINT every few seconds",
         "slices", type=int)
    _opt(p, "--shared-buffers", 2048, PHYSICAL, "16 MB: the tables stay in the pool, so "
         "only checkpoints write pages", "pages", type=int)
    p.add_argument("--pg-dsn", default=None,
                   help="a PostgreSQL 14+ server to run the same slices on (its pgbench "
                        "tables are re-initialised) [default: none: minidb only]")
    common(p)
    p = sub.add_parser("all", help="every experiment at its default scale")
    common(p)
    return ap


def _readahead_opt(p, where: str = "") -> None:
    from minidb.experiments.common import READAHEAD_POLICIES, READAHEAD_SOURCE
    _opt(p, "--readahead-policy", None, SWEPT, READAHEAD_SOURCE,
         "the kernel's read-ahead, io_readahead_policy (repeatable)"
         + (f"; {where}" if where else ""), shown=" and ".join(READAHEAD_POLICIES),
         action="append", choices=READAHEAD_POLICIES)


def _description(name: str) -> str:
    """The experiment's description: its module docstring's first paragraph, whole."""
    doc = importlib.import_module(EXPERIMENTS[name]).__doc__.strip()
    return " ".join(doc.split("\n\n")[0].split())


def _run_one(name: str, args, argv: list[str]):
    mod = importlib.import_module(EXPERIMENTS[name])
    cmd = "minidb experiment " + " ".join(shlex.quote(a) for a in argv)
    kw = {"workdir": args.workdir, "command": cmd}
    if name == "dead-tuples" and args.name == name:
        kw.update(scale=args.scale, clients=args.clients, transactions=args.transactions,
                  runs=args.runs, shared_buffers=args.shared_buffers, mode=args.mode,
                  configs=args.config, repeats=args.repeats)
    elif name == "syncscan-staggered" and args.name == name:
        kw.update(table_mb=args.table_mb, clients=args.clients, scans=args.scans,
                  stagger=args.stagger, cache_ratio=args.cache_ratio, disk=args.disk,
                  repeats=args.repeats)
    elif name == "parallel-readahead" and args.name == name:
        kw.update(table_mb=args.table_mb, workers=args.workers, disk=args.disk,
                  policies=args.policy, repeats=args.repeats,
                  readahead_policies=args.readahead_policy)
    elif name == "syncscan-parallel" and args.name == name:
        kw.update(shrink=args.shrink, clients=args.clients, queries=args.queries,
                  nworkers=args.workers, cpu_share=args.cpu_share,
                  chunk_divisor=args.chunk_divisor, sweep=args.span_over_cache,
                  repeats=args.repeats, readahead_policies=args.readahead_policy)
    elif name == "wal-checkpoints" and args.name == name:
        kw.update(scale=args.scale, accounts_per_scale=args.accounts_per_scale,
                  slices=args.slices, transactions=args.transactions,
                  checkpoint_every=args.checkpoint_every,
                  shared_buffers=args.shared_buffers, pg_dsn=args.pg_dsn)
    elif args.name == "all":
        kw["command"] = f"minidb experiment {name}"
    rep = mod.run(**kw)
    path = rep.write(args.out, png=not args.no_plot)
    print(rep.terminal_summary())
    print(f"full report: {path}" + (f" and {rep.png}" if rep.png else ""))
    return rep


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.name == "list":
        for name in EXPERIMENTS:
            print(name)
            print(textwrap.fill(_description(name), width=88, initial_indent="    ",
                                subsequent_indent="    "))
        return 0
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    t0 = time.perf_counter()
    for name in names:
        _run_one(name, args, argv)
    if len(names) > 1:
        print(f"all experiments: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
