"""Snapshot reuse and the GlobalVis-style horizon of ``minidb.txn.procarray``.

What is proven here:
  * a snapshot is reused (``snapshots_reused``) while no transaction with an xid has ended
    since the slot's last one, also across the slot getting an xid of its own, and is
    computed afresh (``snapshots_taken``) after a commit or an abort of such a transaction;
    a read-only transaction's end does not count;
  * hypothesis: over random begins, writes, commits, aborts and snapshots of four
    backends, every snapshot ``get_snapshot`` returns (reused or not) equals the one a
    scan of the proc array computes at the same moment, and the published ``proc_xmin``
    is the same;
  * ``vis_horizon(xid)`` answers "is xid removable" exactly as ``global_xmin()`` does, and
    never returns a value newer than it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from minidb.instance import Instance
from minidb.shmem import CTL_LATEST_COMPLETED


@pytest.fixture(scope="module")
def inst(tmp_path_factory):
    i = Instance(tmp_path_factory.mktemp("snapreuse") / "data", shared_buffers=32)
    try:
        yield i
    finally:
        i.close()


def _fresh(pa, slot: int, myxid: int):
    """The snapshot the proc array scan gives now (the rule of the module docstring)."""
    seg = pa.seg
    xmax = int(seg.control[CTL_LATEST_COMPLETED]) + 1
    xids = seg.proc_xid[seg.proc_xid != 0]
    running = xids[xids < xmax]
    xmin = int(running.min()) if running.size else xmax
    if myxid:
        xmin = min(xmin, myxid)
    return xmin, xmax, sorted(int(x) for x in running if x != myxid)


def _same(snap, fresh) -> bool:
    return (snap.xmin, snap.xmax, snap.xip.tolist()) == (fresh[0], fresh[1], fresh[2]) \
        and sorted(snap._xip_set) == fresh[2]


def test_reused_until_a_transaction_with_an_xid_ends(inst):
    pa = inst.procarray
    a, b = inst.connect(), inst.connect()
    try:
        a.xact.begin()
        a.xact.start_statement()
        taken, reused = pa.snapshots_taken, pa.snapshots_reused
        a.xact.start_statement()
        a.xact.xid_for_write()            # an xid of its own: still the same snapshot
        s = a.xact.start_statement()
        assert (pa.snapshots_taken, pa.snapshots_reused) == (taken, reused + 2)
        assert s.myxid == a.xact.xid
        b.xact.begin()                    # a read-only transaction ends: nothing moves
        b.xact.start_statement()
        b.xact.commit()
        taken, reused = pa.snapshots_taken, pa.snapshots_reused
        a.xact.start_statement()
        assert (pa.snapshots_taken, pa.snapshots_reused) == (taken, reused + 1)
        b.xact.begin()                    # a writer commits: the next one is computed
        bxid = b.xact.xid_for_write()
        b.xact.commit()
        s = a.xact.start_statement()
        assert pa.snapshots_taken == taken + 1
        assert not s.xid_running(bxid) and s.xmax == bxid + 1
        b.xact.begin()                    # and after an abort too
        b.xact.xid_for_write()
        b.xact.rollback()
        a.xact.start_statement()
        assert pa.snapshots_taken == taken + 2
        a.xact.commit()
    finally:
        a.close()
        b.close()


_op = st.tuples(st.sampled_from(["begin", "write", "commit", "abort", "snapshot"]),
                st.integers(0, 3))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_op, min_size=5, max_size=40))
def test_reused_snapshot_equals_a_fresh_one(inst, ops):
    pa = inst.procarray
    bs = [inst.connect() for _ in range(4)]
    try:
        for what, i in ops:
            x = bs[i].xact
            if what == "begin" and x.state == "idle":
                x.begin()
            elif what == "write" and x.state != "idle":
                x.xid_for_write()
            elif what in ("commit", "abort") and x.state != "idle":
                x.commit() if what == "commit" else x.rollback()
            elif what == "snapshot":
                fresh = _fresh(pa, bs[i].slot, x.xid)
                had_xmin = int(pa.seg.proc_xmin[bs[i].slot])
                s = x.start_statement()
                assert _same(s, fresh), (s, fresh)
                assert int(pa.seg.proc_xmin[bs[i].slot]) == (had_xmin or s.xmin)
                h = pa.global_xmin()
                for xid in {s.xmin, s.xmax, s.xmin - 1, s.xmax - 1, h - 1, h}:
                    v = pa.vis_horizon(xid, bs[i].slot)
                    assert v <= pa.global_xmin()
                    assert (xid < v) == (xid < pa.global_xmin())
    finally:
        for b in bs:
            if b.xact.state != "idle":
                b.xact.rollback()
            b.close()
    assert np.all(pa.seg.proc_xid == 0)
