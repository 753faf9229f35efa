"""Crash tests with DDL in the workload: the catalog (heap tables), the relation files and
the data after recovery equal the model of what committed.

A workload of CREATE TABLE / DROP TABLE / TRUNCATE / CREATE INDEX mixed with inserts,
updates and deletes runs through the DB-API, in transactions that commit or roll back, under
the crash-test file layer (``minidb.fileio.CrashFiles``: relation files, WAL segments, the
commit log's segments and the control file).  At a random write or fsync the power goes;
the directory is reopened (crash recovery), and then:

* the user tables and indexes the catalog names are exactly the model's (a transaction
  whose COMMIT was running at the crash may be either way);
* every table holds exactly the model's rows;
* ``check_catalog`` finds nothing: the catalog rows agree with each other and with the
  files - a relation created by a transaction the crash ended has no file left (no
  orphans), a dropped or truncated one's old file is gone, every named file exists;
* the heap and B-tree checkers pass on every table and index.
"""

from __future__ import annotations

import random

import pytest

import minidb
from minidb.catalog import check_catalog
from tests.wal.crashkit import check_database, power_loss

SETTINGS = dict(max_worker_processes=0, shared_buffers=32, wal_segment_size=1 << 20,
                wal_buffers=16)
NAMES = [f"t{i}" for i in range(5)]


def _copy(model: dict) -> dict:
    return {t: {"rows": dict(m["rows"]), "indexes": set(m["indexes"])} for t, m in model.items()}


def _step(cur, rng: random.Random, new: dict) -> None:
    r = rng.random()
    if r < 0.12 or not new:
        name = rng.choice(NAMES)
        if name in new:
            return
        cur.execute(f"create table {name} (k bigint primary key, v bigint, pad text)")
        new[name] = {"rows": {}, "indexes": {f"{name}_pkey"}}
        return
    name = rng.choice(sorted(new))
    t = new[name]
    if r < 0.18:
        cur.execute(f"drop table {name}")
        del new[name]
    elif r < 0.25:
        cur.execute(f"truncate {name}")
        t["rows"] = {}
    elif r < 0.32:
        iname = f"{name}_v"
        if iname not in t["indexes"]:
            cur.execute(f"create index {iname} on {name} (v)")
            t["indexes"].add(iname)
    elif r < 0.75:
        for _ in range(rng.randint(1, 8)):
            k = rng.randrange(2000)
            if k in t["rows"]:
                continue
            v, pad = rng.randrange(100), "p" * rng.randint(1, 200)
            cur.execute(f"insert into {name} values (?, ?, ?)", (k, v, pad))
            t["rows"][k] = (v, pad)
    elif r < 0.9 and t["rows"]:
        k = rng.choice(sorted(t["rows"]))
        v = rng.randrange(100)
        cur.execute(f"update {name} set v = ? where k = ?", (v, k))
        t["rows"][k] = (v, t["rows"][k][1])
    elif t["rows"]:
        k = rng.choice(sorted(t["rows"]))
        cur.execute(f"delete from {name} where k = ?", (k,))
        del t["rows"][k]


def _workload(conn, rng: random.Random, model: dict, state: dict, steps: int) -> None:
    cur = conn.cursor()
    for _ in range(steps):
        if rng.random() < 0.05:
            state["pending"] = None
            conn.commit()
            conn._instance.checkpoint()
            continue
        new = _copy(model)
        for _ in range(rng.randint(1, 4)):
            _step(cur, rng, new)
        if rng.random() < 0.2:
            conn.rollback()
            continue
        state["pending"] = new
        conn.commit()
        model.clear()
        model.update(new)
        state["pending"] = None


def _state_of(conn) -> dict:
    inst = conn._instance
    cur = conn.cursor()
    out = {}
    cat = inst.catalog
    for name in sorted(cat.tables):
        cur.execute(f"select k, v, pad from {name} order by k")
        out[name] = {"rows": {k: (v, pad) for k, v, pad in cur.fetchall()},
                     "indexes": {i for i, d in cat.indexes.items() if d.table == name}}
    conn.commit()
    return out


def _verify(d, model, pending) -> dict:
    conn = minidb.connect(d, **SETTINGS)
    try:
        got = _state_of(conn)
        ok = got == model or (pending is not None and got == pending)
        assert ok, (f"after recovery: tables {sorted(got)} "
                    f"{ {t: len(m['rows']) for t, m in got.items()} }, model "
                    f"{ {t: len(m['rows']) for t, m in model.items()} }")
        check_database(conn, {name: m["indexes"] for name, m in got.items()})
        return conn._instance.recovery_stats
    finally:
        conn.close()


