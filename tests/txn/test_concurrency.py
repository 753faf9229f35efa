"""Concurrent writers: forked processes moving money, hot-row increments, deadlocks, lock_timeout.

* **transfers**: 4 processes forked from the open instance (as benchmark clients are),
  each with its own session, make 200 transfers each between random pairs of 8 accounts,
  half of them under READ COMMITTED and half under REPEATABLE READ (and half with
  ``hot_updates`` off), retrying a transfer that fails with 40001 or 40P01.  Each
  transfer also inserts a row into a log table in the same transaction.  Afterwards: the total is unchanged, every account's balance is
  exactly its start plus what the *committed* log says came in minus what went out (so
  every transfer was applied entirely or not at all, and no committed one was lost), the
  log has one row per transfer, ``check_heap`` passes and no pin, content lock, proc slot
  or waiter is left.
* **hot row**: processes (and threads) increment one counter under READ COMMITTED in
  autocommit; no increment is lost and none fails (RC waits and re-evaluates, it never
  raises 40001).
* **deadlock**: two (and three) sessions wait for each other in a cycle; exactly one gets
  40P01, its transaction is aborted at once (as in PostgreSQL: before its client says
  ROLLBACK), and the others complete.
* **lock_timeout**: a waiter gives up with 55P03; in a block that fails the block.

What these do not prove: that every interleaving is safe (they sample a few thousand under
the OS scheduler); that deadlock detection is timely (asserting on time is forbidden, and
the count of deadlocks in the transfer test depends on scheduling, so it is reported,
not asserted).
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import traceback

import numpy as np
import pytest

from minidb.catalog import ColumnDef
from minidb.errors import (DeadlockDetected, InFailedSqlTransaction, LockNotAvailable,
                           SerializationFailure)
from minidb.heap.check import check_heap
from minidb.instance import Instance
from minidb.session import Session
from txn_steps import RC, RR, WAIT_LIMIT_S, Step, wait_blocked, wait_any_done, key, add  # noqa: F401
from minidb.txn.clog import ABORTED

CHILD_LIMIT_S = 60.0  # below pytest-timeout's 120 s, so a hung child is a clear failure

N_ACCOUNTS = 8
START_BALANCE = 1000
N_PROCS = 4
N_TRANSFERS = 200


# ---------------------------------------------------------------------------------------------
# helpers (threads)
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
    session().insert_many("t", [(k, 100 * k) for k in range(1, 6)])
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


def run_children(inst, target, args_list):
    """Fork one process per args tuple (after the instance is open); each gets a pipe end
    as its last argument and sends one result.  Returns the results in order."""
    ctx = multiprocessing.get_context("fork")
    procs, conns = [], []
    for args in args_list:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=target, args=(inst, *args, send), daemon=True)
        p.start()
        send.close()
        procs.append(p)
        conns.append(recv)
    results = []
    for p, c in zip(procs, conns):
        assert c.poll(CHILD_LIMIT_S), f"child {p.pid} sent nothing"
        results.append(c.recv())
        p.join(30)
        assert p.exitcode == 0, f"child {p.pid} exit code {p.exitcode}"
    for r in results:
        assert not (isinstance(r, tuple) and r and r[0] == "error"), r[1]
    return results


def _child_guard(fn):
    """Run a child's body; report any exception over the pipe instead of dying silently."""
    def run(inst, *args):
        conn = args[-1]
        try:
            conn.send(fn(inst, *args[:-1]))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))
        finally:
            conn.close()
    return run


# ---------------------------------------------------------------------------------------------
# transfers between accounts, 4 processes
def _transfers(inst, idx, isolation, seed, hot):
    rng = random.Random(seed)
    s = Session(inst, deadlock_timeout=20, hot_updates=hot)
    stats = {"committed": 0, "40001": 0, "40P01": 0}
    try:
        for i in range(N_TRANSFERS):
            src, dst = rng.sample(range(N_ACCOUNTS), 2)
            amount = rng.randint(1, 100)
            while True:
                try:
                    s.begin(isolation)
                    n1 = s.update("acct", key(src), add(-amount))
                    n2 = s.update("acct", key(dst), add(amount))
                    if (n1, n2) != (1, 1):
                        raise AssertionError(f"transfer {src}->{dst} updated {n1}, {n2} rows")
                    s.insert("xfer", (idx * 100000 + i, src, dst, amount))
                    s.commit()
                    stats["committed"] += 1
                    break
                except SerializationFailure:
                    stats["40001"] += 1
                    s.rollback()
                except DeadlockDetected:
                    stats["40P01"] += 1
                    s.rollback()
    finally:
        s.close()
    return stats


