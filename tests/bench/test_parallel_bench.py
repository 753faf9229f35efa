"""bench/parallel_bench.py runs and checks its answers (a smoke test at a tiny size: no figure
is asserted, only that every plan did the same work - the bench's own checks: every run
counts all rows, reads no page, and its participants' pages add up to the table)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench import parallel_bench  # noqa: E402


def test_parallel_bench_alternates_every_plan_and_reports_every_process(capsys):
    runs = parallel_bench.cpu_part(30_000, 3, None)
    assert list(runs) == ["serial plan (seq_scan)", "leader + 0 workers", "leader + 1 worker",
                          "leader + 2 workers"]
    assert all(len(samples) == 3 for samples in runs.values())
    for name, nworkers in (("leader + 0 workers", 0), ("leader + 1 worker", 1),
                           ("leader + 2 workers", 2)):
        for s in runs[name]:
            assert len(s.worker_cpu) == nworkers and len(s.pages) == nworkers + 1
            assert s.leader_cpu > 0 and all(c > 0 for c in s.worker_cpu)
    pages = {sum(s.pages) for name in list(runs)[1:] for s in runs[name]}
    assert len(pages) == 1  # every parallel run scanned the whole table once
    out = capsys.readouterr().out
    assert "ratio (leader + 1 worker) / serial plan" in out
