"""The heavyweight lock manager (``minidb.txn.lmgr``) and the one deadlock detector.

* the conflict table is PostgreSQL's, checked exhaustively (64 pairs) through real
  acquisitions by two backends, NOWAIT telling which pairs conflict;
* a backend never conflicts with itself; re-acquiring is a LOCALLOCK hit; everything goes
  at transaction end and the shared table is empty again;
* the fast path: weak locks stay out of the shared table until a strong locker moves them;
* waits sleep and are woken by the release (in a forked process too), lock_timeout and
  NOWAIT give 55P03 with PostgreSQL's texts, and the queue is fair (no jumping past a
  conflicting waiter) while a holder's upgrade goes ahead;
* deadlocks: an upgrade deadlock (two AccessShare holders both asking AccessExclusive) and
  a cycle through a relation lock and a row lock both give 40P01 naming both processes;
* a SIGKILLed child holding AccessExclusive: the reaper releases it, the waiter goes on.

Waits are detected from shared memory (``proc_wait_lock``), never from time.
"""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest

from minidb.errors import DeadlockDetected, LockNotAvailable
from minidb.instance import Instance
from minidb.session import Session
from minidb.txn import lmgr as L
from tests.txn.txn_steps import WAIT_LIMIT_S, Step, add, key, poll

AS, RS, RE, SUE, S, SRE, E, AE = range(1, 9)

# PostgreSQL's documented matrix ("Conflicting Lock Modes"), row = requested, X = conflict
PG_MATRIX = """
AS  . . . . . . . X
RS  . . . . . . X X
RE  . . . . X X X X
SUE . . . X X X X X
S   . . X X . X X X
SRE . . X X X X X X
E   . X X X X X X X
AE  X X X X X X X X
"""


@pytest.fixture
def inst(tmp_path):
    inst = Instance(tmp_path / "data", shared_buffers=64, max_worker_processes=0)
    try:
        yield inst
        assert_lock_table_empty(inst)
    finally:
        inst.close()


def assert_lock_table_empty(inst):
    seg = inst.seg
    assert not (seg.lock_tag[:, 0] != 0).any(), "lock entries left"
    assert not seg.lock_hold.any()
    assert not seg.fp_bits.any()
    assert not seg.fp_strong.any()
    assert (seg.proc_wait_lock == -1).all()
    assert (seg.lock_index == -1).all()


def begun(inst, **settings):
    b = inst.connect(**settings)
    b.xact.begin()
    return b


def waiting(inst, b) -> bool:
    return int(inst.seg.proc_wait_lock[b.slot]) >= 0


def test_conflict_table_is_postgresqls(inst):
    rows = [ln.split()[1:] for ln in PG_MATRIX.strip().splitlines()]
    a, b = begun(inst), begun(inst)
    tag = L.relation_tag(4242)
    for req in range(1, 9):
        for held in range(1, 9):
            a.lockmgr.acquire(tag, held)
            try:
                b.lockmgr.acquire(tag, req, nowait=True)
                got = "."
            except LockNotAvailable as e:
                assert e.sqlstate == "55P03"
                got = "X"
            assert got == rows[req - 1][held - 1], (L.MODE_NAMES[req], L.MODE_NAMES[held])
            assert bool(L.CONFLICTS[req] >> held & 1) == (got == "X")
            assert bool(L.CONFLICTS[held] >> req & 1) == (got == "X")  # symmetric
            a.xact.commit(), b.xact.commit()
            a.xact.begin(), b.xact.begin()
    a.close(), b.close()


def test_own_locks_never_conflict_and_go_at_commit(inst):
    a = begun(inst)
    tag = L.relation_tag(7)
    a.lockmgr.acquire(tag, AE)
    for m in range(1, 9):
        a.lockmgr.acquire(tag, m)             # self never conflicts
    before = a.lockmgr.stats["shared"]
    a.lockmgr.acquire(tag, AS)               # LOCALLOCK hit: no shared access
    assert a.lockmgr.stats["shared"] == before
    assert len(a.lockmgr.local) == 8
    a.xact.commit()
    assert a.lockmgr.local == {}
    a.close()


def test_fast_path_and_transfer(inst):
    a, b = begun(inst), begun(inst, lock_timeout=50)
    tag = L.relation_tag(11)
    a.lockmgr.lock_relations([(tag, AS), (tag, RE)])
    assert not (inst.seg.lock_tag[:, 0] != 0).any()       # only in a's fast-path row
    assert inst.seg.fp_bits[a.slot].any()
    with pytest.raises(LockNotAvailable) as ei:
        b.lockmgr.acquire(tag, S, nowait=True)             # the transfer makes it visible
    assert str(ei.value) == "could not obtain lock on relation 11"
    rows = L.SharedLockTable(inst.seg, inst.locks).snapshot()
    assert sorted((m, g, s, fp) for _t, m, g, s, fp in rows) == \
        [(AS, True, a.slot, False), (RE, True, a.slot, False)]
    a.xact.commit()                                       # released from the shared table
    b.lockmgr.acquire(tag, S, nowait=True)
    b.xact.commit()
    a.close(), b.close()