def test_transfers_between_forked_processes_keep_the_total(inst, assert_no_pins):
    inst.catalog.create_table("acct", [ColumnDef("id", "bigint", True),
                                       ColumnDef("balance", "bigint", True)])
    inst.catalog.create_table("xfer", [ColumnDef("tid", "bigint", True),
                                       ColumnDef("src", "bigint", True),
                                       ColumnDef("dst", "bigint", True),
                                       ColumnDef("amount", "bigint", True)])
    setup = inst.session()
    setup.insert_many("acct", [(a, START_BALANCE) for a in range(N_ACCOUNTS)])
    setup.close()

    # (RC, HOT), (RR, HOT), (RC, no HOT), (RR, no HOT)
    args = [(i, RC if i % 2 == 0 else RR, 1234 + i, i < 2) for i in range(N_PROCS)]
    stats = run_children(inst, _child_guard(_transfers), args)

    s = inst.session()
    balances = dict(s.select("acct"))
    assert len(balances) == N_ACCOUNTS and len(s.select("acct")) == N_ACCOUNTS
    assert sum(balances.values()) == N_ACCOUNTS * START_BALANCE
    log = s.select("xfer")
    assert sum(st["committed"] for st in stats) == N_PROCS * N_TRANSFERS
    assert len(log) == N_PROCS * N_TRANSFERS
    assert len({r[0] for r in log}) == len(log)         # each transfer committed once
    expect = {a: START_BALANCE for a in range(N_ACCOUNTS)}
    for _tid, src, dst, amount in log:
        expect[src] -= amount
        expect[dst] += amount
    assert balances == expect                             # all-or-nothing, none lost
    print("transfer retries per process (40001, 40P01):",
          [(st["40001"], st["40P01"]) for st in stats])
    # RC clients never get 40001 for a plain update
    assert all(st["40001"] == 0 for st, a in zip(stats, args) if a[1] == RC)

    for name in ("acct", "xfer"):
        check_heap(s.backend, inst.catalog.heap_rel(name))
    # every child ended cleanly: nothing to reap, no pins, no slots, no waits left
    assert inst.reaped == []
    assert int(inst.seg.buf_refcount.sum()) == 0
    assert_no_pins(inst)
    live = {b.slot for b in inst._backends}
    assert set(np.flatnonzero(inst.seg.proc_pid != 0).tolist()) <= live


# ---------------------------------------------------------------------------------------------
# a hot row, incremented under READ COMMITTED
def _increments(inst, n):
    s = Session(inst)
    try:
        for _ in range(n):
            if s.update("t", key(1), add(1)) != 1:
                raise AssertionError("increment did not find the row")
    finally:
        s.close()
    return n


def test_hot_row_increments_from_processes_lose_nothing(inst):
    done = run_children(inst, _child_guard(_increments), [(100,)] * N_PROCS)
    assert sum(done) == 100 * N_PROCS
    s = inst.session()
    assert s.select("t", key(1)) == [(1, 100 + 100 * N_PROCS)]
    assert inst.reaped == []


def test_hot_row_increments_from_threads_lose_nothing(inst):
    sessions = [inst.session() for _ in range(4)]
    errors = []

    def work(s):
        try:
            for _ in range(50):
                s.begin(RC)
                assert s.update("t", key(2), add(1)) == 1
                s.commit()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert inst.session().select("t", key(2)) == [(2, 200 + 4 * 50)]


