"""``minidb experiment wal-checkpoints`` at a tiny size: the sawtooth from the WAL counters
(more full-page images per transaction in the slice right after a CHECKPOINT than in the
last slice before the next one, with full_page_writes on; none with it off apart from new
pages), the report and the command line.  PostgreSQL is never needed."""

from __future__ import annotations

import os

import pytest

from minidb.experiments import EXPERIMENTS, wal_checkpoints
from minidb.experiments.__main__ import main as cli_main

pytestmark = pytest.mark.slow


def test_the_sawtooth_from_counters(tmp_path):
    rep = wal_checkpoints.run(scale=1, accounts_per_scale=2000, slices=6, transactions=40,
                              checkpoint_every=3, shared_buffers=512, workdir=str(tmp_path))
    on = rep.data["series"]["minidb fpw=on"]
    off = rep.data["series"]["minidb fpw=off"]
    assert [s["after_checkpoint"] for s in on] == [True, False, False, True, False, False]
    for i in (0, 3):                          # right after each CHECKPOINT ...
        assert on[i]["fpi"] > on[i + 2]["fpi"]    # ... more images than two slices later
        assert on[i]["bytes"] > on[i + 2]["bytes"]
    first, last = rep.data["sawtooth"]["on"]
    assert first > last
    # without full_page_writes the teeth are (nearly) gone and the WAL is smaller
    assert sum(s["fpi"] for s in off) < sum(s["fpi"] for s in on) / 2
    assert sum(s["bytes"] for s in off) < sum(s["bytes"] for s in on)
    assert "no --pg-dsn" in rep.data["postgres"]
    md = rep.write(str(tmp_path / "out"), png=False)
    text = open(md).read()
    assert text.startswith("# WAL per transaction across checkpoints")
    assert "images/tx" in text


def test_registered_and_runs_from_the_command_line(tmp_path, capsys):
    assert EXPERIMENTS["wal-checkpoints"] == "minidb.experiments.wal_checkpoints"
    code = cli_main(["wal-checkpoints", "--slices", "2", "--transactions", "5",
                     "--checkpoint-every", "1", "--shared-buffers", "256",
                     "--accounts-per-scale", "1000",
                     "--out", str(tmp_path / "out"), "--workdir", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "WAL per transaction across checkpoints" in out
    assert os.path.exists(tmp_path / "out" / "wal-checkpoints.md")
