"""One benchmark script at two commits, alternately: did a change move a speed?

Setup: a temporary ``git worktree`` of each commit (``--base``, default ``HEAD~1``, and
``--head``, default the working tree itself), each run with its own copy of the script and
its own ``minidb`` first on ``PYTHONPATH``, so each side runs exactly the code of its commit.
Run: ``--rounds`` rounds (default 3), base then head in each, so that a change of the
machine's load hits both sides; the load average is printed before every run.
The figure: every table row of the script's output whose first cell names a workload and
whose cells hold numbers is collected per side; for each such number the median and the
spread (min-max) over the rounds are printed side by side, with head / base of the
medians.  The script's own checks still run on both sides (a wrong answer fails there).

    python bench/compare_commits.py --base 8d5cfcb --head 216c169 -- \\
        bench/oltp_bench.py --ops 3000 --repeat 3

``--script-from-head`` runs the head's copy of the script on both sides (each still with
its own ``minidb`` on ``PYTHONPATH``; the script must not put its own tree first on
``sys.path`` when ``PYTHONPATH`` is set, as ``bench/oltp_bench.py`` does not): for a
script whose figures or options changed in the head.

Numbers move with the load on a shared machine: read a ratio far from 1 as a change only
when the spreads do not overlap.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM = re.compile(r"^-?[\d,]+(\.\d+)?$")


def worktree(commit: str | None, top: str, name: str) -> str:
    if commit is None:
        return ROOT
    path = os.path.join(top, name)
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", path, commit],
                   check=True)
    return path


def run_once(tree: str, script: list[str]) -> dict[tuple[str, int], float]:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, *script], cwd=tree, env=env, text=True,
                         capture_output=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(script)} failed in {tree}:\n{out.stdout}\n{out.stderr}")
    figures = {}
    lines = out.stdout.splitlines()
    header: list[str] = []
    for n, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if n + 1 < len(lines) and lines[n + 1].lstrip().startswith("| ---"):
            header = cells        # a markdown table's header: names its columns
            continue
        if len(cells) < 2 or not cells[0] or NUM.match(cells[0]) or cells[0].startswith("-"):
            continue
        for i, c in enumerate(cells[1:], 1):
            if NUM.match(c):
                col = header[i] if i < len(header) else str(i)
                figures[(cells[0], col)] = float(c.replace(",", ""))
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD~1")
    ap.add_argument("--head", default=None, help="a commit (default: the working tree)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--script-from-head", action="store_true",
                    help="run the head's copy of the script on both sides (a script changed "
                         "with the code it measures; it must import minidb from PYTHONPATH)")
    ap.add_argument("script", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    script = [a for a in args.script if a != "--"]
    if not script:
        ap.error("name the benchmark script after --")
    top = tempfile.mkdtemp(prefix="minidb-commits-")
    trees = {}
    try:
        trees["base"] = worktree(args.base, top, "base")
        trees["head"] = worktree(args.head, top, "head")
        got: dict[str, list[dict]] = {"base": [], "head": []}
        for r in range(args.rounds):
            for side in ("base", "head"):
                print(f"round {r + 1} {side}: load {os.getloadavg()[0]:.2f}", flush=True)
                cmd = script
                if args.script_from_head:
                    cmd = [os.path.join(trees["head"], script[0]), *script[1:]]
                got[side].append(run_once(trees[side], cmd))
        keys = [k for k in got["base"][0] if all(k in g for s in got.values() for g in s)]
        print(f"\n| figure (row: column) | base {args.base} median (min-max) "
              f"| head {args.head or 'working tree'} median (min-max) | head / base |")
        print("| --- | ---: | ---: | ---: |")
        for k in keys:
            cols = []
            for side in ("base", "head"):
                v = [g[k] for g in got[side]]
                cols.append((statistics.median(v), min(v), max(v)))
            ratio = cols[1][0] / cols[0][0] if cols[0][0] else float("nan")
            print(f"| {k[0]}: {k[1]} | {cols[0][0]:,.4g} ({cols[0][1]:,.4g}-{cols[0][2]:,.4g}) "
                  f"| {cols[1][0]:,.4g} ({cols[1][1]:,.4g}-{cols[1][2]:,.4g}) | {ratio:.2f} |")
    finally:
        for side in ("base", "head"):
            if side in trees and trees[side] != ROOT:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force",
                                trees[side]], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
