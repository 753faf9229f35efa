"""bench/load_bench.py at a tiny size without PostgreSQL: every method loads every row into
both tables, sqlite3 runs beside it, and the report has a line per configuration.
Row counts only; the timings are not asserted."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench import load_bench  # noqa: E402


def test_every_method_loads_every_row(tmp_path):
    results = load_bench.measure(300, 1, 100, None, str(tmp_path), out=lambda *_: None)
    assert {(s, m, t) for s, m, t in results} == (
        {("minidb", m, t) for m in load_bench.METHODS for t in load_bench.TABLES}
        | {("sqlite3", "executemany", t) for t in load_bench.TABLES})
    for series in results.values():
        assert [s.rows for s in series.samples] == [300]
    lines = []
    load_bench.report(results, 300, out=lines.append)
    assert len(lines) == 2 + len(results) + 1
