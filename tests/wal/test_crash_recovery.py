"""Crash tests that cannot pass by luck (minidb/wal/README.md, "Testing").

* ``test_power_loss_*``: the crash-test file layer (``minidb.fileio.CrashFiles``) records
  every write and fsync of relation files, WAL segments and the control file; a workload of
  inserts, HOT and non-HOT updates, deletes, index inserts with page splits, VACUUM and
  checkpoints runs through the DB-API against a model of the committed state; at the n-th
  write or sync (random) the power goes: every file keeps what was fsynced plus a random
  subset of the other writes, torn at 512-byte boundaries.  The directory is reopened
  (crash recovery; sometimes the power goes again *during* recovery), and then the table
  must equal the committed model exactly (a transaction whose COMMIT was running at the
  crash may be either way), and the heap and B-tree checkers must pass.  A test that
  crashed before any data reached the disk would prove nothing: the cases assert that
  writes were lost and torn.
* ``test_sigkill_*``: a real process runs transfers through the DB-API and reports each
  acknowledged commit over a pipe; it is SIGKILLed mid-workload; every acknowledged commit
  is there after reopening, and the sum is conserved.
* counters: no page is ever written with an LSN beyond the flushed WAL; group commit
  makes fewer WAL flushes than commits with 8 clients.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

import minidb
import minidb.fileio as fileio
from minidb.instance import Instance
from tests.wal.crashkit import check_database, power_loss

SETTINGS = dict(max_worker_processes=0, shared_buffers=24, wal_segment_size=1 << 20,
                wal_buffers=16)


def _rows(cur):
    cur.execute("select k, v, pad from t order by k")
    return {k: (v, pad) for k, v, pad in cur.fetchall()}


def _workload(conn, rng: random.Random, model: dict, state: dict, steps: int) -> None:
    """Random transactions; ``model`` is updated after each acknowledged commit;
    ``state['pending']`` holds the model a running COMMIT would produce."""
    cur = conn.cursor()
    for step in range(steps):
        new = dict(model)
        op = rng.random()
        if op < 0.05:
            state["pending"] = None
            conn.checkpoint_now()
            continue
        if op < 0.1:
            conn.commit()
            conn.conn.autocommit = True
            cur.execute("vacuum t")
            conn.conn.autocommit = False
            continue
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.45 or not new:
                k = rng.randrange(10_000)
                if k in new:
                    continue
                v, pad = rng.randrange(1000), "p" * rng.randint(1, 120)
                cur.execute("insert into t values (?, ?, ?)", (k, v, pad))
                new[k] = (v, pad)
            elif r < 0.65:
                k = rng.choice(sorted(new))
                v = rng.randrange(1000)   # v is not indexed: HOT when the page has room
                cur.execute("update t set v = ? where k = ?", (v, k))
                new[k] = (v, new[k][1])
            elif r < 0.8:
                k = rng.choice(sorted(new))
                pad = "q" * rng.randint(100, 300)  # grows: often a non-HOT update
                cur.execute("update t set pad = ? where k = ?", (pad, k))
                new[k] = (new[k][0], pad)
            else:
                k = rng.choice(sorted(new))
                cur.execute("delete from t where k = ?", (k,))
                del new[k]
        if rng.random() < 0.15:
            conn.rollback()
            continue
        state["pending"] = new
        conn.commit()
        model.clear()
        model.update(new)
        state["pending"] = None


class _Conn:
    """The DB-API connection plus a CHECKPOINT (the instance's, as the SQL command)."""

    def __init__(self, conn):
        self.conn = conn

    def __getattr__(self, name):
        return getattr(self.conn, name)

    def checkpoint_now(self):
        self.conn.commit()
        self.conn._instance.checkpoint()


def _open(d):
    return _Conn(minidb.connect(d, **SETTINGS))


def _verify(d, model, pending):
    conn = minidb.connect(d, **SETTINGS)
    try:
        got = _rows(conn.cursor())
        assert got == model or (pending is not None and got == pending), \
            f"{len(got)} rows after recovery, model has {len(model)}"
        check_database(conn, {"t": {"t_pkey"}})
        return conn._instance.recovery_stats
    finally:
        conn.close()


def _crash_once(tmp_path, seed: int, steps: int = 60, crash_in_recovery: bool = False):
    rng = random.Random(seed)
    d = str(tmp_path / f"data{seed}")
    conn = _open(d)
    cur = conn.cursor()
    cur.execute("create table t (k bigint primary key, v bigint, pad text)")
    conn.commit()
    model: dict = {}
    state = {"pending": None}
    _workload(conn, rng, model, state, 15)        # some data first, without faults
    return power_loss(conn, rng, lambda: _workload(conn, rng, model, state, steps),
                      lambda: _verify(d, model, state["pending"]),
                      within=400, crash_in_recovery=crash_in_recovery)


@pytest.mark.parametrize("seed", range(6))
def test_power_loss_random_point(tmp_path, seed):
    lost, stats = _crash_once(tmp_path, seed)
    assert lost["writes"] > 0


def test_power_loss_loses_and_tears_unsynced_writes(tmp_path):
    """The layer is not a no-op: unsynced writes are dropped or torn."""
    d = tmp_path / "f"
    layer = fileio.CrashFiles()
    old = fileio.set_layer(layer)
    try:
        fd = fileio.open(str(d), os.O_RDWR | os.O_CREAT)
        fileio.pwrite(fd, b"a" * 8192, 0)
        fileio.fsync(fd)
        for i in range(40):
            fileio.pwrite(fd, bytes([66 + i % 20]) * 8192, 8192 * (1 + i % 4))
        res = layer.crash(random.Random(3))
    finally:
        fileio.set_layer(old)
    data = d.read_bytes()
    assert data[:8192] == b"a" * 8192            # fsynced: kept
    assert res["dropped"] > 0 and res["torn"] > 0
    with pytest.raises(fileio.SimulatedCrash):
        layer.pwrite(fd, b"x", 0)


@pytest.mark.parametrize("seed", [11, 12])
def test_power_loss_during_recovery(tmp_path, seed):
    _crash_once(tmp_path, seed, crash_in_recovery=True)


@pytest.mark.long
@pytest.mark.parametrize("seed", range(100, 160))
def test_power_loss_long(tmp_path, seed):
    _crash_once(tmp_path, seed, steps=150, crash_in_recovery=seed % 3 == 0)


# -- a real process, SIGKILLed ---------------------------------------------------------------------

def _transfers(d, wfd, seed):
    rng = random.Random(seed)
    conn = minidb.connect(d, max_worker_processes=0)
    cur = conn.cursor()
    n = 0
    while True:
        a, b = rng.randrange(20), rng.randrange(20)
        amt = rng.randrange(1, 100)
        cur.execute("update acct set bal = bal - ? where id = ?", (amt, a))
        cur.execute("update acct set bal = bal + ? where id = ?", (amt, b))
        cur.execute("insert into hist values (?, ?, ?, ?)", (n, a, b, amt))
        conn.commit()
        os.write(wfd, f"{n}\n".encode())   # acknowledged
        n += 1


def test_sigkill_owner_mid_workload_loses_nothing_acknowledged(tmp_path):
    d = str(tmp_path / "data")
    conn = minidb.connect(d, max_worker_processes=0)
    cur = conn.cursor()
    cur.execute("create table acct (id bigint primary key, bal bigint)")
    cur.execute("create table hist (n bigint primary key, a bigint, b bigint, amt bigint)")
    for i in range(20):
        cur.execute("insert into acct values (?, 1000)", (i,))
    conn.commit()
    conn.close()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            _transfers(d, w, 5)
        finally:
            os._exit(1)
    os.close(w)
    acked = []
    buf = b""
    deadline = time.monotonic() + 60
    while len(acked) < 60 and time.monotonic() < deadline:
        buf += os.read(r, 4096)
        *lines, buf = buf.split(b"\n")
        acked += [int(x) for x in lines]
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(r)
    assert len(acked) >= 60
    conn = minidb.connect(d, max_worker_processes=0)
    cur = conn.cursor()
    cur.execute("select n from hist")
    have = {x for (x,) in cur.fetchall()}
    assert set(acked) <= have                      # nothing acknowledged is lost
    cur.execute("select sum(bal) from acct")
    assert cur.fetchall() == [(20 * 1000,)]       # and every transfer is whole
    assert conn._instance.recovery_stats["records"] > 0
    conn.close()


# -- counters ----------------------------------------------------------------------------------------

def test_no_page_written_beyond_the_flushed_wal(tmp_path):
    """WAL before data: with a tiny pool every transaction evicts dirty pages; each write
    whose page LSN was beyond the flushed WAL flushed it first (counted), none went out
    unflushed."""
    inst = Instance(tmp_path / "data", shared_buffers=16, max_worker_processes=0,
                    synchronous_commit=False)
    try:
        conn_settings = {}
        from minidb.session import Session
        from minidb.catalog import ColumnDef
        inst.catalog.create_table("t", [ColumnDef("k", "bigint", True),
                                        ColumnDef("v", "text")])
        s = Session(inst, **conn_settings)
        for i in range(30):
            s.insert_many("t", [(i * 100 + j, "x" * 200) for j in range(100)])
            s.commit()
        c = inst.counters()
        assert c["buffers_written"] > 20
        assert c["buffers_wal_flushed"] > 0
        assert c["wal_rule_violations"] == 0
        s.close()
    finally:
        inst.close()


def test_group_commit_makes_fewer_flushes_than_commits(tmp_path):
    d = str(tmp_path / "data")
    inst = Instance(d, max_worker_processes=0, commit_delay=2000, commit_siblings=1)
    from minidb.catalog import ColumnDef
    inst.catalog.create_table("t", [ColumnDef("k", "bigint", True), ColumnDef("c", "bigint")])
    before = inst.wal_stats()
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    per = 25
    # every round, all clients hold an open transaction before any commits, so each commit
    # finds siblings and waits commit_delay for them, whatever else runs on the machine
    # (without it, clients forked one by one on a loaded machine can each commit alone)
    barrier = ctx.Barrier(8)

    def client(i):
        from minidb.session import Session
        s = Session(inst, commit_delay=2000, commit_siblings=1)
        for j in range(per):
            s.insert("t", (i * 1000 + j, j))
            barrier.wait(60)
            s.commit()
        s.close()
        os._exit(0)

    procs = [ctx.Process(target=client, args=(i,)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    after = inst.wal_stats()
    commits = 8 * per
    syncs = after["wal_sync"] - before["wal_sync"]
    assert 0 < syncs < commits
    inst.close()


# -- a backend dying inside a WAL critical section -------------------------------------------------

@pytest.mark.parametrize("where", ["wal_insert_at", "proc_delay_chkpt"])
def test_death_in_a_wal_critical_section_sets_the_crash_flag(tmp_path, where):
    """A process killed while copying a WAL record (its reserved space never filled: every
    flush past it would wait) or between a commit record and the commit log (the two would
    disagree) is PostgreSQL's PANIC in a critical section: the reaper sets the crash flag
    instead of aborting and freeing the slot; close() skips its checkpoint, and the next
    open recovers with the committed data."""
    d = tmp_path / "data"
    inst = Instance(d, max_worker_processes=0)
    try:
        from minidb.catalog import ColumnDef
        from minidb.session import Session
        inst.catalog.create_table("t", [ColumnDef("k", "bigint", True)])
        s = Session(inst)
        s.insert("t", (1,))
        s.commit()
        s.close()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                b = inst.connect()
                getattr(inst.seg, where)[b.slot] = 1 if where == "proc_delay_chkpt" else 8192
            finally:
                os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)
        assert inst.reap_dead_backends() == []
        assert "died" in inst.locks.crashed() and f"process {pid}" in inst.locks.crashed()
    finally:
        inst.close()
    inst = Instance(d, max_worker_processes=0)
    try:
        assert inst.recovery_stats["records"] > 0
        from minidb.session import Session
        s = Session(inst)
        assert s.select("t") == [(1,)]
        s.close()
    finally:
        inst.close()


def test_an_abandoned_connection_closed_later_touches_no_file(tmp_path):
    """A connection of an instance dropped as a power loss drops it, closed (or garbage
    collected) after the directory was recovered, must not act on the directory: its
    rollback would otherwise carry out the pending delete of a relation it created - a file
    that recovery has meanwhile restored for a commit that reached the log (found by the
    crash machine: a committed index without its file)."""
    from tests.wal.crashkit import abandon
    d = str(tmp_path / "db")
    conn = minidb.connect(d)
    cur = conn.cursor()
    cur.execute("create table t (a int)")
    files = set(os.listdir(os.path.join(d, "base")))
    abandon(conn)
    conn.close()
    assert set(os.listdir(os.path.join(d, "base"))) == files
