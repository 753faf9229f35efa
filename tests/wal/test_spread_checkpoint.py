"""Spread checkpoints (checkpoint_completion_target): the checkpointer's timed and
WAL-triggered checkpoints pace their buffer writes; CHECKPOINT and shutdown do not, and a
CHECKPOINT requested while a paced one runs makes it finish at full speed.  Asserted on
the checkpoint's counters (delays, immediate_requested), never on time."""

from __future__ import annotations

import threading
import time

from minidb.catalog import ColumnDef
from minidb.instance import Instance
from minidb.recovery import checkpoint
from minidb.session import Session


def _dirty(inst, n: int = 40) -> None:
    s = Session(inst)
    s.insert_many("t", [(i, "x" * 300) for i in range(n * 20)])
    s.commit()
    s.close()


def _instance(tmp_path, **kw):
    inst = Instance(tmp_path / "data", max_worker_processes=0, shared_buffers=256, **kw)
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "text")])
    return inst


def test_a_paced_checkpoint_waits_between_writes(tmp_path):
    inst = _instance(tmp_path, checkpoint_timeout=1, checkpoint_completion_target=0.3)
    try:
        _dirty(inst)
        res = checkpoint(inst, paced=True)
        assert res["paced"] and res["buffers_written"] > 20
        assert res["delays"] > 0 and res["delay_s"] > 0
        assert not res["immediate_requested"]
    finally:
        inst.close()


def test_checkpoint_command_and_completion_target_zero_do_not_wait(tmp_path):
    inst = _instance(tmp_path, checkpoint_timeout=1, checkpoint_completion_target=0.3)
    try:
        _dirty(inst)
        inst.checkpoint()                      # CHECKPOINT: immediate
        assert inst.last_checkpoint["buffers_written"] > 20
        assert not inst.last_checkpoint["paced"] and inst.last_checkpoint["delays"] == 0
    finally:
        inst.close()
    inst = _instance(tmp_path / "b", checkpoint_timeout=1, checkpoint_completion_target=0.0)
    try:
        _dirty(inst)
        res = checkpoint(inst, paced=True)
        assert res["buffers_written"] > 20 and res["delays"] == 0
    finally:
        inst.close()


def test_a_checkpoint_request_ends_the_pacing(tmp_path):
    """A paced checkpoint that would take most of a minute; CHECKPOINT arrives: the
    running one stops waiting, finishes, and the requested one runs after it."""
    inst = _instance(tmp_path, checkpoint_timeout=60, checkpoint_completion_target=0.9)
    try:
        _dirty(inst)
        out = {}
        t = threading.Thread(target=lambda: out.update(checkpoint(inst, paced=True)))
        done_before = inst.checkpoints_done
        t.start()
        deadline = time.monotonic() + 20
        while not inst._ckpt_lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)                   # the paced one is running...
        time.sleep(0.3)                        # ...and waiting between writes
        inst.checkpoint()
        t.join(30)
        assert not t.is_alive()
        assert out["paced"] and out["immediate_requested"]
        assert inst.checkpoints_done == done_before + 2
        assert not inst.last_checkpoint["paced"]
    finally:
        inst.close()
