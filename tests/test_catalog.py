"""The catalog: heap tables (pg_class, pg_attribute, pg_index, pg_statistic) read through a
per-process cache, changed by ordinary transactions, seen by every process.

What is proven here:
  * create and drop are persisted (a reopen sees them), relfilenodes are not reused, the
    relation file exists for a created table and is gone after a committed drop; the shared
    invalidation counter moves at commit, not before;
  * DuplicateTable / UndefinedTable with PostgreSQL's SQLSTATEs; a failed change (an index
    build that raises) leaves no catalog row and no file;
  * a forked child sees a table its parent created after the fork, and the parent sees one
    the child created (the shared counter), and rows flow both ways;
  * a file no catalog row names does not block CREATE TABLE (its number is skipped);
  * the system catalogs are visible to SQL and cannot be dropped or truncated (42501);
  * bad directories: an old one with catalog.json is refused naming the format; one whose
    pg_class file is missing is refused; a pg_class page that fails its checksum is an
    error naming pg_class; the data directory is 0700 and its files 0600.
"""

from __future__ import annotations

import os
import stat
import traceback

import numpy as np
import pytest

import minidb
from minidb.catalog import ColumnDef, check_catalog, relation_files
from minidb.errors import (DataCorrupted, DuplicateTable, InsufficientPrivilege, OperationalError,
                           UndefinedTable)
from minidb.heap.check import check_heap
from minidb.heap.heapam import HeapScan, heap_insert
from minidb.instance import VERSION_FILE, Instance
from minidb.shmem import CTL_CATALOG_GEN, CTL_NEXT_OID

COLS = [ColumnDef("id", "bigint", not_null=True), ColumnDef("name", "varchar(20)"),
        ColumnDef("ts", "timestamp", default="now()")]


def problems(inst) -> list[str]:
    with inst.connect() as b:
        return check_catalog(b)


def test_create_and_drop_persist(tmp_path):
    data = tmp_path / "data"
    with Instance(data, shared_buffers=16) as inst:
        gen0 = int(inst.seg.control[CTL_CATALOG_GEN])
        t = inst.catalog.create_table("accounts", COLS)
        assert int(inst.seg.control[CTL_CATALOG_GEN]) == gen0 + 1
        assert os.path.exists(inst.smgr.path(t.relfilenode))
        assert t.oid >= 16384 and t.relfilenode == t.oid
        inst.catalog.create_table("gone", [ColumnDef("x", "integer")])
        inst.catalog.set_stats("accounts", 12, 345.0)
        assert inst.describe_rel(t.relfilenode) == f'"accounts" (file base/{t.relfilenode})'
        assert problems(inst) == []
    with Instance(data, shared_buffers=16) as inst:
        t2 = inst.catalog.table("accounts")
        assert t2.relfilenode == t.relfilenode and t2.oid == t.oid
        assert t2.columns == COLS
        assert (t2.relpages, t2.reltuples) == (12, 345.0)
        gone = inst.catalog.drop_table("gone")
        assert not os.path.exists(inst.smgr.path(gone.relfilenode))
        new = inst.catalog.create_table("gone", [ColumnDef("x", "integer")])
        assert new.relfilenode not in (gone.relfilenode, t.relfilenode)
    with Instance(data, shared_buffers=16) as inst:
        assert sorted(inst.catalog.tables) == ["accounts", "gone"]
        assert inst.catalog.table("gone").relfilenode == new.relfilenode
        assert problems(inst) == []


def test_invalidation_at_commit_only(instance):
    gen0 = int(instance.seg.control[CTL_CATALOG_GEN])
    with instance.connect() as a, instance.connect() as b:
        a.xact.begin()
        a.catalog.create_table("mine", COLS)
        assert "mine" in a.catalog.tables
        assert int(instance.seg.control[CTL_CATALOG_GEN]) == gen0
        assert "mine" not in b.catalog.tables and "mine" not in instance.catalog.tables
        a.xact.commit()
        assert int(instance.seg.control[CTL_CATALOG_GEN]) == gen0 + 1
        assert "mine" in b.catalog.tables and "mine" in instance.catalog.tables


def test_duplicate_and_undefined_tables(instance):
    cat = instance.catalog
    cat.create_table("t", COLS)
    with pytest.raises(DuplicateTable, match='relation "t" already exists') as ei:
        cat.create_table("t", [ColumnDef("other", "integer")])
    assert ei.value.sqlstate == "42P07"
    assert cat.table("t").columns == COLS
    with pytest.raises(UndefinedTable, match='relation "nope" does not exist') as ei:
        cat.table("nope")
    assert ei.value.sqlstate == "42P01"
    with pytest.raises(UndefinedTable, match='"nope" does not exist'):
        cat.drop_table("nope")
    with pytest.raises(DuplicateTable):
        cat.create_table("pg_class", COLS)
    assert problems(instance) == []


def test_failed_index_build_leaves_no_row_and_no_file(instance):
    cat = instance.catalog
    cat.create_table("keep", COLS)
    with instance.connect() as b:
        files = relation_files(b)
    gen = int(instance.seg.control[CTL_CATALOG_GEN])

    def build(idef):
        assert os.path.exists(instance.smgr.path(idef.relfilenode))
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cat.create_index("keep_id", "keep", ["id"], build=build)
    assert "keep_id" not in cat.indexes
    with instance.connect() as b:
        assert relation_files(b) == files
    assert int(instance.seg.control[CTL_CATALOG_GEN]) == gen
    assert problems(instance) == []


