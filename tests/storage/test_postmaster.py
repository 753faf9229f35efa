"""The postmaster's rules: no process outlives the owner, no opener beside old processes,
and a process that dies holding a shared-memory lock never wedges the instance.

What is proven here:
  * SIGKILL of the owner while forked DB-API children run a workload: the pool master and
    the children exit (parent-death signal, death pipe); a child that survives (it ignores
    SIGTERM and is busy elsewhere) keeps a new opener out - ``DatabaseInUse`` naming its
    pid - until its next statement, which raises 57P01 and detaches it; then the directory
    opens, and what was checkpointed is intact and passes the heap checker;
  * a child SIGKILLed holding an LWLock (the proc-array lock) sets the crash flag: the next
    statement, connect and wait get 57P02 at once instead of a 60 s wait and 55P03; a lock
    taken with no holder recorded (a death between the two) is found after HOLDERLESS_S;
    the instance closes without waiting and reopens with its checkpointed data;
  (these two with ``restart_after_crash`` off: tests/test_crash_restart.py has the restart)
  * a bounded loop of SIGKILLs of busy forked clients never wedges the instance: after each
    kill the survivor commits (or, if the kill landed inside a critical section, gets 57P02
    and the directory is reopened), the dead client's slot is freed, and the checkers pass.

Not proven: the parent-death signal on other kernels than Linux (the death pipe covers them).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import minidb.instance
from minidb import shmem
from minidb.catalog import ColumnDef
from minidb.errors import AdminShutdown, CrashShutdown, DatabaseInUse, LWLockHolderDied
from minidb.heap.check import check_heap
from minidb.instance import Instance, attached_pids
from minidb.session import Session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minidb.instance.__file__)))
POLL_S = 0.05
POLLS = 400  # 20 s at most for anything that should happen "soon"


def wait_until(cond, what: str) -> None:
    for _ in range(POLLS):
        if cond():
            return
        time.sleep(POLL_S)
    raise AssertionError(f"timed out waiting until {what}")


def alive(pid: int) -> bool:
    return minidb.instance._process_alive(pid)


OWNER = """
import os, signal, sys, time
import minidb
from minidb.instance import acquire_shared

data, release = sys.argv[1], sys.argv[2]
conn = minidb.connect(data, max_worker_processes=1, shared_buffers=64)
cur = conn.cursor()
cur.execute("create table t (k bigint primary key, v bigint)")
cur.execute("create table b (k bigint, v bigint)")
for k in range(200):
    cur.execute("insert into t values (?, ?)", (k, 10 * k))
cur.execute("insert into b values (1, 0)")
conn.commit()
inst = conn._instance
inst.checkpoint()                       # t is on disk: it must survive everything below

def busy_child():                       # dies with its parent (SIGTERM) or at a statement
    c = minidb.connect(data)
    cur = c.cursor()
    while True:
        cur.execute("update b set v = v + 1")
        c.commit()

def survivor_child(result):             # ignores SIGTERM, busy elsewhere until told
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    c = minidb.connect(data)
    cur = c.cursor()
    cur.execute("select count(*) from t")
    c.commit()
    while not os.path.exists(release):
        time.sleep(0.02)
    try:
        cur.execute("select count(*) from t")
        out = "no error"
    except minidb.Error as e:
        out = f"{e.sqlstate} {e}"
    with open(result, "w") as f:
        f.write(out)
    time.sleep(60)                      # alive, but detached: must not keep openers out
    os._exit(0)

kids = []
for body, arg in ((busy_child, None), (survivor_child, release + ".result")):
    pid = os.fork()
    if pid == 0:
        try:
            body(arg) if arg else body()
        finally:
            os._exit(1)
    kids.append(pid)
