"""``minidb experiment NAME [options]``: run one seed experiment (or ``all``),
write ``<out>/<name>.md`` and ``<out>/<name>.png``, print the markdown.

    minidb experiment list
    minidb experiment dead-tuples [--scale 4] [--runs 3] [--transactions N]
    minidb experiment syncscan-staggered [--table-mb 128] [--disk seed|hdd|ssd]
    minidb experiment parallel-readahead [--table-mb 512] [--workers 7] [--disk auto]
    minidb experiment syncscan-parallel [--shrink 4096] [--queries 3]
    minidb experiment all [--out DIR]

Common options: ``--out DIR`` (default ``./minidb-results``), ``--no-plot``, ``--workdir DIR``
(where the temporary data directories go; default the system's temporary directory).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
import time

from minidb.experiments import EXPERIMENTS, dead_tuples
from minidb.experiments.common import OUT_DIR


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="minidb experiment",
                                 description="Rerun the four seed experiments on minidb.")
    sub = ap.add_subparsers(dest="name", required=True)

    def common(p):
        p.add_argument("--out", default=OUT_DIR, help="output directory (default ./minidb-results)")
        p.add_argument("--no-plot", action="store_true", help="skip the PNG")
        p.add_argument("--workdir", default=None, help="where temporary data directories go")

    sub.add_parser("list", help="list the experiments")
    p = sub.add_parser("dead-tuples", help="seed 003: repeated pgbench runs without VACUUM")
    p.add_argument("--scale", type=int, default=4, help="pgbench scale (seed: 10)")
    p.add_argument("--clients", type=int, default=5)
    p.add_argument("--transactions", type=int, default=None,
                   help="per client and run (default: 500 x scale / clients, the seed's "
                        "versions per branch row)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--shared-buffers", type=int, default=None,
                   help="default 1024 x scale / 10, the seed's -B 1024 at scale 10")
    p.add_argument("--mode", default="prepared", choices=("simple", "extended", "prepared"))
    p.add_argument("--config", action="append", default=None,
                   choices=[label for label, _ in dead_tuples.CONFIGS],
                   help="only this configuration (repeatable; run in the order given)")
    common(p)
    p = sub.add_parser("syncscan-staggered", help="seed 001: four staggered count(*) clients")
    p.add_argument("--table-mb", type=int, default=128)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--scans", type=int, default=2)
    p.add_argument("--stagger", type=float, default=0.18,
                   help="fraction of a single scan's time between client starts")
    p.add_argument("--cache-ratio", type=float, default=11.0, help="table / OS cache")
    p.add_argument("--disk", default="seed", choices=("seed", "hdd", "ssd"))
    common(p)
    p = sub.add_parser("parallel-readahead", help="seed 002: block vs chunked allocation")
    p.add_argument("--table-mb", type=int, default=512)
    p.add_argument("--workers", type=int, default=7)
    p.add_argument("--disk", default="auto", choices=("auto", "ssd", "hdd"))
    p.add_argument("--policy", action="append", default=None,
                   help="block, 64, 1024, 8192, 16384 (repeatable; default all)")
    common(p)
    p = sub.add_parser("syncscan-parallel", help="seed 000: six clients' parallel counts")
    p.add_argument("--shrink", type=int, default=4096,
                   help="the seed's 800 GiB table divided by this")
    p.add_argument("--chunk-divisor", type=int, default=128,
                   help="the seed's chunks (65,536 and 8,192 blocks) divided by this")
    p.add_argument("--cache-ratio", type=float, default=16.0, help="table / OS cache")
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--queries", type=int, default=3, help="per client and setting")
    p.add_argument("--workers", type=int, default=1, help="per query")
    p.add_argument("--cpu-share", type=float, default=6.0,
                   help="device bandwidth = one process's decoding rate / this")
    common(p)
    p = sub.add_parser("all", help="every experiment at its default scale")
    common(p)
    return ap


def _run_one(name: str, args, argv: list[str]):
    mod = importlib.import_module(EXPERIMENTS[name])
    cmd = "minidb experiment " + " ".join(shlex.quote(a) for a in argv)
    kw = {"workdir": args.workdir, "command": cmd}
    if name == "dead-tuples" and args.name == name:
        kw.update(scale=args.scale, clients=args.clients, transactions=args.transactions,
                  runs=args.runs, shared_buffers=args.shared_buffers, mode=args.mode,
                  configs=args.config)
    elif name == "syncscan-staggered" and args.name == name:
        kw.update(table_mb=args.table_mb, clients=args.clients, scans=args.scans,
                  stagger=args.stagger, cache_ratio=args.cache_ratio, disk=args.disk)
    elif name == "parallel-readahead" and args.name == name:
        kw.update(table_mb=args.table_mb, workers=args.workers, disk=args.disk,
                  policies=args.policy)
    elif name == "syncscan-parallel" and args.name == name:
        kw.update(shrink=args.shrink, clients=args.clients, queries=args.queries,
                  nworkers=args.workers, cpu_share=args.cpu_share,
                  chunk_divisor=args.chunk_divisor, cache_ratio=args.cache_ratio)
    elif args.name == "all":
        kw["command"] = f"minidb experiment {name}"
    rep = mod.run(**kw)
    path = rep.write(args.out, png=not args.no_plot)
    print(rep.markdown())
    print(f"wrote {path}" + (f" and {rep.png}" if rep.png else ""), file=sys.stderr)
    return rep


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.name == "list":
        for name, mod in EXPERIMENTS.items():
            doc = importlib.import_module(mod).__doc__.strip().splitlines()[0]
            print(f"{name:20s} {doc}")
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
