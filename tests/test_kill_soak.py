"""The kill soak: SIGKILL random busy clients again and again; the instance never wedges.

Forked DB-API clients run bank transfers (two updates in one transaction, the pgbench
TPC-B shape without its history) against 20 accounts whose balances sum to a constant.  The
test SIGKILLs one of them at a random moment (counted in polls, not timed), then checks
from the owner with a new connection: the sum is unchanged (every committed transfer is
whole, no uncommitted one shows), and the killed client's slot is freed.  A kill that
lands inside a shared-memory change makes the instance restart itself (the other clients
are killed by the restart, and fresh ones are forked); every few rounds a client is
deliberately killed holding an LWLock, so the restart path runs in every tier.  At the end
the heap, B-tree and catalog checkers pass, and a reopen gives the same sum.

Tiers: a few kills in CI, 60 in the ``long`` tier (``pytest -m long``).
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

import minidb
import minidb.instance
from minidb.amcheck import check_instance
from minidb.errors import CrashShutdown

ACCOUNTS = 20
BALANCE = 1000
CLIENTS = 3
LIMIT_S = 90.0  # generous: 2 shared cores


def wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


def transfers(path: str, seed: int, ready_w: int) -> None:
    """A forked client: transfers forever (until killed, or its instance restarts)."""
    rng = random.Random(seed)
    conn = minidb.connect(path)
    cur = conn.cursor()
    n = 0
    while True:
        a, b = sorted(rng.sample(range(ACCOUNTS), 2))  # in key order: no deadlocks
        x = rng.randint(1, 50)
        try:
            cur.execute("UPDATE acct SET bal = bal - ? WHERE k = ?", (x, a))
            cur.execute("UPDATE acct SET bal = bal + ? WHERE k = ?", (x, b))
            conn.commit()
        except CrashShutdown:
            os._exit(3)  # the instance restarts: this process is killed by it anyway
        except minidb.Error:
            conn.rollback()
        n += 1
        if n == 3:
            os.write(ready_w, b"r")


def lock_holder(inst, ready_w: int) -> None:
    """A forked client that dies inside a shared-memory change (the proc-array lock).

    It keeps its connection: a connection dropped at once would be closed by its
    ``__del__`` - the backend slot freed before the kill - and the crash would then be
    found only by another client's wait on the lock, at a time of the scheduler's choosing
    (the test's check could come first and see a clean reap)."""
    conn = minidb.connect(inst.datadir)
    inst.locks.procarray.acquire()
    os.write(ready_w, b"h")
    os.kill(os.getpid(), signal.SIGKILL)
    conn.close()  # pragma: no cover - never reached


def fork(body, *args) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            body(*args)
        finally:
            os._exit(0)
    return pid


def reap_all(pids: set[int]) -> None:
    for pid in list(pids):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            pids.discard(pid)


def check_sum(path: str) -> None:
    """From the owner, a new connection (it waits for a restart in progress)."""
    for _ in range(20):
        conn = minidb.connect(path)
        try:
            cur = conn.cursor()
            cur.execute("SELECT count(*), sum(bal) FROM acct")
            assert cur.fetchone() == (ACCOUNTS, ACCOUNTS * BALANCE)
            conn.commit()
            return
        except CrashShutdown:  # a crash found just now: the restart follows
            time.sleep(0.05)
        finally:
            conn.close()
    raise AssertionError("the instance kept crashing")


def soak(tmp_path, kills: int, seed: int) -> dict:
    path = str(tmp_path / "data")
    rng = random.Random(seed)
    owner = minidb.connect(path, shared_buffers=64, max_connections=10, max_worker_processes=0)
    inst = owner._instance
    cur = owner.cursor()
    cur.execute("CREATE TABLE acct (k int PRIMARY KEY, bal int)")
    cur.executemany("INSERT INTO acct VALUES (?, ?)", [(k, BALANCE) for k in range(ACCOUNTS)])
    owner.commit()
    r, w = os.pipe()
    clients: list[int] = []
    children: set[int] = set()
    stats = {"kills": 0, "reaped": 0, "restarts": 0, "deliberate": 0}

    def spawn():
        pid = fork(transfers, path, rng.randrange(1 << 30), w)
        clients.append(pid)
        children.add(pid)
        assert os.read(r, 1) == b"r", "a client did not start"

    try:
        for i in range(kills):
            alive = [p for p in clients if minidb.instance._process_alive(p)]
            clients[:] = alive
            while len(clients) < CLIENTS:
                spawn()
            restarts = len(inst.restarts)
            if i % 4 == 3:  # deliberately inside a critical section
                pid = fork(lock_holder, inst, w)
                children.add(pid)
                assert os.read(r, 1) == b"h"
                stats["deliberate"] += 1
            else:
                for _ in range(rng.randint(0, 300)):  # a random moment, counted in polls
                    os.sched_yield()
                pid = clients.pop(rng.randrange(len(clients)))
                os.kill(pid, signal.SIGKILL)
            stats["kills"] += 1
            os.waitpid(pid, 0)
            children.discard(pid)
            # never wedged: the dead client is cleaned up or the instance restarts
            # (the reaper of any process may free the slot: look at the slots themselves)
            def crashed():
                return (len(inst.restarts) > restarts or inst._restarting
                        or inst.locks.crashed() is not None)
            wait_until(lambda: crashed() or not (abs(inst.seg.proc_pid) == pid).any(),
                       "the kill is dealt with")
            if crashed():
                wait_until(lambda: len(inst.restarts) > restarts
                           and inst.locks.crashed() is None, "the restart ends")
                assert "error" not in inst.restarts[-1], inst.restarts[-1]
                stats["restarts"] += 1
            else:
                stats["reaped"] += 1
            check_sum(path)
            reap_all(children)
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            children.discard(pid)
        wait_until(lambda: set(inst.seg.proc_pid[inst.seg.proc_pid != 0].tolist())
                   <= {os.getpid()}, "every dead client's slot is free")
        check_sum(path)
        report = check_instance(inst)
        assert report.ok, report
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        try:
            owner.close()
        except minidb.Error:
            pass  # stale after a restart: closing frees nothing
    check_sum(path)  # reopened: the same
    return stats


def test_kill_soak_quick(tmp_path):
    stats = soak(tmp_path, kills=4, seed=15)
    assert stats["kills"] == 4 and stats["restarts"] >= stats["deliberate"] >= 1


@pytest.mark.long
def test_kill_soak_60(tmp_path):
    stats = soak(tmp_path, kills=60, seed=60)
    assert stats["kills"] == 60 and stats["restarts"] >= stats["deliberate"] == 15
    assert stats["reaped"] + stats["restarts"] == 60