def test_wait_and_wakeup_lock_timeout(inst):
    a, b = begun(inst), begun(inst)
    tag = L.relation_tag(12)
    a.lockmgr.acquire(tag, AS)
    st = Step(lambda: b.lockmgr.acquire(tag, AE))
    poll(lambda: waiting(inst, b), "b waits", st)
    assert inst.seg.proc_wait_mode[b.slot] == AE
    a.xact.commit()
    st.join()
    assert b.lockmgr.holds(tag, AE)
    b.xact.commit()
    # lock_timeout: PostgreSQL's text, nothing left in the queue
    a.xact.begin(), b.xact.begin()
    a.lockmgr.acquire(tag, AE)
    b.settings.set("lock_timeout", 30)
    with pytest.raises(LockNotAvailable) as ei:
        b.lockmgr.acquire(tag, AS)
    assert (ei.value.sqlstate, str(ei.value)) == ("55P03",
                                                  "canceling statement due to lock timeout")
    assert not waiting(inst, b)
    a.xact.commit(), b.xact.rollback()
    a.close(), b.close()


def test_a_statement_takes_its_locks_in_order_when_one_must_wait(inst):
    """A statement's locks (``lock_prepared``: the table, then its index) are taken in
    order: when the table's lock must wait behind a strong holder, the index's weak lock is
    not taken ahead of it through the fast path.  Otherwise the waiter would sit holding
    the index while the holder, wanting the index too (TRUNCATE locks both), waits for it:
    a deadlock PostgreSQL never has (a full run of the TRUNCATE + INSERT vs UPDATE + count
    reproduction met it)."""
    a, b, c = begun(inst), begun(inst), begun(inst)
    table, index = L.relation_tag(16384), L.relation_tag(16385)
    a.lockmgr.acquire(table, AE)
    reqs = L.prepare_requests([(table, AS), (index, AS)])
    st = Step(lambda: b.lockmgr.lock_prepared(reqs))
    poll(lambda: waiting(inst, b), "b waits for the table", st)
    c.lockmgr.acquire(index, AE, nowait=True)   # b holds nothing on the index yet
    c.xact.commit()
    a.lockmgr.acquire(index, AE, nowait=True)   # nor does it block the holder
    a.xact.commit()
    st.join()
    assert b.lockmgr.holds(table, AS) and b.lockmgr.holds(index, AS)
    b.xact.commit()
    a.close(), b.close(), c.close()


def test_queue_is_fair_and_upgrade_goes_ahead(inst):
    a, b, c = begun(inst), begun(inst), begun(inst)
    tag = L.relation_tag(13)
    a.lockmgr.acquire(tag, AS)
    sb = Step(lambda: b.lockmgr.acquire(tag, AE))
    poll(lambda: waiting(inst, b), "b waits for AE", sb)
    # c's AccessShare does not conflict with a, but does with b waiting ahead: it queues
    sc = Step(lambda: c.lockmgr.acquire(tag, AS))
    poll(lambda: waiting(inst, c), "c waits behind b", sc)
    # a (a holder) upgrades to ShareLock: b waits for what a holds, so a goes ahead of b
    # and is granted at once (it conflicts with nobody holding, nobody ahead)
    a.lockmgr.acquire(tag, S)
    assert a.lockmgr.holds(tag, S)
    a.xact.commit()
    sb.join()                                  # b first ...
    assert waiting(inst, c)
    b.xact.commit()
    sc.join()                                  # ... then c
    c.xact.commit()
    for x in (a, b, c):
        x.close()


def test_upgrade_deadlock(inst):
    a = begun(inst, deadlock_timeout=20)
    b = begun(inst, deadlock_timeout=20)
    tag = L.relation_tag(14)
    a.lockmgr.acquire(tag, AS)
    b.lockmgr.acquire(tag, AS)
    sa = Step(lambda: a.lockmgr.acquire(tag, AE))
    poll(lambda: waiting(inst, a), "a waits", sa)
    sb = Step(lambda: b.lockmgr.acquire(tag, AE))
    poll(lambda: sa.done or sb.done, "a victim")
    victim, vb, other, ob = (sa, a, sb, b) if sa.done else (sb, b, sa, a)
    with pytest.raises(DeadlockDetected) as ei:
        victim.join()
    e = ei.value
    assert e.sqlstate == "40P01" and str(e).startswith("deadlock detected\nDETAIL:  ")
    pid = os.getpid()
    assert f"Process {pid} waits for AccessExclusiveLock on relation 14 of database 1; " \
           f"blocked by process {pid}." in e.detail
    assert len(e.detail.splitlines()) == 2
    vb.xact.rollback()                         # its AccessShare goes: the other proceeds
    other.join()
    ob.xact.commit()
    a.close(), b.close()


