"""A full or failing disk on every write path, through the fault-injection file layer
(``minidb.fileio.FaultFiles``: the Nth write, extend, fsync or create of a chosen file fails
with a chosen errno), so nothing needs root or a full tmpfs.

What is proven here:
  * heap (and index) extension: 53100 "could not extend file ...: No space left on device";
    the statement fails, nothing of it stays, and once there is room the same statement
    works; the checkers pass and a reopen has every committed row;
  * a page write (checkpoint): 53100 "could not write block N in file ..." (EIO: 58030); the
    page stays dirty, the next checkpoint writes it, nothing committed is lost;
  * the WAL (write or fsync): PANIC - the crash flag, the instance restarts by itself and
    crash recovery replays the log; every acknowledged commit is there, the open connection
    gets 57P02 and a new one works;
  * the commit log (a checkpoint writing its pages): 53100, then the next checkpoint works;
  * the catalog: a CREATE TABLE whose new file cannot be created is 53100 and leaves no
    file nor catalog row; the catalog checker passes;
  * the control file: 53100 (EIO on its fsync: 58030) from the checkpoint, the old control
    file intact; the next checkpoint and a reopen work;
  * a checkpoint of the background checkpointer that fails does not stop it.
"""

from __future__ import annotations

import errno
import os
import time

import pytest

import minidb
import minidb.fileio as fileio
from minidb.amcheck import check_instance
from minidb.errors import CrashShutdown, DiskFull, IOError_, OperationalError
from minidb.wal.control import control_path, read_control

LIMIT_S = 60.0


def wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting until {what}")


@pytest.fixture
def faults():
    layer = fileio.FaultFiles()
    old = fileio.set_layer(layer)
    try:
        yield layer
    finally:
        fileio.set_layer(old)


def connect(tmp_path, **kw):
    return minidb.connect(str(tmp_path / "data"), max_worker_processes=0, shared_buffers=64,
                          **kw)


def make(tmp_path, n: int = 20):
    conn = connect(tmp_path)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k int PRIMARY KEY, v int, s text)")
    cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [(k, 0, "x" * 20) for k in range(n)])
    conn.commit()
    return conn


def total(conn) -> tuple:
    cur = conn.cursor()
    cur.execute("SELECT count(*), sum(v) FROM t")
    row = cur.fetchone()
    conn.commit()
    return row


def assert_sound(tmp_path, want: tuple) -> None:
    """Reopen (a clean close came before): the committed rows, and the checkers pass."""
    with connect(tmp_path) as conn:
        assert total(conn) == want
        report = check_instance(conn._instance)
        assert report.ok, report


def test_heap_extension_without_space_is_53100_and_usable_after(tmp_path, faults):
    conn = make(tmp_path)
    cur = conn.cursor()
    faults.fail("extend", match=os.sep + "base" + os.sep)
    rows = [(k, 1, "y" * 200) for k in range(100, 400)]  # needs new pages
    with pytest.raises(DiskFull,
                       match=r'could not extend file ".*base.*" by \d+ blocks?: No space') as e:
        cur.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    assert e.value.sqlstate == "53100" and faults.injected
    conn.rollback()
    assert total(conn) == (20, 0)
    cur.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)  # the disk has room again
    conn.commit()
    assert total(conn) == (320, 300)
    conn.close()
    assert_sound(tmp_path, (320, 300))


@pytest.mark.parametrize("err, cls, code", [(errno.ENOSPC, DiskFull, "53100"),
                                            (errno.EIO, IOError_, "58030")])
def test_page_write_failure_at_checkpoint(tmp_path, faults, err, cls, code):
    conn = make(tmp_path)
    cur = conn.cursor()
    cur.execute("UPDATE t SET v = 1 WHERE k < 10")
    conn.commit()
    faults.fail("write", match=os.sep + "base" + os.sep, err=err)
    conn.autocommit = True
    with pytest.raises(cls, match=r"could not write block \d+ in file") as e:
        cur.execute("CHECKPOINT")
    assert e.value.sqlstate == code
    cur.execute("CHECKPOINT")  # the page stayed dirty: written now
    assert total(conn) == (20, 10)
    conn.close()
    assert_sound(tmp_path, (20, 10))