def _child(inst, r_go: int, w_done: int) -> None:
    """Forked child: wait for the parent's table, use it, create one of its own."""
    code = 1
    try:
        assert os.read(r_go, 1) == b"1"
        t = inst.catalog.table("made_by_parent")  # created after the fork
        from minidb.heap.heapam import HeapRel
        from minidb.heap.layout import Column, RowLayout
        rel = HeapRel(t.name, t.relfilenode,
                      RowLayout([Column(c.name, c.type) for c in t.columns]))
        with inst.connect() as b:
            for i in range(50):
                heap_insert(b, rel, (i, f"child {i}", None), xmin=3)
        inst.catalog.create_table("made_by_child", [ColumnDef("k", "integer")])
        os.write(w_done, b"ok")
        code = 0
    except BaseException:
        os.write(w_done, traceback.format_exc().encode())
    finally:
        os._exit(code)


def test_forked_child_and_parent_see_each_others_tables(instance, open_rel):
    r_go, w_go = os.pipe()
    r_done, w_done = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(instance, r_go, w_done)
    os.close(r_go)
    os.close(w_done)
    try:
        instance.catalog.create_table("made_by_parent", COLS)
        os.write(w_go, b"1")
        msg = b""
        while chunk := os.read(r_done, 65536):
            msg += chunk
    finally:
        os.close(w_go)
        os.close(r_done)
        _, status = os.waitpid(pid, 0)
    assert msg == b"ok", msg.decode()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    made = instance.catalog.table("made_by_child")  # refreshed through the counter
    assert [c.name for c in made.columns] == ["k"]
    assert instance.describe_rel(made.relfilenode) == (
        f'"made_by_child" (file base/{made.relfilenode})')
    assert os.path.exists(instance.smgr.path(made.relfilenode))
    assert made.relfilenode != instance.catalog.table("made_by_parent").relfilenode
    rel = open_rel(instance, "made_by_parent")
    with instance.connect() as b:
        ids = np.concatenate([batch.columns[0][0] for batch in HeapScan(b, rel, [0])])
        assert sorted(ids.tolist()) == list(range(50))
        assert check_heap(b, rel) == 50
    assert problems(instance) == []


def test_orphan_relation_file_does_not_block_create_table(instance):
    """A crash between creating a table's file and committing leaves a file no table
    names; its number must be skipped, not make every later CREATE TABLE fail."""
    cat = instance.catalog
    cat.create_table("first", [ColumnDef("x", "integer")])
    orphan = int(instance.seg.control[CTL_NEXT_OID])
    with open(instance.smgr.path(orphan), "wb") as f:
        f.write(b"left by a crash")
    t = cat.create_table("second", [ColumnDef("x", "integer")])
    assert t.relfilenode > orphan
    with open(instance.smgr.path(orphan), "rb") as f:
        assert f.read() == b"left by a crash"  # not ours to touch
    assert problems(instance) == [
        f"orphan relation file base/{orphan} (no catalog entry names it)"]


def test_system_catalogs_are_visible_and_protected(tmp_path):
    conn = minidb.connect(str(tmp_path / "d"))
    try:
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (a integer PRIMARY KEY, b text)")
        cur.execute("SELECT relname, relkind FROM pg_class WHERE oid >= 16384")
        assert sorted(cur.fetchall()) == [("t", "r"), ("t_pkey", "i")]
        cur.execute("SELECT attname, atttypid, attnum FROM pg_attribute, pg_class "
                    "WHERE attrelid = oid AND relname = 't'")
        assert sorted(cur.fetchall()) == [("a", 23, 1), ("b", 25, 2)]
        conn.commit()
        for sql in ("DROP TABLE pg_class", "TRUNCATE pg_attribute"):
            with pytest.raises(InsufficientPrivilege, match="system catalog") as ei:
                cur.execute(sql)
            assert ei.value.sqlstate == "42501"
            conn.rollback()
    finally:
        conn.close()


def test_old_catalog_json_directory_is_refused(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    (d / VERSION_FILE).write_text("minidb 1\n")
    (d / "catalog.json").write_text('{"next_oid": 16384, "tables": {}, "indexes": {}}')
    with pytest.raises(OperationalError, match=r'written by "minidb 1".*catalog\.json'):
        Instance(d)


def test_missing_catalog_file_is_refused(tmp_path):
    d = tmp_path / "d"
    Instance(d).close()
    os.unlink(d / "base" / "1259")
    with pytest.raises(OperationalError, match=r"pg_class \(base/1259\) is missing"):
        Instance(d)


def test_catalog_page_failing_its_checksum_names_the_catalog(tmp_path):
    d = tmp_path / "d"
    with Instance(d) as inst:
        inst.catalog.create_table("t", COLS)
    path = d / "base" / "1259"
    data = bytearray(path.read_bytes())
    data[8000] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DataCorrupted, match='pg_class'):
        Instance(d)


def test_data_directory_is_private(tmp_path):
    d = tmp_path / "d"
    with Instance(d) as inst:
        inst.catalog.create_table("t", COLS)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d / "base").st_mode) == 0o700
    for root, _dirs, files in os.walk(d):
        for f in files:
            mode = stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode)
            assert not mode & 0o077, (f, oct(mode))
