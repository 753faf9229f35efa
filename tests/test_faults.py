"""Damaged files and unsafe inputs give clear errors; users get COPY through the client and
checkers of their own.

What is proven here:
  * COPY to or from a server file is refused (42501) unless the instance was opened with
    ``allow_server_files``, and a file inside the data directory is refused even then
    (the catalog stays intact); COPY FROM STDIN / TO STDOUT through ``cursor.copy()`` and
    the shell's ``\\copy`` need nothing and round-trip rows, NULLs included;
  * ``minidb check DATADIR`` exits 0 on a sound directory and 2 with the damaged relation
    named when a heap page is damaged; ``\\check`` prints the same summary;
  * a heap file truncated to half: index lookups of lost keys give XX001 "could not read
    block N in file ..." (never an empty answer), a sequential scan reads what is left (as
    PostgreSQL's does), and ``minidb check`` reports the index;
  * a deleted ``global/pg_control`` refuses to open (58P01) instead of reusing transaction
    ids, a damaged one (CRC) refuses too;
    a lock file the process may not open gives 42501, not a traceback.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

import minidb
import minidb.instance
from minidb import errors
from minidb.instance import Instance
from minidb.repl import Repl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minidb.instance.__file__)))


def run_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minidb.cli", *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=ROOT))


def make_db(path, n: int = 2000, **settings):
    conn = minidb.connect(str(path), max_worker_processes=0, **settings)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (k int PRIMARY KEY, s text)")
    cur.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"row {i:05d} " + "x" * 40)
                                                    for i in range(n)])
    conn.commit()
    return conn


# -- COPY ------------------------------------------------------------------------------------------

def test_copy_server_files_need_the_setting_and_never_the_data_directory(tmp_path):
    data = tmp_path / "data"
    conn = make_db(data, n=5)
    cur = conn.cursor()
    conn.autocommit = True
    out = tmp_path / "out.txt"
    for sql, verb in ((f"COPY t TO '{out}'", "to"), (f"COPY t FROM '{out}'", "from")):
        with pytest.raises(errors.InsufficientPrivilege,
                           match=f"permission denied to COPY {verb} a file") as e:
            cur.execute(sql)
        assert e.value.sqlstate == "42501" and "allow_server_files" in str(e.value)
    assert not out.exists()
    conn.close()
    conn = minidb.connect(str(data), allow_server_files=True, max_worker_processes=0)
    conn.autocommit = True
    cur = conn.cursor()
    before = sorted(os.listdir(data))
    for target in ("catalog.json", "base/1", "postmaster.pid", "sub/../pg_control"):
        with pytest.raises(errors.InsufficientPrivilege, match="inside the data directory"):
            cur.execute(f"COPY t TO '{data / target}'")
    assert sorted(os.listdir(data)) == before
    cur.execute(f"COPY t TO '{out}'")
    assert cur.statusmessage == "COPY 5" and out.read_text().count("\n") == 5
    cur.execute("SELECT count(*) FROM t")
    assert cur.fetchone() == (5,)  # the catalog is intact
    conn.close()


def test_cursor_copy_from_stdin_and_to_stdout(tmp_path):
    conn = make_db(tmp_path / "data", n=0)
    cur = conn.cursor()
    with cur.copy("COPY t (k, s) FROM STDIN") as copy:
        copy.write_row((1, "one"))
        copy.write_row((2, None))
        copy.write(b"3\ttab\\there\n")
    assert cur.rowcount == 3 and cur.statusmessage == "COPY 3"
    with pytest.raises(ZeroDivisionError):  # an error inside the block sends nothing
        with cur.copy("COPY t FROM STDIN") as copy:
            copy.write_row((4, "four"))
            1 / 0
    conn.commit()
    with cur.copy("COPY t TO STDOUT (FORMAT csv)") as copy:
        assert sorted(copy.rows()) == [("1", "one"), ("2", None), ("3", "tab\there")]
    with cur.copy("COPY t (k) TO STDOUT") as copy:
        assert sorted(copy) == [b"1\n", b"2\n", b"3\n"]
    with pytest.raises(errors.NotSupportedError, match="cursor.copy"):
        cur.execute("COPY t FROM STDIN")
    with pytest.raises(errors.ProgrammingError, match="FROM STDIN or COPY"):
        cur.copy("SELECT 1")
    conn.close()


def test_repl_backslash_copy_and_check(tmp_path, capsys):
    conn = make_db(tmp_path / "data", n=3)
    conn.autocommit = True
    out = tmp_path / "t.csv"
    r = Repl(conn)
    assert r.run_command(f"\\copy t TO '{out}' WITH (FORMAT csv)")
    assert out.read_text().splitlines() == [f"{i},row {i:05d} {'x' * 40}" for i in range(3)]
    conn.cursor().execute("DELETE FROM t")
    assert r.run_command(f"\\copy t (k, s) from {out} csv")
    assert r.run_command("\\check t")
    assert r.run_command("\\check")
    text = capsys.readouterr().out
    assert "COPY 3\nCOPY 3\n" in text
    # (the deleted versions are still on the pages: the heap checker counts them too)
    assert text.count("checked 1 table (6 tuples) and 1 index: no corruption found") == 2
    cur = conn.cursor()
    cur.execute("SELECT count(*) FROM t")
    assert cur.fetchone() == (3,)
    conn.close()


# -- checkers and damaged files -------------------------------------------------------------------

def test_minidb_check_and_a_heap_truncated_to_half(tmp_path):
    data = tmp_path / "data"
    conn = make_db(data)
    inst = conn._instance
    rfn = inst.catalog.table("t").relfilenode
    path = inst.smgr.path(rfn)
    conn.close()
    r = run_cli("check", str(data), "--verbose")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "checked 1 table (2000 tuples) and 1 index: no corruption found" in r.stdout
    nblocks = os.path.getsize(path) // 8192
    assert nblocks >= 4
    with open(path, "r+b") as f:
        f.truncate(nblocks // 2 * 8192)
    conn = minidb.connect(str(data), max_worker_processes=0)
    cur = conn.cursor()
    cur.execute("SELECT count(*) FROM t")  # a scan reads to the current end
    left = cur.fetchone()[0]
    assert 0 < left < 2000
    conn.rollback()
    cur.execute("SET enable_seqscan = off")
    with pytest.raises(errors.DataCorrupted, match=r"could not read block \d+ in file") as e:
        cur.execute("SELECT s FROM t WHERE k = 1999")
        cur.fetchall()
    assert e.value.sqlstate == "XX001" and path in str(e.value)
    conn.close()
    r = run_cli("check", str(data))
    assert r.returncode == 2, r.stdout + r.stderr
    assert 'btree index "t_pkey":' in r.stdout and "beyond the end of" in r.stdout
    assert "1 problem found" in r.stdout
    r = run_cli("check", str(tmp_path / "nothing"))
    assert r.returncode == 1 and "not a minidb data directory" in r.stderr


def test_missing_pg_control_refuses_to_open(tmp_path):
    data = tmp_path / "data"
    make_db(data, n=3).close()
    os.unlink(data / "global" / "pg_control")
    with pytest.raises(errors.OperationalError, match="lost its control file") as e:
        Instance(data, max_worker_processes=0)
    assert e.value.sqlstate == "58P01"
    assert not (data / "global" / "pg_control").exists()  # nothing was written
    Instance(tmp_path / "new", max_worker_processes=0).close()  # a new one has it at once
    assert (tmp_path / "new" / "global" / "pg_control").exists()


def test_damaged_pg_control_refuses_to_open(tmp_path):
    """The one control file (global/pg_control, with the WAL's checkpoint location and the
    next xid) fails its CRC: the directory does not open, and nothing is written."""
    data = tmp_path / "data"
    make_db(data, n=3).close()
    path = data / "global" / "pg_control"
    raw = bytearray(path.read_bytes())
    raw[40] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(errors.DataCorrupted, match="incorrect checksum in control file"):
        Instance(data, max_worker_processes=0)
    assert path.read_bytes() == bytes(raw)
    assert not (data / "pg_control").exists()  # no second control file


def test_unusable_data_directory_is_a_clear_error(tmp_path, monkeypatch):
    data = tmp_path / "data"
    Instance(data, max_worker_processes=0).close()
    real_open = os.open

    def denied(path, *a, **kw):
        if str(path).endswith("postmaster.pid"):
            raise PermissionError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, *a, **kw)
    monkeypatch.setattr(minidb.instance.os, "open", denied)
    with pytest.raises(errors.InsufficientPrivilege, match="Read-only file system") as e:
        Instance(data, max_worker_processes=0)
    assert e.value.sqlstate == "42501" and "postmaster.pid" in str(e.value)


def test_a_slot_freed_while_the_reaper_looks_is_no_crash(tmp_path):
    """The reaper reads a slot's pid after choosing the slot; a client that disconnects in
    between leaves 0 there.  Pid 0 holds no lock (a free lock's holder entry is 0), so the
    reaper must neither name every free lock as held nor raise the crash flag (a full run
    under load once did, with pgbench -C connecting per transaction)."""
    inst = Instance(str(tmp_path / "d"))
    try:
        assert inst.locks.held_by(0) == [] and inst.locks.held_by(-5) == []
        with inst.locks.stats:
            assert inst.locks.held_by(os.getpid()) == ["stats"]
        with inst.connect() as b:
            slot = b.slot
            inst.seg.proc_pid[slot] = 0      # what a disconnect leaves behind
            assert inst.reap_dead_backends() == []
            assert inst.locks.crashed() is None
            inst.seg.proc_pid[slot] = os.getpid()
    finally:
        inst.close()