# ---------------------------------------------------------------------------------------------
# deadlocks
def test_deadlock_between_two_sessions_has_exactly_one_victim(inst):
    """As in PostgreSQL, the victim's transaction is aborted when the error is raised (its
    row locks go with it), so the survivor goes on before the victim's client says
    ROLLBACK; the victim's block stays failed (25P02) until then."""
    a = inst.session(deadlock_timeout=50)
    b = inst.session(deadlock_timeout=50)
    a.begin()
    b.begin()
    assert a.update("t", key(1), add(1)) == 1
    assert b.update("t", key(2), add(1)) == 1
    xids = {id(a): a.xact.xid, id(b): b.xact.xid}
    sa = Step(lambda: a.update("t", key(2), add(10)))
    wait_blocked(inst, a, sa, b.xact.xid)
    sb = Step(lambda: b.update("t", key(1), add(10)))
    wait_any_done(sa, sb)
    victim, vs, survivor, ss = (sa, a, sb, b) if sa.error is not None else (sb, b, sa, a)
    with pytest.raises(DeadlockDetected) as ei:
        victim.join()
    assert ei.value.sqlstate == "40P01"
    assert inst.clog.status(xids[id(vs)]) == ABORTED     # aborted at the error
    assert survivor.join() == 1                           # without waiting for ROLLBACK
    with pytest.raises(InFailedSqlTransaction):
        vs.select("t")
    assert ss.commit() is True
    assert vs.commit() is False                           # COMMIT of a failed block
    rows = dict(inst.session().select("t"))
    if ss is a:
        assert (rows[1], rows[2]) == (101, 210)
    else:
        assert (rows[1], rows[2]) == (110, 201)


def test_deadlock_cycle_of_three_has_exactly_one_victim(inst):
    ss = [inst.session(deadlock_timeout=50) for _ in range(3)]
    for i, s in enumerate(ss):
        s.begin()
        assert s.update("t", key(i + 1), add(1)) == 1
    steps = []
    for i, s in enumerate(ss):   # i waits for i+1 (mod 3): a cycle
        nxt = (i + 1) % 3
        st = Step(lambda s=s, nxt=nxt: s.update("t", key(nxt + 1), add(10)))
        steps.append(st)
        if i < 2:
            wait_blocked(inst, s, st, ss[nxt].xact.xid)
    end = time.monotonic() + WAIT_LIMIT_S
    while not any(st.error is not None for st in steps):
        assert time.monotonic() < end, "no victim"
        time.sleep(0.001)
    v = next(i for i, st in enumerate(steps) if st.error is not None)
    with pytest.raises(DeadlockDetected):
        steps[v].join()
    # the chain unwinds: the one waiting for the victim goes on at once; the third waits
    # for it until it commits
    first, second = (v + 2) % 3, (v + 1) % 3
    assert steps[first].join() == 1
    wait_blocked(inst, ss[second], steps[second], ss[first].xact.xid)
    assert ss[first].commit() is True
    assert steps[second].join() == 1
    assert ss[second].commit() is True
    ss[v].rollback()
    rows = dict(inst.session().select("t"))
    expect = {1: 100, 2: 200, 3: 300}
    for i in range(3):
        if i != v:
            expect[i + 1] += 1
            expect[(i + 1) % 3 + 1] += 10
    assert {k: rows[k] for k in (1, 2, 3)} == expect


# ---------------------------------------------------------------------------------------------
# lock_timeout
def test_lock_timeout(inst):
    a = inst.session()
    b = inst.session(lock_timeout=50)
    a.begin()
    assert a.update("t", key(1), add(1)) == 1
    with pytest.raises(LockNotAvailable) as ei:        # autocommit: rolled back
        b.update("t", key(1), add(10))
    assert ei.value.sqlstate == "55P03"
    assert b.update("t", key(2), add(10)) == 1         # the session goes on
    b.begin()
    assert b.update("t", key(3), add(10)) == 1
    with pytest.raises(LockNotAvailable):
        b.delete("t", key(1))
    with pytest.raises(InFailedSqlTransaction):
        b.select("t")
    b.rollback()                                       # its update of key 3 is undone
    a.commit()
    rows = dict(inst.session().select("t"))
    assert (rows[1], rows[2], rows[3]) == (101, 210, 300)
