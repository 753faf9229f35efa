"""The catalog: tables persisted atomically in ``catalog.json``, seen by every process.

What is proven here:
  * create and drop are persisted (the file is rewritten, a reopen sees them), relfilenodes
    are never reused, the relation file exists for a created table;
  * DuplicateTable / UndefinedTable with PostgreSQL's SQLSTATEs, and a failed change (an error
    inside ``change()``, a crash while writing the new file) leaves file and memory as before;
  * a forked child sees a table its parent created after the fork, and the parent sees one
    the child created (the shared generation counter), and rows flow both ways.

Not proven: concurrent DDL from many processes at once (the catalog lock serializes it).
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np
import pytest

from minidb import catalog as catalog_mod
from minidb.catalog import CATALOG_FILE, ColumnDef
from minidb.errors import DuplicateTable, UndefinedTable
from minidb.heap.check import check_heap
from minidb.heap.heapam import HeapScan, heap_insert
from minidb.instance import Instance
from minidb.shmem import CTL_CATALOG_GEN

COLS = [ColumnDef("id", "bigint", not_null=True), ColumnDef("name", "varchar(20)"),
        ColumnDef("ts", "timestamp", default="now()")]


def read_catalog_file(inst) -> dict:
    with open(os.path.join(inst.datadir, CATALOG_FILE)) as f:
        return json.load(f)


def test_create_and_drop_persist(tmp_path):
    data = tmp_path / "data"
    with Instance(data, shared_buffers=16) as inst:
        gen0 = int(inst.seg.control[CTL_CATALOG_GEN])
        t = inst.catalog.create_table("accounts", COLS)
        assert int(inst.seg.control[CTL_CATALOG_GEN]) == gen0 + 1
        assert os.path.exists(inst.smgr.path(t.relfilenode))
        on_disk = read_catalog_file(inst)
        assert on_disk["tables"]["accounts"]["relfilenode"] == t.relfilenode
        assert [c["name"] for c in on_disk["tables"]["accounts"]["columns"]] == [
            "id", "name", "ts"]
        assert not os.path.exists(os.path.join(inst.datadir, CATALOG_FILE + ".tmp"))
        inst.catalog.create_table("gone", [ColumnDef("x", "integer")])
        inst.catalog.set_stats("accounts", 12, 345.0)
        assert inst.describe_rel(t.relfilenode) == f'"accounts" (file base/{t.relfilenode})'
    with Instance(data, shared_buffers=16) as inst:
        t2 = inst.catalog.table("accounts")
        assert t2.relfilenode == t.relfilenode and t2.oid == t.oid
        assert t2.columns == COLS
        assert (t2.relpages, t2.reltuples) == (12, 345.0)
        gone = inst.catalog.drop_table("gone")
        assert "gone" not in read_catalog_file(inst)["tables"]
        new = inst.catalog.create_table("gone", [ColumnDef("x", "integer")])
        assert new.relfilenode not in (gone.relfilenode, t.relfilenode)  # never reused
    with Instance(data, shared_buffers=16) as inst:
        assert sorted(inst.catalog.tables) == ["accounts", "gone"]
        assert inst.catalog.table("gone").relfilenode == new.relfilenode


def test_duplicate_and_undefined_tables(instance):
    cat = instance.catalog
    cat.create_table("t", COLS)
    before = read_catalog_file(instance)
    with pytest.raises(DuplicateTable, match='relation "t" already exists') as ei:
        cat.create_table("t", [ColumnDef("other", "integer")])
    assert ei.value.sqlstate == "42P07"
    assert read_catalog_file(instance) == before
    assert cat.table("t").columns == COLS
    with pytest.raises(UndefinedTable, match='relation "nope" does not exist') as ei:
        cat.table("nope")
    assert ei.value.sqlstate == "42P01"
    with pytest.raises(UndefinedTable, match='"nope" does not exist'):
        cat.drop_table("nope")
    assert read_catalog_file(instance) == before


def test_failed_change_leaves_file_and_memory_as_before(instance, monkeypatch):
    cat = instance.catalog
    cat.create_table("keep", COLS)
    before = read_catalog_file(instance)
    gen = int(instance.seg.control[CTL_CATALOG_GEN])

    # an error inside the change block: forgotten
    with pytest.raises(RuntimeError):
        with cat.change():
            cat.tables.pop("keep")
            raise RuntimeError("boom")
    assert "keep" in cat.tables

    # a crash half-way through writing the new file: the old file stays in place
    real_dump = json.dump

    def dump_then_die(obj, f, **kw):
        f.write(json.dumps(obj, **kw)[:50])
        raise OSError("disk full")

    monkeypatch.setattr(catalog_mod.json, "dump", dump_then_die)
    with pytest.raises(OSError, match="disk full"):
        cat.create_table("half", [ColumnDef("x", "integer")])
    monkeypatch.setattr(catalog_mod.json, "dump", real_dump)
    assert read_catalog_file(instance) == before
    assert int(instance.seg.control[CTL_CATALOG_GEN]) == gen
    assert sorted(cat.tables) == ["keep"]
    with pytest.raises(UndefinedTable):
        cat.table("half")
    # and the catalog keeps working; the half-made table's oid may be spent, not reused
    t = cat.create_table("half", [ColumnDef("x", "integer")])
    assert t.relfilenode != cat.table("keep").relfilenode
    assert "half" in read_catalog_file(instance)["tables"]


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
    # error messages name the child's table before anything else refreshed the catalog
    rfn_child = json.load(open(os.path.join(instance.datadir, CATALOG_FILE)))[
        "tables"]["made_by_child"]["relfilenode"]
    assert instance.describe_rel(rfn_child) == f'"made_by_child" (file base/{rfn_child})'
    made = instance.catalog.table("made_by_child")  # refreshed through the generation
    assert [c.name for c in made.columns] == ["k"]
    assert os.path.exists(instance.smgr.path(made.relfilenode))
    assert made.relfilenode != instance.catalog.table("made_by_parent").relfilenode
    rel = open_rel(instance, "made_by_parent")
    with instance.connect() as b:
        ids = np.concatenate([batch.columns[0][0] for batch in HeapScan(b, rel, [0])])
        assert sorted(ids.tolist()) == list(range(50))
        assert check_heap(b, rel) == 50


def test_orphan_relation_file_does_not_block_create_table(instance):
    """A crash between creating a table's file and saving the catalog leaves a file no table
    names; its oid must be skipped, not make every later CREATE TABLE fail."""
    cat = instance.catalog
    cat.create_table("first", [ColumnDef("x", "integer")])
    orphan = cat.next_oid
    with open(instance.smgr.path(orphan), "wb") as f:
        f.write(b"left by a crash")
    t = cat.create_table("second", [ColumnDef("x", "integer")])
    assert t.relfilenode > orphan
    with open(instance.smgr.path(orphan), "rb") as f:
        assert f.read() == b"left by a crash"  # not ours to touch