def _crash_once(tmp_path, seed: int, steps: int = 40, crash_in_recovery: bool = False):
    rng = random.Random(seed)
    d = str(tmp_path / f"data{seed}")
    conn = minidb.connect(d, **SETTINGS)
    model: dict = {}
    state = {"pending": None}
    _workload(conn, rng, model, state, 8)        # some tables first, without faults
    return power_loss(conn, rng, lambda: _workload(conn, rng, model, state, steps),
                      lambda: _verify(d, model, state["pending"]),
                      within=300, crash_in_recovery=crash_in_recovery)


@pytest.mark.parametrize("seed", range(10))
def test_power_loss_with_ddl(tmp_path, seed):
    lost, stats = _crash_once(tmp_path, seed)
    assert lost["writes"] > 0
    assert stats["records"] > 0


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_power_loss_with_ddl_during_recovery(tmp_path, seed):
    _crash_once(tmp_path, seed, crash_in_recovery=True)


def test_uncommitted_create_leaves_no_file_after_a_crash(tmp_path):
    """A table created (file and all) by a transaction the crash ended is gone after
    recovery, file included; one created and committed is there with its rows."""
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    cur = conn.cursor()
    cur.execute("create table kept (k bigint primary key)")
    cur.execute("insert into kept values (1)")
    conn.commit()
    cur.execute("create table lost (k bigint primary key, v text)")
    cur.execute("insert into lost values (1, 'x')")
    inst = conn._instance
    with inst.connect() as b:
        from minidb.catalog.check import relation_files
        files_before = relation_files(b)
    inst.wal.flush(inst.wal.insert_lsn())   # the CREATE's records are on disk, no commit
    inst.crash_abandon()
    minidb.instance._SHARED.clear()
    conn = minidb.connect(d, **SETTINGS)
    inst = conn._instance
    try:
        assert sorted(inst.catalog.tables) == ["kept"]
        with inst.connect() as b:
            assert check_catalog(b) == []
            from minidb.catalog.check import relation_files
            after = relation_files(b)
        assert len(files_before - after) == 2          # the table's and its index's files
        assert len(inst.recovery_stats["orphans_removed"]) == 2
        cur = conn.cursor()
        cur.execute("select k from kept")
        assert cur.fetchall() == [(1,)]
    finally:
        conn.close()


@pytest.mark.long
@pytest.mark.parametrize("seed", range(200, 240))
def test_power_loss_with_ddl_long(tmp_path, seed):
    _crash_once(tmp_path, seed, steps=120, crash_in_recovery=seed % 3 == 0)


def test_committed_drop_is_redone_by_replay(tmp_path, monkeypatch):
    """The files a commit record lists are removed by replaying it: a DROP TABLE and a
    TRUNCATE commit (record flushed), the crash comes before their files are unlinked, and
    recovery (without its orphan sweep) removes them."""
    import minidb.catalog.storage as storage
    import minidb.instance
    d = str(tmp_path / "data")
    conn = minidb.connect(d, **SETTINGS)
    cur = conn.cursor()
    cur.execute("create table a (k bigint primary key)")
    cur.execute("create table b (k bigint primary key)")
    cur.execute("insert into b values (1), (2)")
    conn.commit()
    inst = conn._instance
    with inst.connect() as bk:
        from minidb.catalog.check import relation_files
        before = relation_files(bk)
    monkeypatch.setattr(storage, "drop_relation_storage", lambda backend, rfn: None)
    cur.execute("drop table a")
    cur.execute("truncate b")
    cur.execute("insert into b values (3)")
    conn.commit()
    with inst.connect() as bk:
        assert check_catalog(bk) != []     # the old files are still there: orphans
    inst.crash_abandon()
    monkeypatch.undo()
    minidb.instance._SHARED.clear()
    monkeypatch.setattr(minidb.instance, "remove_orphan_files", lambda inst: [])
    conn = minidb.connect(d, **SETTINGS)
    try:
        inst = conn._instance
        assert sorted(inst.catalog.tables) == ["b"]
        with inst.connect() as bk:
            assert check_catalog(bk) == []
            after = relation_files(bk)
        assert len(before - after) == 4   # a, a_pkey, and b's and b_pkey's old files
        cur = conn.cursor()
        cur.execute("select k from b")
        assert cur.fetchall() == [(3,)]
    finally:
        conn.close()
