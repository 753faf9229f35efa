"""bench/wal_bench.py's minidb side at a tiny size (no PostgreSQL): every setting runs,
its WAL counters are read, and the checkpoint spike shows more full-page images in the
run right after a CHECKPOINT.  Counters only; the timings are not asserted."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench import wal_bench  # noqa: E402


def test_minidb_side_counts_wal_per_setting(tmp_path):
    md = wal_bench.Minidb(str(tmp_path / "data"), 1, 300, 1)
    runs = {c: [md.run(c, 1, 4)] for c in wal_bench.CONFIGS}
    for config, (r,) in runs.items():
        assert r.n == 4
        # TPC-B-like: three UPDATEs, an INSERT and a COMMIT at least
        assert r.per_xact("wal_records") >= 5, config
        assert r.wal["wal_bytes"] > 0
    lines = wal_bench.report("minidb, 1 client(s):", runs)
    assert [ln.split()[0] for ln in lines[2:]] == ["fsync", "sync_commit", "fsync"]
    first, second = md.spike(6)
    # right after the checkpoint every page is touched for the first time: images
    assert first.wal["wal_fpi"] > second.wal["wal_fpi"]