def test_deadlock_between_relation_lock_and_row_lock(inst):
    inst.catalog.refresh()
    from tests.conftest import create_table
    create_table(inst, "t", [("k", "bigint"), ("v", "bigint")])
    oid = inst.catalog.table("t").oid
    s0 = Session(inst)
    s0.insert_many("t", [(1, 10), (2, 20)])
    a = Session(inst, deadlock_timeout=20)
    b = Session(inst, deadlock_timeout=20)
    a.begin(), b.begin()
    assert a.update("t", key(1), add(1)) == 1            # a holds row 1 (its xid)
    b.backend.lockmgr.acquire(L.relation_tag(oid), AE)  # b holds the table exclusively
    sa = Step(lambda: a.backend.lockmgr.acquire(L.relation_tag(oid), AS))
    poll(lambda: waiting(inst, a.backend), "a waits for the relation", sa)
    sb = Step(lambda: b.update("t", key(1), add(1)))    # b waits for a's transaction
    poll(lambda: sa.done or sb.done, "a victim")
    victim, vs, other, os_ = (sa, a, sb, b) if sa.done else (sb, b, sa, a)
    with pytest.raises(DeadlockDetected) as ei:
        victim.join()
    d = ei.value.detail
    assert "ShareLock on transaction" in d and "AccessShareLock on relation" in d
    vs.rollback()
    other.join()
    os_.commit()
    for s in (s0, a, b):
        s.close()


def _hold_ae_then_hang(inst, tag, conn):
    b = inst.connect()
    b.xact.begin()
    b.lockmgr.acquire(tag, AE)
    conn.send(b.slot)
    conn.recv()


def test_crashed_clients_locks_are_released(inst):
    tag = L.relation_tag(15)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_hold_ae_then_hang, args=(inst, tag, child), daemon=True)
    proc.start()
    assert parent.poll(WAIT_LIMIT_S)
    slot = parent.recv()
    a = begun(inst)
    st = Step(lambda: a.lockmgr.acquire(tag, AS))
    poll(lambda: waiting(inst, a), "a waits for the child's lock", st)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(WAIT_LIMIT_S)
    st.join()                                   # the reaper released it and woke a
    assert any(s == slot for s, _pid, _xid in inst.reaped)
    assert a.lockmgr.holds(tag, AS)
    a.xact.commit()
    a.close()


def _wait_in_child(inst, tag, conn):
    b = inst.connect()
    b.xact.begin()
    conn.send(b.slot)
    b.lockmgr.acquire(tag, RE)                  # waits for the parent's Share lock
    conn.send("granted")
    conn.recv()
    b.xact.commit()
    b.close()
    conn.send("done")


def test_wait_across_processes(inst):
    tag = L.relation_tag(16)
    a = begun(inst)
    a.lockmgr.acquire(tag, S)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_wait_in_child, args=(inst, tag, child), daemon=True)
    proc.start()
    assert parent.poll(WAIT_LIMIT_S)
    slot = parent.recv()
    poll(lambda: int(inst.seg.proc_wait_lock[slot]) >= 0, "the child waits")
    assert not parent.poll(0)
    a.xact.commit()
    assert parent.poll(WAIT_LIMIT_S) and parent.recv() == "granted"
    parent.send("go")
    assert parent.poll(WAIT_LIMIT_S) and parent.recv() == "done"
    proc.join(WAIT_LIMIT_S)
    a.close()


def test_out_of_shared_memory_is_53200(tmp_path):
    inst = Instance(tmp_path / "d", shared_buffers=64, max_worker_processes=0,
                    max_connections=2, max_locks_per_transaction=10)
    try:
        a = begun(inst)
        lp = L.SharedLockTable(inst.seg, inst.locks).lp
        with pytest.raises(Exception) as ei:
            for i in range(16 * lp + 1):
                a.lockmgr.acquire(L.object_tag(1, i), AE)
        assert ei.value.sqlstate == "53200"
        a.xact.rollback()
        assert_lock_table_empty(inst)
        a.close()
    finally:
        inst.close()
