"""The instance: owning a data directory, backends and their slots, counters, shutdown.

What is proven here:
  * a second, independent process opening a directory in use gets ``DatabaseInUse`` naming
    the holder's pid, and so does a second open from the same process (whose fcntl lock would
    otherwise be granted, and dropped again when that second open closed its descriptor);
  * the lock of a SIGKILLed holder is taken over, and what it had checkpointed is intact;
  * a non-empty directory that is not minidb's, and a directory of another format version,
    are refused with a clear error and left untouched;
  * backend slots are handed out and given back; instance settings cannot change per session;
  * counters of closed backends survive in the retired row; close writes dirty pages.

Not proven: behaviour on NFS or other file systems where fcntl locks are unreliable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minidb.instance
from minidb.errors import (CantChangeParameter, DatabaseInUse, InterfaceError,
                           InvalidParameterValue, OperationalError, TooManyConnections)
from minidb.heap.check import check_heap
from minidb.heap.heapam import HeapScan, heap_bulk_insert, heap_insert
from minidb.instance import FORMAT_VERSION, LOCK_FILE, VERSION_FILE, Instance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minidb.instance.__file__)))


def run_python(code: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=60, **kw)


def count_rows(backend, rel) -> int:
    return sum(len(batch) for batch in HeapScan(backend, rel, [0]))


# -- 4. one owner per data directory -----------------------------------------------------------


def test_second_process_gets_database_in_use_with_the_holders_pid(instance):
    r = run_python(f"""
        from minidb.errors import DatabaseInUse
        from minidb.instance import Instance
        try:
            Instance({instance.datadir!r})
        except DatabaseInUse as e:
            print("ERROR", e.sqlstate, e)
            raise SystemExit(3)
        print("OPENED")
    """)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"in use by pid {os.getpid()}" in r.stdout, r.stdout
    assert "55006" in r.stdout
    # and the holder is unharmed
    with open(os.path.join(instance.datadir, LOCK_FILE)) as f:
        assert f.read().split()[0] == str(os.getpid())


def test_second_open_in_the_same_process_is_refused(instance, make_table, backend):
    rel = make_table(instance, "t", [("a", "integer")])
    with pytest.raises(DatabaseInUse, match=f"already open in this process \\(pid {os.getpid()}"):
        Instance(instance.datadir, shared_buffers=16)
    # the refused open did not drop our lock: another process is still kept out
    r = run_python(f"""
        from minidb.instance import Instance
        Instance({instance.datadir!r})
    """)
    assert r.returncode != 0 and "DatabaseInUse" in r.stderr, r.stderr[-500:]
    heap_insert(backend, rel, (1,), xmin=1)  # and the instance works
    assert count_rows(backend, rel) == 1


def test_lock_of_a_killed_holder_is_taken_over(tmp_path, make_table, open_rel):
    data = str(tmp_path / "data")
    with Instance(data, shared_buffers=16) as inst:
        rel = make_table(inst, "t", [("a", "bigint"), ("s", "text")])
        with inst.connect() as b:
            heap_bulk_insert(b, rel, {"a": np.arange(1000), "s": ["p"] * 1000}, 1000,
                             xmin=1)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from minidb.instance import Instance
            from minidb.heap.heapam import HeapRel, heap_insert
            from minidb.heap.layout import Column, RowLayout
            inst = Instance({data!r}, shared_buffers=16)
            t = inst.catalog.table("t")
            rel = HeapRel("t", t.relfilenode,
                          RowLayout([Column(c.name, c.type) for c in t.columns]))
            b = inst.connect()
            for i in range(1000, 1500):
                heap_insert(b, rel, (i, "c"), xmin=2)
            inst.checkpoint()       # written: must survive the kill
            for i in range(1500, 1600):
                heap_insert(b, rel, (i, "lost"), xmin=2)  # only in shared memory
            print("READY", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        line = child.stdout.readline()
        assert line.strip() == "READY", line + child.stderr.read()
        with pytest.raises(DatabaseInUse, match=f"in use by pid {child.pid}"):
            Instance(data, shared_buffers=16)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    with open(os.path.join(data, LOCK_FILE)) as f:
        assert f.read().split()[0] == str(child.pid)  # stale
    with Instance(data, shared_buffers=16) as inst:
        with open(os.path.join(data, LOCK_FILE)) as f:
            assert f.read().split()[0] == str(os.getpid())
        rel = open_rel(inst, "t")
        with inst.connect() as b:
            ids = np.concatenate([batch.columns[0][0] for batch in
                                  HeapScan(b, rel, [0])])
            # what the child checkpointed is there; what was only in its shared memory may
            # be lost (no WAL), but nothing is duplicated or damaged
            ids = ids.tolist()
            assert len(ids) == len(set(ids))
            assert set(range(1500)) <= set(ids) <= set(range(1600))
            assert check_heap(b, rel) == len(ids)


def test_non_minidb_directory_is_refused_and_untouched(tmp_path):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"\xff\xd8meow")
    with pytest.raises(OperationalError, match="is not a minidb data directory"):
        Instance(d)
    assert sorted(os.listdir(d)) == ["cat.jpg"]


def test_other_format_version_is_refused(tmp_path):
    d = tmp_path / "data"
    Instance(d).close()
    (d / VERSION_FILE).write_text("minidb 99\n")
    before = sorted(os.listdir(d))
    with pytest.raises(OperationalError, match='written by "minidb 99"'):
        Instance(d)
    assert sorted(os.listdir(d)) == before
    (d / VERSION_FILE).write_text(FORMAT_VERSION + "\n")
    Instance(d).close()  # the refusal left no lock behind


def test_directory_without_a_wal_is_refused_with_a_hint(tmp_path):
    """"minidb 2" (the catalog in heap tables, no write-ahead log, 32-bit page LSNs) cannot
    be read by this format: the message says what to do."""
    d = tmp_path / "data"
    Instance(d).close()
    (d / VERSION_FILE).write_text("minidb 2\n")
    with pytest.raises(OperationalError, match=r'written by "minidb 2".*no write-ahead log.*'
                                               r"dump the data"):
        Instance(d)


def test_new_directory_is_created_and_lock_file_names_the_owner(tmp_path):
    d = tmp_path / "a" / "b" / "data"
    inst = Instance(d)
    assert (d / VERSION_FILE).read_text().strip() == FORMAT_VERSION == "minidb 3"
    assert (d / LOCK_FILE).read_text().split()[0] == str(os.getpid())
    inst.close()
    assert (d / LOCK_FILE).read_text() == ""  # released and emptied
    inst.close()  # idempotent
    with pytest.raises(InterfaceError, match="closed"):
        inst.connect()


# -- backends and settings -----------------------------------------------------------------------


def test_connection_slots_are_limited_and_reused(tmp_path):
    with Instance(tmp_path / "data", max_connections=2, max_worker_processes=1,
                  shared_buffers=16) as inst:
        a, b = inst.connect(), inst.connect()
        assert {a.slot, b.slot} == {0, 1}
        with pytest.raises(TooManyConnections, match="too many clients"):
            inst.connect()
        w = inst.connect(worker=True)  # the reserved worker slot
        assert w.slot == 2
        with pytest.raises(TooManyConnections):
            inst.connect(worker=True)
        a.close()
        c = inst.connect()
        assert c.slot == a.slot and inst.seg.proc_pid[c.slot] == os.getpid()
        for x in (b, c, w):
            x.close()
        assert not inst.seg.proc_pid.any()


def test_session_settings(instance):
    with pytest.raises(CantChangeParameter, match="shared_buffers"):
        instance.connect(shared_buffers=128)
    with pytest.raises(InvalidParameterValue, match="outside the valid range"):
        instance.connect(lock_wait_timeout_ms=0)
    with instance.connect(lock_wait_timeout_ms=250, heap_fillfactor=70) as b:
        assert b.settings.lock_wait_timeout_ms == 250 and b.settings.heap_fillfactor == 70
        assert b.bufmgr._settings.lock_wait_timeout_ms == 250  # what its waits use
    assert instance.settings.lock_wait_timeout_ms == 30000


def test_counters_of_closed_backends_are_kept(instance, make_table):
    rel = make_table(instance, "t", [("a", "integer")])
    total0 = instance.counters()
    with instance.connect() as b:
        for i in range(500):
            heap_insert(b, rel, (i,), xmin=1)
        mine = b.counters()
    assert mine["buffers_extended"] >= 2 and mine["buffers_hit"] > 0
    after = instance.counters()
    for name, value in mine.items():
        assert after[name] - total0[name] == value, name
    retired = instance.seg.stats[-1]
    assert retired.sum() >= sum(mine.values())


def test_close_writes_dirty_pages_and_checkpoint_counts_them(tmp_path, make_table, open_rel):
    data = tmp_path / "data"
    inst = Instance(data, shared_buffers=64)
    rel = make_table(inst, "t", [("a", "integer")])
    inst.checkpoint()  # the catalog's pages
    with inst.connect() as b:
        for i in range(3000):
            heap_insert(b, rel, (i,), xmin=1)
        npages = b.bufmgr.smgr.nblocks(rel.relfilenode)
    assert 1 < npages < 60  # everything still in the pool, dirty
    written = inst.checkpoint()
    assert written == npages + 1  # the heap pages and the FSM page
    assert inst.checkpoint() == 0
    with inst.connect() as b:
        heap_insert(b, rel, (3000,), xmin=1)  # dirty again: close must write it
    inst.close()
    with Instance(data, shared_buffers=16) as inst:
        with inst.connect() as b:
            assert count_rows(b, open_rel(inst, "t")) == 3001