@pytest.mark.parametrize("op", ["write", "fsync"])
def test_wal_failure_is_a_panic_and_the_instance_recovers(tmp_path, faults, op):
    conn = make(tmp_path)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("UPDATE t SET v = 1 WHERE k < 5")
    conn.commit()  # acknowledged: must survive
    cur.execute("UPDATE t SET v = 2 WHERE k >= 15")
    faults.fail(op, match="pg_wal")
    with pytest.raises(OperationalError, match="PANIC: could not write or sync the write-ahead"):
        conn.commit()
    wait_until(lambda: len(inst.restarts) == 1 and inst.locks.crashed() is None,
               "the crash restart")
    assert "PANIC" in inst.restarts[0]["reason"] and "error" not in inst.restarts[0]
    with pytest.raises(CrashShutdown):
        cur.execute("SELECT 1")
    conn.close()
    conn = connect(tmp_path)
    got = total(conn)
    # the failed commit was never acknowledged; after a failed fsync its record may still
    # have reached the file (PostgreSQL: the outcome of a PANICked commit is unknown)
    assert got == (20, 5) or (op == "fsync" and got == (20, 15))
    cur = conn.cursor()
    cur.execute("UPDATE t SET v = v + 1 WHERE k = 7")
    conn.commit()
    conn.close()
    assert_sound(tmp_path, (got[0], got[1] + 1))


def test_commit_log_write_failure_at_checkpoint(tmp_path, faults):
    conn = make(tmp_path)
    cur = conn.cursor()
    for k in range(5):
        cur.execute("UPDATE t SET v = v + 1 WHERE k = ?", (k,))
        conn.commit()
    faults.fail("write", match="pg_xact", times=-1)
    faults.fail("extend", match="pg_xact", times=-1)
    conn.autocommit = True
    with pytest.raises(DiskFull, match="pg_xact") as e:
        cur.execute("CHECKPOINT")
    assert e.value.sqlstate == "53100"
    faults.clear()
    cur.execute("CHECKPOINT")
    conn.close()
    assert_sound(tmp_path, (20, 5))


def test_catalog_create_without_space_leaves_nothing(tmp_path, faults):
    conn = make(tmp_path)
    cur = conn.cursor()
    base = tmp_path / "data" / "base"
    files = sorted(os.listdir(base))
    faults.fail("create", match=os.sep + "base" + os.sep)
    with pytest.raises(DiskFull, match='could not create file ".*base') as e:
        cur.execute("CREATE TABLE u (a int PRIMARY KEY)")
    assert e.value.sqlstate == "53100"
    conn.rollback()
    assert sorted(os.listdir(base)) == files
    cur.execute("CREATE TABLE u (a int PRIMARY KEY)")
    cur.execute("INSERT INTO u VALUES (1)")
    conn.commit()
    conn.close()
    assert_sound(tmp_path, (20, 0))


@pytest.mark.parametrize("op, err, cls", [("extend", errno.ENOSPC, DiskFull),
                                          ("fsync", errno.EIO, IOError_)])
def test_control_file_failure_keeps_the_old_one(tmp_path, faults, op, err, cls):
    conn = make(tmp_path)
    before = read_control(str(tmp_path / "data"))
    cur = conn.cursor()
    cur.execute("UPDATE t SET v = 3 WHERE k = 1")
    conn.commit()
    faults.fail(op, match="pg_control", err=err)
    conn.autocommit = True
    path = control_path(str(tmp_path / "data"))
    with pytest.raises(cls, match=f'could not write to file "{path}"'):
        cur.execute("CHECKPOINT")
    assert read_control(str(tmp_path / "data")) == before  # untouched
    assert not os.path.exists(control_path(str(tmp_path / "data")) + ".tmp")
    cur.execute("CHECKPOINT")
    assert read_control(str(tmp_path / "data")).checkpoint > before.checkpoint
    conn.close()
    assert_sound(tmp_path, (20, 3))


def test_the_checkpointer_survives_a_failed_checkpoint(tmp_path, faults):
    conn = connect(tmp_path, checkpoint_timeout=1)
    inst = conn._instance
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k int PRIMARY KEY, v int, s text)")
    cur.execute("INSERT INTO t VALUES (1, 1, 'a')")
    conn.commit()
    done = inst.checkpoints_done
    faults.fail("extend", match="pg_control")
    wait_until(lambda: faults.injected, "a timed checkpoint fails")
    cur.execute("INSERT INTO t VALUES (2, 1, 'b')")
    conn.commit()
    wait_until(lambda: inst.checkpoints_done > done, "a later timed checkpoint succeeds")
    assert isinstance(inst._background.error, DiskFull) and inst._background.is_alive()
    conn.close()
    assert_sound(tmp_path, (2, 2))