time.sleep(0.3)                         # the busy child commits a few times
print("READY", inst.pool.master_pid, *kids, flush=True)
time.sleep(60)
"""


def test_owner_killed_children_exit_and_opener_refused_until_then(tmp_path, monkeypatch):
    data = str(tmp_path / "data")
    release = str(tmp_path / "release")
    owner = subprocess.Popen([sys.executable, "-c", OWNER, data, release],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=ROOT))
    kids: list[int] = []
    try:
        line = owner.stdout.readline()
        assert line.startswith("READY"), line + owner.stderr.read()
        master, busy, survivor = map(int, line.split()[1:])
        kids = [master, busy, survivor]
        assert set(kids) <= set(attached_pids(os.path.join(data, "postmaster.pid")))
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        # the pool master and the busy client exit (parent-death signal / death pipe)
        wait_until(lambda: not alive(master) and not alive(busy), "the children exit")
        # the survivor is still attached: a new opener is refused, naming it
        monkeypatch.setattr(minidb.instance, "ORPHAN_WAIT_S", 0.1)
        with pytest.raises(DatabaseInUse, match=f"still in use by pid {survivor}") as e:
            Instance(data, shared_buffers=64)
        assert f"pid {owner.pid}, which opened it, has died" in str(e.value)
        assert e.value.sqlstate == "55006"
        # at its next statement it learns of the owner's death and detaches
        open(release, "w").close()
        wait_until(lambda: os.path.exists(release + ".result"), "the survivor's statement")
        with open(release + ".result") as f:
            assert f.read().startswith("57P01 terminating connection due to unexpected exit")
        assert alive(survivor)  # alive, yet no longer attached:
        with Instance(data, shared_buffers=64) as inst:
            s = Session(inst)
            assert sorted(s.select("t")) == [(k, 10 * k) for k in range(200)]
            assert check_heap(s.backend, inst.catalog.heap_rel("t")) == 200
            check_heap(s.backend, inst.catalog.heap_rel("b"))
            s.close()
    finally:
        for pid in (owner.pid, *kids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        owner.wait(30)
        owner.stdout.close()
        owner.stderr.close()


# -- the death pipe is read periodically, not per statement ---------------------------------------

def test_forked_client_reads_the_death_pipe_periodically(tmp_path, monkeypatch):
    """A forked client's statements read the death pipe at most every OWNER_CHECK_S (a
    connect always reads it): 200 statements with a check interval of an hour read it once,
    at connect; an orphan (the owner seen dead) refuses every later statement."""
    monkeypatch.setattr(minidb.instance, "OWNER_CHECK_S", 3600.0)
    inst = _fresh(tmp_path)
    try:
        r, w = os.pipe()

        def child():
            reads = [0]
            real = inst.owner_alive

            def counted():
                reads[0] += 1
                return real()
            inst.owner_alive = counted
            s = Session(inst)
            at_connect = reads[0]
            for _ in range(200):
                s.select("t")
            steady = reads[0] - at_connect
            inst._orphaned = True           # as if the pipe had read EOF
            try:
                s.select("t")
                refused = "no"
            except AdminShutdown as e:
                refused = e.sqlstate
            os.write(w, f"{at_connect} {steady} {refused}".encode())
        pid = _fork(child)
        got = os.read(r, 100).decode().split()
        os.waitpid(pid, 0)
        assert got == ["1", "0", "57P01"]
    finally:
        inst.close()


# -- a process that dies holding an LWLock ----------------------------------------------------------

def _fresh(tmp_path) -> Instance:
    inst = Instance(tmp_path / "data", shared_buffers=64, max_connections=8,
                    max_worker_processes=0, restart_after_crash=False)
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("v", "bigint")])
    s = Session(inst)
    s.insert_many("t", [(k, 0) for k in range(1, 21)])
    s.close()
    inst.checkpoint()
    return inst


def _fork(body) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            body()
        finally:
            os._exit(0)
    return pid


def test_client_killed_holding_an_lwlock_gives_57P02_not_a_hang(tmp_path):
    inst = _fresh(tmp_path)
    try:
        lock = inst.locks.procarray
        r, w = os.pipe()

        def child():
            Session(inst)  # a backend slot: the reaper will look at it
            lock.acquire()
            os.write(w, b"x")
            os.kill(os.getpid(), signal.SIGKILL)
        pid = _fork(child)
        os.read(r, 1)
        os.waitpid(pid, 0)
        wait_until(lambda: inst.locks.crashed() is not None, "the reaper sets the crash flag")
        assert f"process {pid}" in inst.locks.crashed()
        assert "procarray lock" in inst.locks.crashed()
        assert pid not in {p for _s, p, _x in inst.reaped}  # nothing waited on its locks
        for attempt in (lambda: inst.connect(), lambda: inst.check_interrupts()):
            with pytest.raises(CrashShutdown, match="crash of another server process") as e:
                attempt()
            assert e.value.sqlstate == "57P02"
            assert "must be reopened" in str(e.value)
    finally:
        inst.close()  # no checkpoint (shared memory untrusted), no wait
    with Instance(tmp_path / "data", shared_buffers=64) as inst:
        s = Session(inst)
        assert sorted(s.select("t")) == [(k, 0) for k in range(1, 21)]
        s.close()


def test_lwlock_wait_on_a_dead_holder_and_on_a_holderless_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(shmem, "HOLDERLESS_S", 0.3)
    inst = _fresh(tmp_path)
    try:
        # no slot (the reaper does not see it): the waiter itself finds the dead holder
        lock = inst.locks.stats
        pid = _fork(lambda: (lock.acquire(), os.kill(os.getpid(), signal.SIGKILL)))
        os.waitpid(pid, 0)
        assert lock.holder() == pid
        with pytest.raises(LWLockHolderDied, match=f"process {pid} died holding the stats lock"):
            lock.acquire()
        inst.locks.reset_crash()
        lock.release()
        # a death between taking the semaphore and recording the holder
        lock2 = inst.locks.syncscan
        pid = _fork(lambda: (lock2._semlock.acquire(), os.kill(os.getpid(), signal.SIGKILL)))
        os.waitpid(pid, 0)
        assert lock2.holder() == 0
        with pytest.raises(LWLockHolderDied, match="taking or giving back the syncscan lock"):
            lock2.acquire()
        lock2.release()
    finally:
        inst.close()


# -- SIGKILL of busy clients, a bounded number of times --------------------------------------------

def _client(inst, k: int, conn) -> None:
    s = Session(inst, lock_timeout=0)
    n = 0
    while True:
        try:
            s.begin()
            s.update("t", lambda r: r[0] == k, lambda r: (r[0], r[1] + 1))
            s.insert("t", (1000 + n, k))
            s.delete("t", lambda r: r[0] == 1000 + n)
            s.commit()
        except Exception:  # noqa: BLE001 - e.g. 57P02 after another kill: stop
            s.rollback()
            break
        n += 1
        if n == 3:
            conn.send("running")


@pytest.mark.parametrize("kills", [12])
def test_killing_busy_clients_never_wedges_the_instance(tmp_path, kills):
    rng = random.Random(15)
    ctx = multiprocessing.get_context("fork")
    inst = _fresh(tmp_path)
    expected = dict.fromkeys(range(1, 21), 0)  # what the survivor committed
    crashes = reaped = 0
    try:
        for i in range(kills):
            k = rng.randint(1, 4)
            a, b = ctx.Pipe()
            p = ctx.Process(target=_client, args=(inst, k, b), daemon=True)
            p.start()
            b.close()
            assert a.poll(30), "the client did not start"
            a.recv()
            for _ in range(rng.randint(0, 200)):  # a random moment, counted in polls
                if a.poll(0):
                    break
            os.kill(p.pid, signal.SIGKILL)
            p.join(30)
            a.close()
            # the survivor: commits, or is told clearly that the instance must be reopened
            k2 = 10 + i % 10
            try:
                s = Session(inst, lock_timeout=20000)
                s.begin()
                assert s.update("t", lambda r: r[0] == k2, lambda r: (r[0], r[1] + 1)) == 1
                assert s.commit()
                expected[k2] += 1
                s.close()
            except CrashShutdown:
                pass
            wait_until(lambda: p.pid in {x[1] for x in inst.reaped}
                       or inst.locks.crashed() is not None, "the client is reaped")
            if inst.locks.crashed() is None:
                try:
                    inst.checkpoint()  # the survivor's commits are durable from here on
                except CrashShutdown:
                    # killed between taking a lock's semaphore and recording itself as its
                    # holder: the reaper saw no lock and freed the slot; the lock's next
                    # waiter finds it taken with no holder (HOLDERLESS_S) and crashes
                    assert inst.locks.crashed() is not None
            if inst.locks.crashed() is not None:
                crashes += 1
                inst.close()  # what was only in shared buffers is lost: reload the truth
                inst = Instance(tmp_path / "data", shared_buffers=64, max_connections=8,
                                max_worker_processes=0, restart_after_crash=False)
                s = Session(inst)
                rows = dict(s.select("t", lambda r: r[0] <= 20))
                s.close()
                assert set(rows) == set(expected)
                expected = {kk: rows[kk] for kk in expected}
            else:
                reaped += 1
        s = Session(inst)
        rows = dict(s.select("t", lambda r: r[0] <= 20 and r[0] >= 10))
        assert rows == {kk: v for kk, v in expected.items() if kk >= 10}
        check_heap(s.backend, inst.catalog.heap_rel("t"))
        s.close()
        assert reaped + crashes == kills and reaped >= 1
    finally:
        inst.close()
