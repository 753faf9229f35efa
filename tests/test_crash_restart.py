"""Crash restart: a process of the instance that dies inside a shared-memory change makes the
instance restart itself, as PostgreSQL's postmaster does.

What is proven here:
  * a forked client SIGKILLed holding an LWLock, while the owner's program is busy elsewhere
    (its main thread never calls minidb): the instance restarts by itself - the other forked
    clients are killed, a new segment, crash recovery - the owner survives, its open DB-API
    connection gets 57P02 at its next call, and a new connection works and sees every
    committed row; the slots of the dead processes are free, and the pool and the monitor
    run again;
  * the monitor process alone (the owner's postmaster thread made unable to act): it sets
    the crash flag and kills the other forked clients; once the thread can act, the restart
    follows;
  * an owner thread blocked in a lock wait when the crash happens gets 57P02 (no 60 s
    wait), and the restart does not wait for it any longer than that;
  * ``restart_after_crash = off`` keeps the old answer (57P02 until reopened);
  * a CREATE INDEX killed mid-way (its transaction created a file): a crash restart, whose
    recovery removes the file; the index can then be made.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import minidb
import minidb.instance
from minidb.errors import CrashShutdown
from minidb.session import Session

POLL_S = 0.02
LIMIT_S = 60.0  # generous: 2 shared cores


def wait_until(cond, what: str, limit: float = LIMIT_S) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(POLL_S)
    raise AssertionError(f"timed out waiting until {what}")


def alive(pid: int) -> bool:
    return minidb.instance._process_alive(pid)


def reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def fork(body) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid


def make(tmp_path, **settings):
    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64, max_connections=8,
                          **{"max_worker_processes": 1, **settings})
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    cur.executemany("INSERT INTO t VALUES (?, ?)", [(k, 0) for k in range(20)])
    conn.commit()
    return conn


def busy_client(inst, ready_w: int) -> None:
    """A forked client committing updates forever (killed by the restart)."""
    s = Session(inst)
    os.write(ready_w, b"b")
    while True:
        try:
            s.begin()
            s.update("t", lambda r: r[0] == 19, lambda r: (r[0], r[1] + 1))
            s.commit()
        except CrashShutdown:
            time.sleep(0.01)


def lock_holder(inst, ready_w: int) -> None:
    """A forked client that dies holding the proc-array lock (inside a shared change)."""
    Session(inst)
    inst.locks.procarray.acquire()
    os.write(ready_w, b"h")
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_client_dying_in_a_critical_section_restarts_the_instance(tmp_path):
    conn = make(tmp_path)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("UPDATE t SET v = 7 WHERE k = 3")
    conn.commit()
    cur.execute("SELECT count(*) FROM t")          # a connection left open across the crash
    old_pool, old_monitor = inst.pool.master_pid, inst.monitor_pid
    r, w = os.pipe()
    busy = fork(lambda: busy_client(inst, w))
    assert os.read(r, 1) == b"b"
    holder = fork(lambda: lock_holder(inst, w))
    assert os.read(r, 1) == b"h"
    reap(holder)
    # the program is busy elsewhere: nobody calls minidb while the instance restarts
    wait_until(lambda: len(inst.restarts) == 1 and inst.locks.crashed() is None,
               "the instance restarted by itself")
    reap(busy)
    done = inst.restarts[0]
    assert f"process {holder}" in done["reason"] and "procarray lock" in done["reason"]
    assert not alive(busy) and not alive(old_pool) and not alive(old_monitor)
    assert done["recovery"]["records"] > 0 and inst.generation == 1
    assert inst.pool.master_pid != old_pool and alive(inst.pool.master_pid)
    assert inst.monitor_pid != old_monitor and alive(inst.monitor_pid)
    assert set(inst.seg.proc_pid[inst.seg.proc_pid != 0].tolist()) <= {os.getpid()}
    # the open connection: 57P02 at its next call, every call; closing it is quiet
    for call in (lambda: cur.execute("SELECT 1"), conn.commit, conn.rollback):
        with pytest.raises(CrashShutdown, match="restarted since this connection") as e:
            call()
        assert e.value.sqlstate == "57P02"
    conn.close()
    # a new connection works: the committed rows are there, and it can write
    conn = minidb.connect(str(tmp_path / "data"))
    cur = conn.cursor()
    cur.execute("SELECT v FROM t WHERE k = 3")
    assert cur.fetchone() == (7,)
    cur.execute("SELECT count(*), sum(v) FROM t WHERE k <> 19")  # (the busy client's row)
    assert cur.fetchone() == (19, 7)
    cur.execute("UPDATE t SET v = v + 1 WHERE k < 10")
    conn.commit()
    cur.execute("SELECT count(*) FROM t WHERE v > 0 AND k < 10")
    assert cur.fetchone() == (10,)
    conn.close()
    with minidb.connect(str(tmp_path / "data")) as conn:  # reopen: still all there
        cur = conn.cursor()
        cur.execute("SELECT v FROM t WHERE k = 3")
        assert cur.fetchone() == (8,)


def test_the_monitor_acts_while_the_owner_cannot(tmp_path, monkeypatch):
    conn = make(tmp_path, max_worker_processes=0)
    inst = conn._instance
    gate = threading.Event()
    real_restart = type(inst).crash_restart

    def blocked_restart(self):  # the owner's postmaster thread cannot act until the gate
        if not gate.is_set():
            return {}
        return real_restart(self)
    monkeypatch.setattr(type(inst), "crash_restart", blocked_restart)
    monkeypatch.setattr(type(inst), "reap_dead_backends", lambda self: [])
    r, w = os.pipe()
    busy = fork(lambda: busy_client(inst, w))
    assert os.read(r, 1) == b"b"
    holder = fork(lambda: lock_holder(inst, w))
    assert os.read(r, 1) == b"h"
    reap(holder)
    wait_until(lambda: not alive(busy), "the monitor killed the busy client")
    reap(busy)
    assert f"process {holder}" in inst.locks.crashed()
    wait_until(lambda: not alive(inst.monitor_pid), "the monitor exits, its work done")
    assert inst.restarts == []
    with pytest.raises(CrashShutdown):
        conn.cursor().execute("SELECT 1")
    gate.set()
    wait_until(lambda: len(inst.restarts) == 1, "the restart once the owner can act")
    conn.close()
    with minidb.connect(str(tmp_path / "data")) as conn:
        cur = conn.cursor()
        cur.execute("SELECT count(*) FROM t")
        assert cur.fetchone() == (20,)


def test_a_thread_blocked_in_a_wait_gets_57P02_and_the_restart_goes_on(tmp_path):
    conn = make(tmp_path, max_worker_processes=0)
    inst = conn._instance
    r, w = os.pipe()

    def row_locker():  # holds a row lock forever (then killed by the restart)
        s = Session(inst)
        s.begin()
        s.update("t", lambda r: r[0] == 5, lambda r: (r[0], r[1] + 1))
        os.write(w, b"l")
        time.sleep(600)
    locker = fork(row_locker)
    assert os.read(r, 1) == b"l"
    outcome = []

    def waiter():
        c = minidb.connect(str(tmp_path / "data"), lock_timeout=120000)
        try:
            c.cursor().execute("UPDATE t SET v = 1 WHERE k = 5")  # waits for the locker
            outcome.append("no error")
        except minidb.Error as e:
            outcome.append(e.sqlstate)
        finally:
            c.close()
    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: inst.seg.proc_wait_xid.any(), "the thread waits for the row lock")
    holder = fork(lambda: lock_holder(inst, w))
    assert os.read(r, 1) == b"h"
    reap(holder)
    t.join(LIMIT_S)
    assert not t.is_alive() and outcome == ["57P02"]
    wait_until(lambda: len(inst.restarts) == 1, "the restart")
    reap(locker)
    assert inst.restarts[0]["calls_waited_out"]
    conn.close()
    with minidb.connect(str(tmp_path / "data")) as conn:
        cur = conn.cursor()
        cur.execute("UPDATE t SET v = 1 WHERE k = 5")  # the dead locker's lock is gone
        assert cur.rowcount == 1


def test_restart_after_crash_off_stays_down(tmp_path):
    conn = make(tmp_path, max_worker_processes=0, restart_after_crash=False)
    inst = conn._instance
    r, w = os.pipe()
    holder = fork(lambda: lock_holder(inst, w))
    assert os.read(r, 1) == b"h"
    reap(holder)
    wait_until(lambda: inst.locks.crashed() is not None, "the crash flag")
    time.sleep(0.5)  # (no restart comes: asserted on the counter, not on the time)
    assert inst.restarts == []
    with pytest.raises(CrashShutdown, match="must be reopened"):
        conn.cursor().execute("SELECT 1")
    conn.close()


def test_a_create_index_killed_mid_way_leaves_no_file(tmp_path):
    """The killed backend's transaction created a file: its death is a crash, and the
    restart's recovery removes the file no committed catalog row names."""
    conn = make(tmp_path, max_worker_processes=0)
    inst = conn._instance
    cur = conn.cursor()
    cur.executemany("INSERT INTO t VALUES (?, ?)", [(k, k) for k in range(20, 3000)])
    conn.commit()
    base = tmp_path / "data" / "base"
    files = set(os.listdir(base))

    def builder():
        c = minidb.connect(str(tmp_path / "data"))
        c.cursor().execute("CREATE INDEX t_v ON t (v)")  # not committed: killed first
        time.sleep(600)
    pid = fork(builder)
    wait_until(lambda: set(os.listdir(base)) - files, "the index file exists")
    new = set(os.listdir(base)) - files
    os.kill(pid, signal.SIGKILL)
    reap(pid)
    wait_until(lambda: len(inst.restarts) == 1, "the crash restart")
    assert "created relation files" in inst.restarts[0]["reason"] \
        or "died" in inst.restarts[0]["reason"]
    removed = {str(r) for r in inst.restarts[0]["recovery"]["orphans_removed"]}
    assert {n.split("_")[0] for n in new} <= removed
    assert set(os.listdir(base)) == files
    conn.close()
    with minidb.connect(str(tmp_path / "data")) as conn:
        cur = conn.cursor()
        cur.execute("CREATE INDEX t_v ON t (v)")
        cur.execute("SELECT count(*) FROM t WHERE v = 77")
        assert cur.fetchone() == (1,)
