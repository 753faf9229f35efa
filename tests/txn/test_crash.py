"""Clients killed with SIGKILL: the instance cleans up after them, as the postmaster does.

A child process forked from the open instance writes in a transaction (inserts, updates,
deletes, and it holds a row another session then waits for), tells the test where it
stands over a pipe, and blocks reading the pipe; the test kills it with SIGKILL.  Then:

* the instance reaps it (``Instance.reap_dead_backends``: the reaper thread every
  ``REAPER_INTERVAL_S``, and the wait loop of any backend waiting for it): its xid is
  ABORTED in the commit log, its proc slot is free, ``instance.reaped`` records
  (slot, pid, xid);
* the session waiting for its row goes on, and its update applies to the committed
  version;
* nothing of the dead transaction is visible; everything the child committed before it
  is; a new session can update and delete the rows the child had touched;
* pins and content locks it held are released (a second test kills a child that pins a
  buffer, and one that holds a buffer's exclusive content lock while a reader waits).

What these do not prove: a crash of the instance's own (opening) process, which loses what
is only in shared buffers (there is no WAL, by design); a child killed *inside* a
buffer-manager or proc-array critical section (holding a partition or procarray lock):
those are multiprocessing locks, which the kernel does not release for a dead holder -
tests/storage/test_postmaster.py shows that this sets the instance's crash flag (57P02)
instead of hanging; PostgreSQL answers that case by restarting every backend.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import traceback

import numpy as np
import pytest

from minidb.catalog import ColumnDef
from minidb.heap.check import check_heap
from minidb.instance import Instance
from minidb.session import Session
from txn_steps import RC, RR, WAIT_LIMIT_S, Step, poll, key, add  # noqa: F401
from minidb.storage.bufmgr import EXCLUSIVE
from minidb.txn.clog import ABORTED, COMMITTED

INITIAL = {k: 100 * k for k in range(1, 9)}


@pytest.fixture
def inst(tmp_path, assert_no_pins):
    inst = Instance(tmp_path / "data", shared_buffers=64)
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "bigint")])
    opened: list[Session] = []

    def session(**settings) -> Session:
        s = Session(inst, **settings)
        opened.append(s)
        return s

    inst.session = session
    session().insert_many("t", sorted(INITIAL.items()))
    try:
        yield inst
        for s in opened:
            s.rollback()
        check_heap(session().backend, inst.catalog.heap_rel("t"))
        assert_no_pins(inst)
        assert not (inst.seg.proc_wait_xid != 0).any()
        assert not (inst.seg.proc_xact_waiters != 0).any()
    finally:
        for s in opened:
            s.close()
        inst.close()


class Child:
    """A forked process running ``body(inst, conn)``; it reports over a duplex pipe."""

    def __init__(self, inst, body):
        ctx = multiprocessing.get_context("fork")
        self.conn, child_end = ctx.Pipe()

        def main():
            try:
                body(inst, child_end)
            except BaseException:  # noqa: BLE001
                child_end.send(("error", traceback.format_exc()))
            child_end.recv()  # block here until killed (or told to go)
        self.proc = ctx.Process(target=main, daemon=True)
        self.proc.start()
        child_end.close()
        self.pid = self.proc.pid

    def recv(self):
        assert self.conn.poll(WAIT_LIMIT_S), "child sent nothing"
        msg = self.conn.recv()
        assert not (isinstance(msg, tuple) and msg and msg[0] == "error"), msg[1]
        return msg

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.proc.join(WAIT_LIMIT_S)
        assert self.proc.exitcode == -signal.SIGKILL


def reaped_pids(inst) -> set[int]:
    return {pid for _slot, pid, _xid in inst.reaped}


# ---------------------------------------------------------------------------------------------
def _writer_then_hang(inst, conn):
    s = Session(inst)
    # a committed transaction first: it must survive the crash
    s.begin()
    s.insert("t", (50, 5000))
    assert s.update("t", key(8), add(1)) == 1
    s.commit()
    # then the one that dies
    s.begin("repeatable read")
    s.insert_many("t", [(100 + i, i) for i in range(20)])   # invisible afterwards
    assert s.update("t", key(1), add(1)) == 1
    assert s.delete("t", key(2)) == 1
    assert s.update("t", key(3), lambda r: (30, r[1])) == 1  # a key change
    assert s.select_for_update("t", key(4)) == [(4, 400)]
    assert s.update("t", key(5), add(1)) == 1                # the row the waiter wants
    conn.send((s.backend.slot, s.xact.xid))


AFTER_COMMITTED = {**INITIAL, 8: 801, 50: 5000}


@pytest.mark.parametrize("reaper", ["thread", "waiter"])
def test_killed_writer_is_rolled_back_and_its_waiter_released(inst, reaper):
    if reaper == "waiter":
        # stop the reaper thread: the waiter's own wait loop must notice the death
        inst._stop.set()
        inst._reaper.join(WAIT_LIMIT_S)
        assert not inst._reaper.is_alive()
    child = Child(inst, _writer_then_hang)
    slot, xid = child.recv()
    assert xid and inst.clog.status(xid) not in (COMMITTED, ABORTED)
    assert int(inst.seg.proc_pid[slot]) == child.pid
    r = inst.session()
    assert dict(r.select("t")) == AFTER_COMMITTED          # nothing of it visible yet

    waiter = inst.session()
    step = Step(lambda: waiter.update("t", key(5), add(1000)))
    poll(lambda: int(inst.seg.proc_wait_xid[waiter.backend.slot]) == xid,
         "the waiter waits for the child", step)
    # a second waiter, for the row it only locked
    waiter2 = inst.session()
    step2 = Step(lambda: waiter2.delete("t", key(4)))
    poll(lambda: int(inst.seg.proc_wait_xid[waiter2.backend.slot]) == xid,
         "the second waiter waits for the child", step2)
    assert inst.reaped == []

    child.kill()
    assert step.join() == 1
    assert step2.join() == 1
    assert (slot, child.pid, xid) in inst.reaped
    assert inst.clog.status(xid) == ABORTED
    assert int(inst.seg.proc_pid[slot]) == 0
    assert not (inst.seg.proc_xid == xid).any()
    assert not inst.seg.backend_pins[slot].any() and not inst.seg.backend_locks[slot].any()

    expect = {**AFTER_COMMITTED, 5: 1500}
    del expect[4]
    assert dict(r.select("t")) == expect
    assert len(r.select("t")) == len(expect)
    # a new session can change every row the dead transaction had touched
    n = inst.session()
    n.begin()
    assert n.update("t", key(1), add(1)) == 1
    assert n.update("t", key(2), add(1)) == 1
    assert n.update("t", key(3), add(1)) == 1
    assert n.delete("t", key(5)) == 1
    n.commit()
    after = {**expect, 1: 101, 2: 201, 3: 301}
    del after[5]
    assert dict(r.select("t")) == after
    assert int(inst.seg.buf_refcount.sum()) == 0


def test_killed_idle_writer_is_reaped_without_waiters(inst):
    """Nobody waits for it: the reaper thread alone notices (bounded poll)."""
    child = Child(inst, _writer_then_hang)
    slot, xid = child.recv()
    child.kill()
    poll(lambda: child.pid in reaped_pids(inst), "the reaper notices the dead child")
    assert inst.clog.status(xid) == ABORTED
    assert int(inst.seg.proc_pid[slot]) == 0
    r = inst.session()
    assert dict(r.select("t")) == AFTER_COMMITTED
    # a REPEATABLE READ transaction started now can update every row it had touched
    r.begin("repeatable read")
    for k in (1, 3, 4, 5):
        assert r.update("t", key(k), add(7)) == 1
    assert r.delete("t", key(2)) == 1
    r.commit()
    rows = dict(r.select("t"))
    assert 2 not in rows and all(rows[k] == INITIAL[k] + 7 for k in (1, 3, 4, 5))


def _wait_then_hang(inst, conn):
    s = Session(inst)
    s.begin()
    conn.send(s.backend.slot)
    s.update("t", key(1), add(1))   # blocks on the parent's transaction
    conn.send("not blocked")


def test_killed_waiter_leaves_no_trace(inst):
    """A child killed while *waiting* for a row: its wait edge and slot are cleaned up."""
    holder = inst.session()
    holder.begin()
    assert holder.update("t", key(1), add(10)) == 1
    hx = holder.xact.xid
    child = Child(inst, _wait_then_hang)
    slot = child.recv()
    poll(lambda: int(inst.seg.proc_wait_xid[slot]) == hx, "the child waits")
    child.kill()
    poll(lambda: child.pid in reaped_pids(inst), "the reaper notices the dead child")
    assert int(inst.seg.proc_wait_xid[slot]) == 0
    assert int(inst.seg.proc_pid[slot]) == 0
    holder.commit()
    assert not (inst.seg.proc_xact_waiters != 0).any()
    assert dict(inst.session().select("t"))[1] == 110
    # the freed slot works for a new session, which can wait and be woken
    a, b = inst.session(), inst.session()
    a.begin()
    assert a.update("t", key(1), add(1)) == 1
    step = Step(lambda: b.update("t", key(1), add(1)))
    poll(lambda: int(inst.seg.proc_wait_xid[b.backend.slot]) == a.xact.xid, "b waits", step)
    a.commit()
    assert step.join() == 1
    assert dict(inst.session().select("t"))[1] == 112


# ---------------------------------------------------------------------------------------------
def _pin_and_hang(inst, conn, lock: bool):
    b = inst.connect()
    rel = inst.catalog.heap_rel("t")
    buf = b.bufmgr.pin(rel.relfilenode, 0)
    if lock:
        b.bufmgr.lock(buf, EXCLUSIVE)
    conn.send((b.slot, buf))


@pytest.mark.parametrize("lock", [False], ids=["pin"])
def test_killed_child_releases_its_pins_and_content_locks(inst, lock):
    child = Child(inst, lambda i, c: _pin_and_hang(i, c, lock))
    slot, buf = child.recv()
    seg = inst.seg
    assert int(seg.buf_refcount[buf]) == 1
    assert int(seg.backend_pins[slot, buf]) == 1
    assert int(seg.buf_lock_excl[buf]) == (slot if lock else -1)
    reader = inst.session()
    step = Step(lambda: dict(reader.select("t")))
    if lock:  # the reader sleeps on the buffer's content lock
        bit = np.uint64(1) << np.uint64(reader.backend.slot)
        poll(lambda: bool(seg.buf_waiters[buf] & bit), "the reader waits for the lock", step)
    else:
        assert step.join() == INITIAL                   # a pin blocks no reader
    assert inst.reaped == []
    child.kill()
    poll(lambda: child.pid in reaped_pids(inst), "the reaper notices the dead child")
    assert step.join() == INITIAL
    assert int(seg.buf_refcount[buf]) == 0
    assert int(seg.buf_lock_excl[buf]) == -1
    assert not seg.backend_pins[slot].any() and not seg.backend_locks[slot].any()
    assert int(seg.proc_pid[slot]) == 0
    assert [x for x in inst.reaped if x[1] == child.pid] == [(slot, child.pid, 0)]
    # the pool is usable: the page can be cleaned up and written
    w = inst.session()
    assert w.update("t", key(1), add(1)) == 1
    assert inst.checkpoint() >= 1


def test_a_child_killed_holding_an_exclusive_content_lock_is_a_crash(tmp_path):
    """A backend that dies holding a buffer's content lock in exclusive mode may have died
    half-way through changing the page, before the change reached the WAL: releasing the
    lock would let others read the half-change and write it to disk, where recovery cannot
    repair it (a full run once found a tuple with t_ctid (0,0) after such a death).  It is a
    crash, as PostgreSQL's PANIC: the waiter and every later statement get 57P02 at once, and
    reopening (crash recovery) gives the committed rows back (with restart_after_crash off;
    tests/test_crash_restart.py has the restart)."""
    from minidb.errors import CrashShutdown
    path = tmp_path / "data"
    inst = Instance(path, shared_buffers=64, restart_after_crash=False)
    try:
        inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "bigint")])
        Session(inst).insert_many("t", sorted(INITIAL.items()))
        child = Child(inst, lambda i, c: _pin_and_hang(i, c, True))
        slot, buf = child.recv()
        assert int(inst.seg.buf_lock_excl[buf]) == slot
        reader = Session(inst)
        step = Step(lambda: dict(reader.select("t")))
        bit = np.uint64(1) << np.uint64(reader.backend.slot)
        poll(lambda: bool(inst.seg.buf_waiters[buf] & bit), "the reader waits for the lock", step)
        child.kill()
        with pytest.raises(CrashShutdown, match="exclusive mode"):
            step.join()
        assert "exclusive mode (a page may be half-changed)" in inst.locks.crashed()
        assert child.pid not in reaped_pids(inst)      # not reaped: nothing was released
        with pytest.raises(CrashShutdown):
            Session(inst).select("t")
    finally:
        inst.close()
    inst = Instance(path, shared_buffers=64)          # crash recovery
    try:
        s = Session(inst)
        assert dict(s.select("t")) == INITIAL
        assert check_heap(s.backend, inst.catalog.heap_rel("t")) == len(INITIAL)
        s.close()
    finally:
        inst.close()
