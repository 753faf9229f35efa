"""FOREIGN KEY constraints (``minidb.sql.fkeys``, ``minidb.exec.ri``): the DDL and its
errors, the checks on every write path, the actions, and a hypothesis model of parent /
child writes with each ON DELETE action."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minidb import errors


def _err(db, sql, cls, sqlstate):
    with pytest.raises(cls) as ei:
        db.x(sql)
    assert ei.value.sqlstate == sqlstate
    return str(ei.value)


def test_ddl_and_catalog(db):
    db.x("CREATE TABLE p (id int PRIMARY KEY, u int UNIQUE, w int)")
    db.x("CREATE TABLE c (id int, pid int REFERENCES p ON DELETE CASCADE, "
         "uid int CONSTRAINT c_u REFERENCES p (u) ON UPDATE SET NULL, "
         "FOREIGN KEY (id) REFERENCES p (id) ON DELETE RESTRICT ON UPDATE CASCADE)")
    rows = db.rows("SELECT conname, contype, conrelid::regclass, confrelid::regclass, "
                   "confupdtype, confdeltype, pg_get_constraintdef(oid) FROM pg_constraint "
                   "ORDER BY conname")
    assert rows == [
        ("c_id_fkey", "f", "c", "p", "c", "r",
         "FOREIGN KEY (id) REFERENCES p(id) ON UPDATE CASCADE ON DELETE RESTRICT"),
        ("c_pid_fkey", "f", "c", "p", "a", "c",
         "FOREIGN KEY (pid) REFERENCES p(id) ON DELETE CASCADE"),
        ("c_u", "f", "c", "p", "n", "a", "FOREIGN KEY (uid) REFERENCES p(u) ON UPDATE SET NULL"),
    ]
    cat = db.session.backend.catalog
    assert [f.name for f in cat.table("p").referenced_by] == ["c_id_fkey", "c_pid_fkey", "c_u"]
    # referenced columns without a unique index, no primary key, wrong counts, types
    msg = _err(db, "CREATE TABLE d (x int REFERENCES p (w))", errors.InvalidForeignKey, "42830")
    assert msg == 'there is no unique constraint matching given keys for referenced table "p"'
    db.x("CREATE TABLE nopk (a int)")
    msg = _err(db, "CREATE TABLE d (x int REFERENCES nopk)", errors.InvalidForeignKey, "42830")
    assert msg == 'there is no primary key for referenced table "nopk"'
    _err(db, "CREATE TABLE d (x int, FOREIGN KEY (x) REFERENCES p (id, u))",
         errors.InvalidForeignKey, "42830")
    msg = _err(db, "CREATE TABLE d (x text REFERENCES p)", errors.DatatypeMismatch, "42804")
    assert 'Key columns "x" and "id" are of incompatible types: text and integer.' in msg
    _err(db, "CREATE TABLE d (x int REFERENCES nosuch)", errors.UndefinedTable, "42P01")
    assert "d" not in cat.tables   # the failed CREATE left nothing
    # DROP TABLE of a referenced table: 2BP01 unless CASCADE, which drops the constraints
    msg = _err(db, "DROP TABLE p", errors.ProgrammingError, "2BP01")
    assert msg.startswith("cannot drop table p because other objects depend on it\n"
                          "DETAIL:  constraint c_id_fkey on table c depends on table p")
    assert "HINT:  Use DROP ... CASCADE" in msg
    _err(db, "TRUNCATE p", errors.NotSupportedError, "0A000")
    db.x("INSERT INTO p VALUES (1, 1, 1)")
    db.x("INSERT INTO c VALUES (1, 1, 1)")
    res = db.x("TRUNCATE p CASCADE")
    assert res.messages and 'truncate cascades to table "c"' in res.messages[0]
    assert db.rows("SELECT count(*) FROM c") == [(0,)]
    db.x("TRUNCATE p, c")
    _err(db, "ALTER TABLE p RENAME TO q", errors.NotSupportedError, "0A000")
    _err(db, "ALTER TABLE c DROP COLUMN pid", errors.NotSupportedError, "0A000")
    msg = _err(db, "ALTER TABLE p DROP CONSTRAINT p_pkey", errors.ProgrammingError, "2BP01")
    assert msg.startswith("cannot drop constraint p_pkey on table p because other objects "
                          "depend on it\nDETAIL:  constraint c_id_fkey on table c depends on "
                          "index p_pkey")
    _err(db, "DROP INDEX p_u_key", errors.ProgrammingError, "2BP01")
    db.x("CREATE UNIQUE INDEX p_u2 ON p (u)")
    db.x("DROP INDEX p_u_key")                  # another unique index on u serves c_u
    db.x("ALTER TABLE p DROP CONSTRAINT p_u2 CASCADE")
    assert [f.name for f in cat.table("p").referenced_by] == ["c_id_fkey", "c_pid_fkey"]
    res = db.x("DROP TABLE p CASCADE")
    assert "drop cascades to constraint c_pid_fkey on table c" in " ".join(res.messages)
    assert db.rows("SELECT count(*) FROM pg_constraint") == [(0,)]
    assert cat.table("c").foreign_keys == []


def test_checks_on_every_write_path(db, tmp_path):
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE c (id int, pid int REFERENCES p)")
    db.x("INSERT INTO p SELECT g FROM generate_series(1, 40) g")
    db.x("INSERT INTO c VALUES (1, 1), (2, NULL)")      # NULL: MATCH SIMPLE, no check
    msg = _err(db, "INSERT INTO c VALUES (3, 41)", errors.ForeignKeyViolation, "23503")
    assert msg == ('insert or update on table "c" violates foreign key constraint "c_pid_fkey"'
                   '\nDETAIL:  Key (pid)=(41) is not present in table "p".')
    _err(db, "UPDATE c SET pid = 99 WHERE id = 1", errors.ForeignKeyViolation, "23503")
    db.x("UPDATE c SET pid = 2 WHERE id = 1")
    # the bulk paths: many-row VALUES, INSERT ... SELECT, executemany, COPY
    vals = ", ".join(f"({i}, {i % 40 + 1})" for i in range(100))
    db.x(f"INSERT INTO c VALUES {vals}")
    _err(db, f"INSERT INTO c VALUES {vals}, (7, 77)", errors.ForeignKeyViolation, "23503")
    _err(db, "INSERT INTO c SELECT g, g FROM generate_series(1, 2500) g",
         errors.ForeignKeyViolation, "23503")
    db.x("INSERT INTO c SELECT g, g % 40 + 1 FROM generate_series(1, 2500) g")
    assert db.one("SELECT count(*) FROM c") == 2602
    with pytest.raises(errors.ForeignKeyViolation):
        db.engine.executemany("INSERT INTO c VALUES (?, ?)", [(i, i) for i in range(1, 60)])
    bad = tmp_path / "c.csv"
    bad.write_text("".join(f"{i},{i % 41 + 1}\n" for i in range(3000)))
    msg = _err(db, f"COPY c FROM '{bad}' (FORMAT csv)", errors.ForeignKeyViolation, "23503")
    assert "Key (pid)=(41)" in msg
    good = tmp_path / "g.csv"
    good.write_text("".join(f"{i},{i % 40 + 1}\n" for i in range(3000)))
    db.x(f"COPY c FROM '{good}' (FORMAT csv)")
    assert db.one("SELECT count(*) FROM c") == 5602
    # a parent and its child in one statement (self reference), then one without its parent
    db.x("CREATE TABLE tree (id int PRIMARY KEY, up int REFERENCES tree)")
    db.x("INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2)")
    _err(db, "INSERT INTO tree VALUES (4, 5)", errors.ForeignKeyViolation, "23503")


def test_actions(db):
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE cas (id int, pid int REFERENCES p ON DELETE CASCADE ON UPDATE CASCADE)")
    db.x("CREATE TABLE nul (id int, pid int REFERENCES p ON DELETE SET NULL ON UPDATE SET NULL)")
    db.x("CREATE TABLE def (id int, pid int DEFAULT 0 REFERENCES p ON DELETE SET DEFAULT "
         "ON UPDATE SET DEFAULT)")
    db.x("CREATE TABLE res (id int, pid int REFERENCES p ON DELETE RESTRICT)")
    db.x("CREATE TABLE noa (id int, pid int REFERENCES p)")
    db.x("INSERT INTO p VALUES (0), (1), (2), (3), (4)")
    for t in ("cas", "nul", "def"):
        db.x(f"INSERT INTO {t} VALUES (1, 1), (2, 2), (3, 2)")
    db.x("INSERT INTO res VALUES (1, 3)")
    db.x("INSERT INTO noa VALUES (1, 4)")
    db.x("DELETE FROM p WHERE id = 2")
    assert db.rows("SELECT * FROM cas ORDER BY id") == [(1, 1)]
    assert db.rows("SELECT * FROM nul ORDER BY id") == [(1, 1), (2, None), (3, None)]
    assert db.rows("SELECT * FROM def ORDER BY id") == [(1, 1), (2, 0), (3, 0)]
    db.x("UPDATE p SET id = 10 WHERE id = 1")
    assert db.rows("SELECT * FROM cas ORDER BY id") == [(1, 10)]
    assert db.rows("SELECT * FROM nul ORDER BY id") == [(1, None), (2, None), (3, None)]
    assert db.rows("SELECT * FROM def ORDER BY id") == [(1, 0), (2, 0), (3, 0)]
    msg = _err(db, "DELETE FROM p WHERE id = 3", errors.ForeignKeyViolation, "23503")
    assert msg == ('update or delete on table "p" violates foreign key constraint '
                   '"res_pid_fkey" on table "res"\nDETAIL:  Key (id)=(3) is still referenced '
                   'from table "res".')
    _err(db, "UPDATE p SET id = 44 WHERE id = 4", errors.ForeignKeyViolation, "23503")
    _err(db, "DELETE FROM p WHERE id = 0", errors.ForeignKeyViolation, "23503")  # def's rows
    assert db.rows("SELECT id FROM p ORDER BY id") == [(0,), (3,), (4,), (10,)]
    # a cascade through two levels, and into a table with an index on its key
    db.x("CREATE TABLE a (id int PRIMARY KEY)")
    db.x("CREATE TABLE b (id int PRIMARY KEY, aid int REFERENCES a ON DELETE CASCADE)")
    db.x("CREATE INDEX ON b (aid)")
    db.x("CREATE TABLE c (id int, bid int REFERENCES b ON DELETE CASCADE)")
    db.x("INSERT INTO a VALUES (1), (2)")
    db.x("INSERT INTO b VALUES (10, 1), (11, 1), (20, 2)")
    db.x("INSERT INTO c VALUES (100, 10), (101, 11), (200, 20)")
    assert db.x("DELETE FROM a WHERE id = 1").rowcount == 1
    assert db.rows("SELECT * FROM b") == [(20, 2)]
    assert db.rows("SELECT * FROM c") == [(200, 20)]


def test_alter_add_validates(db):
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE c (pid int)")
    db.x("INSERT INTO p VALUES (1)")
    db.x("INSERT INTO c VALUES (1), (NULL), (2)")
    msg = _err(db, "ALTER TABLE c ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES p",
               errors.ForeignKeyViolation, "23503")
    assert msg.endswith('Key (pid)=(2) is not present in table "p".')
    assert db.session.backend.catalog.table("c").foreign_keys == []
    db.x("DELETE FROM c WHERE pid = 2")
    db.x("ALTER TABLE c ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE")
    db.x("DELETE FROM p")
    assert db.rows("SELECT * FROM c") == [(None,)]
    db.x("ALTER TABLE c DROP CONSTRAINT fk")
    db.x("INSERT INTO c VALUES (5)")


def test_rollback_keeps_everything(db, dumper):
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE c (id int, pid int REFERENCES p ON DELETE CASCADE)")
    db.x("CREATE TABLE r (id int, pid int REFERENCES p ON DELETE RESTRICT)")
    db.x("INSERT INTO p VALUES (1), (2)")
    db.x("INSERT INTO c VALUES (1, 1), (2, 2)")
    db.x("INSERT INTO r VALUES (1, 2)")
    before = dumper(db)
    # the cascade into c happened before the RESTRICT of r failed: all of it goes
    _err(db, "DELETE FROM p", errors.ForeignKeyViolation, "23503")
    assert dumper(db) == before


# -- a model: parent keys, children with each ON DELETE action -------------------------------
_ACTIONS = {"k_cascade": "CASCADE", "k_setnull": "SET NULL", "k_restrict": "RESTRICT",
            "k_noaction": "NO ACTION"}
_ops = st.lists(st.one_of(
    st.tuples(st.just("parent"), st.integers(0, 5)),
    st.tuples(st.just("child"), st.sampled_from(sorted(_ACTIONS)), st.integers(0, 6)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("rekey"), st.integers(0, 5), st.integers(0, 7)),
), max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=_ops)
def test_model(inst, ops):
    from tests.sql.conftest import DB
    db = DB(inst)
    try:
        db.x("DROP TABLE IF EXISTS k_cascade, k_setnull, k_restrict, k_noaction, p")
        db.x("CREATE TABLE p (id int PRIMARY KEY)")
        for t, a in _ACTIONS.items():
            db.x(f"CREATE TABLE {t} (n int, pid int REFERENCES p ON DELETE {a})")
        parents: set = set()
        kids = {t: [] for t in _ACTIONS}       # [(n, pid)]
        n = 0
        for op in ops:
            if op[0] == "parent":
                if op[1] in parents:
                    with pytest.raises(errors.UniqueViolation):
                        db.x("INSERT INTO p VALUES (?)", op[1])
                else:
                    db.x("INSERT INTO p VALUES (?)", op[1])
                    parents.add(op[1])
            elif op[0] == "child":
                _, t, k = op
                n += 1
                if k in parents:
                    db.x(f"INSERT INTO {t} VALUES (?, ?)", n, k)
                    kids[t].append((n, k))
                else:
                    with pytest.raises(errors.ForeignKeyViolation):
                        db.x(f"INSERT INTO {t} VALUES (?, ?)", n, k)
            else:
                k = op[1]
                if k not in parents:
                    continue
                used = any(pid == k for t in ("k_restrict", "k_noaction") for _, pid in kids[t])
                sql = ("DELETE FROM p WHERE id = ?" if op[0] == "delete"
                       else "UPDATE p SET id = ? WHERE id = ?")
                args = (k,) if op[0] == "delete" else (op[2], k)
                if op[0] == "rekey" and op[2] != k and op[2] in parents:
                    with pytest.raises(errors.UniqueViolation):
                        db.x(sql, *args)
                    continue
                if op[0] == "rekey" and op[2] == k:
                    db.x(sql, *args)
                    continue
                # a key change is a delete of the old key for children (ON UPDATE NO ACTION)
                used = used or (op[0] == "rekey" and any(
                    pid == k for t in ("k_cascade", "k_setnull") for _, pid in kids[t]))
                if used:
                    with pytest.raises(errors.ForeignKeyViolation):
                        db.x(sql, *args)
                    continue
                db.x(sql, *args)
                parents.discard(k)
                if op[0] == "rekey":
                    parents.add(op[2])
                kids["k_cascade"] = [(m, pid) for m, pid in kids["k_cascade"] if pid != k]
                kids["k_setnull"] = [(m, None if pid == k else pid)
                                     for m, pid in kids["k_setnull"]]
            assert sorted(r[0] for r in db.rows("SELECT id FROM p")) == sorted(parents)
        for t in _ACTIONS:
            got = sorted(db.rows(f"SELECT n, pid FROM {t}"))
            assert got == sorted(kids[t]), t
    finally:
        db.close()


# -- two sessions ----------------------------------------------------------------------------
def _two(db, db2):
    from tests.txn.txn_steps import Step, poll, wait_blocked
    db.x("CREATE TABLE p (id int PRIMARY KEY, v int)")
    db.x("CREATE TABLE c (id int, pid int REFERENCES p)")
    db.x("INSERT INTO p VALUES (1, 0), (2, 0)")
    return Step, poll, wait_blocked


@pytest.mark.parametrize("end", ["COMMIT", "ROLLBACK"])
def test_parent_delete_waits_for_child_inserter(db, db2, end):
    """The child's insert locked its parent row: a DELETE of the parent waits for the
    inserting transaction; after its COMMIT the delete fails (the child is there), after
    its ROLLBACK it succeeds."""
    Step, poll, wait_blocked = _two(db, db2)
    db.x("BEGIN")
    db.x("INSERT INTO c VALUES (1, 1)")
    xid = db.session.xact.xid
    s = Step(lambda: db2.x("DELETE FROM p WHERE id = 1"))
    wait_blocked(db.inst, db2.session, s, xid)
    db.x(end)
    if end == "COMMIT":
        with pytest.raises(errors.ForeignKeyViolation):
            s.join()
        assert db.rows("SELECT id FROM p ORDER BY id") == [(1,), (2,)]
    else:
        assert s.join().rowcount == 1
        assert db.rows("SELECT id FROM p ORDER BY id") == [(2,)]


def test_child_insert_waits_for_parent_deleter(db, db2):
    """A parent row being deleted: the child's check waits, then finds it gone (23503)."""
    Step, poll, wait_blocked = _two(db, db2)
    db.x("BEGIN")
    db.x("DELETE FROM p WHERE id = 2")
    xid = db.session.xact.xid
    s = Step(lambda: db2.x("INSERT INTO c VALUES (1, 2)"))
    wait_blocked(db.inst, db2.session, s, xid)
    db.x("COMMIT")
    with pytest.raises(errors.ForeignKeyViolation):
        s.join()


def test_deadlock_detected_not_hung(inst):
    """Each session inserted a child of one parent, then deletes the other's parent: a
    cycle through two row-lock waits; one of them is the victim (40P01)."""
    from tests.sql.conftest import DB
    from tests.txn.txn_steps import Step, poll
    a, b = DB(inst, deadlock_timeout=20), DB(inst, deadlock_timeout=20)
    try:
        _two(a, b)
        a.x("BEGIN")
        b.x("BEGIN")
        a.x("INSERT INTO c VALUES (1, 1)")
        b.x("INSERT INTO c VALUES (2, 2)")
        sa = Step(lambda: a.x("DELETE FROM p WHERE id = 2"))
        poll(lambda: int(inst.seg.proc_wait_xid[a.session.backend.slot]) != 0, "a waits", sa)
        sb = Step(lambda: b.x("DELETE FROM p WHERE id = 1"))
        poll(lambda: sa.done or sb.done, "a victim")
        victim, ve, other, oe = (sa, a, sb, b) if sa.done else (sb, b, sa, a)
        with pytest.raises(errors.DeadlockDetected) as ei:
            victim.join()
        assert ei.value.sqlstate == "40P01"
        ve.x("ROLLBACK")
        # the survivor's delete finds the victim's child gone with its rollback
        assert other.join().rowcount == 1
        oe.x("COMMIT")
    finally:
        a.close()
        b.close()


# -- FOR KEY SHARE: several lockers of one row at once (minidb.txn.multixact) -----------------
def _lockers(db, table, key):
    from minidb.heap.multixact import key_share_lockers
    b = db.session.backend
    rel = b.catalog.heap_rel(table)
    (tid, row), = db.session.select_tids(table, lambda r: r[0] == key)
    from minidb.heap.modify import heap_fetch_raw
    return sorted(key_share_lockers(b, rel, tid, heap_fetch_raw(b, rel, tid)[0]["xmin"]))


def _three(inst):
    from tests.sql.conftest import DB
    return [DB(inst, deadlock_timeout=50) for _ in range(3)]


@pytest.mark.parametrize("ends", [("COMMIT", "ROLLBACK"), ("ROLLBACK", "ROLLBACK")])
def test_two_key_share_lockers_at_once(inst, ends):
    from tests.txn.txn_steps import Step, wait_blocked
    a, b, d = _three(inst)
    try:
        _two(a, b)
        a.x("BEGIN")
        a.x("INSERT INTO c VALUES (1, 1)")
        b.x("BEGIN")
        b.x("INSERT INTO c VALUES (2, 1)")         # not blocked by a's lock on p(1)
        xa, xb = a.session.xact.xid, b.session.xact.xid
        assert _lockers(d, "p", 1) == sorted([xa, xb])
        s = Step(lambda: d.x("DELETE FROM p WHERE id = 1"))
        wait_blocked(inst, d.session, s, xa)       # the delete waits for both lockers
        a.x(ends[0])
        wait_blocked(inst, d.session, s, xb)
        b.x(ends[1])
        if ends[0] == "COMMIT":                    # a's child is there: the delete fails
            with pytest.raises(errors.ForeignKeyViolation):
                s.join()
        else:
            assert s.join().rowcount == 1
    finally:
        for x in (a, b, d):
            x.close()


def test_non_key_update_does_not_wait_and_keeps_the_lock(inst):
    """FOR KEY SHARE does not conflict with an UPDATE that leaves the key alone (PostgreSQL
    9.3's FOR NO KEY UPDATE); the lock follows the row to its new version, and stays on the
    old one if that update rolls back."""
    from tests.txn.txn_steps import Step, wait_blocked
    a, b, d = _three(inst)
    try:
        _two(a, b)
        a.x("BEGIN")
        a.x("INSERT INTO c VALUES (1, 1)")
        xa = a.session.xact.xid
        b.x("BEGIN")
        assert b.x("UPDATE p SET v = 5 WHERE id = 1").rowcount == 1   # no wait
        b.x("ROLLBACK")
        assert b.x("UPDATE p SET v = 6 WHERE id = 1").rowcount == 1   # no wait, committed
        assert _lockers(d, "p", 1) == [xa]                             # carried along
        # a delete of the new version waits for the locker, then finds its child
        s = Step(lambda: d.x("DELETE FROM p WHERE id = 1"))
        wait_blocked(inst, d.session, s, xa)
        a.x("COMMIT")
        with pytest.raises(errors.ForeignKeyViolation):
            s.join()
        assert len(d.rows("SELECT * FROM p WHERE id = 1 FOR UPDATE")) == 1   # a has ended
    finally:
        for x in (a, b, d):
            x.close()


@pytest.mark.parametrize("sql", ["UPDATE p SET id = 10 WHERE id = 1",
                                 "SELECT * FROM p WHERE id = 1 FOR UPDATE"])
def test_key_update_and_for_update_wait_for_key_share(inst, sql):
    from tests.txn.txn_steps import Step, wait_blocked
    a, b, d = _three(inst)
    try:
        _two(a, b)
        a.x("BEGIN")
        a.x("INSERT INTO c VALUES (1, 1)")
        xa = a.session.xact.xid
        s = Step(lambda: d.x(sql))
        wait_blocked(inst, d.session, s, xa)
        a.x("ROLLBACK")
        s.join()
    finally:
        for x in (a, b, d):
            x.close()



def test_values_in_from(db):
    """VALUES lists in FROM (psql's \\d of a referenced table sends one as a UNION operand),
    with PostgreSQL's column names and types unified across the rows."""
    assert db.rows("SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v ORDER BY 1") == [(1, "a"),
                                                                                 (2, "b")]
    r = db.x("SELECT * FROM (VALUES (1, 'a'), (2.5, NULL)) AS v (x, y) WHERE x > 1")
    assert [d[0] for d in r.description] == ["x", "y"] and r.rows == [(2.5, None)]
    assert db.rows("SELECT column1 FROM (VALUES (7)) v") == [(7,)]
    assert db.rows("SELECT 1 UNION ALL VALUES (2) ORDER BY 1") == [(1,), (2,)]
    with pytest.raises(errors.Error) as ei:
        db.x("SELECT * FROM (VALUES (1), (2, 3)) v")
    assert ei.value.sqlstate == "42601"


def test_repeatable_read(db, db2):
    """Under REPEATABLE READ the lookups read the transaction's snapshot: the parent this
    transaction inserted counts, one committed by another transaction after the snapshot
    does not (PostgreSQL's RI_FKey_check does the same)."""
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE c (id int, pid int REFERENCES p)")
    db.x("BEGIN ISOLATION LEVEL REPEATABLE READ")
    db.x("SELECT count(*) FROM p")              # the snapshot
    db2.x("INSERT INTO p VALUES (2)")
    db.x("INSERT INTO p VALUES (1)")
    db.x("INSERT INTO c VALUES (1, 1)")
    with pytest.raises(errors.ForeignKeyViolation):
        db.x("INSERT INTO c VALUES (2, 2)")
    db.x("ROLLBACK")


def test_catalog_checker_sees_the_constraints(db):
    from minidb.catalog import check_catalog
    db.x("CREATE TABLE p (id int PRIMARY KEY)")
    db.x("CREATE TABLE c (pid int REFERENCES p)")
    assert check_catalog(db.session.backend) == []
    db.x("DROP TABLE p CASCADE")
    db.x("DROP TABLE c")
    assert check_catalog(db.session.backend) == []


def test_constraints_survive_a_crash(tmp_path):
    """The pg_constraint rows are WAL-logged catalog rows: a committed foreign key is
    enforced after crash recovery, one whose transaction the crash ended is gone."""
    import minidb
    import minidb.instance
    from minidb.catalog import check_catalog
    d = str(tmp_path / "data")
    conn = minidb.connect(d, shared_buffers=64, max_worker_processes=0)
    cur = conn.cursor()
    cur.execute("CREATE TABLE p (id int PRIMARY KEY)")
    cur.execute("CREATE TABLE c (pid int REFERENCES p ON DELETE CASCADE)")
    cur.execute("INSERT INTO p VALUES (1)")
    conn.commit()
    cur.execute("ALTER TABLE c ADD CONSTRAINT lost FOREIGN KEY (pid) REFERENCES p")
    inst = conn._instance
    inst.wal.flush(inst.wal.insert_lsn())
    inst.crash_abandon()
    minidb.instance._SHARED.clear()
    conn = minidb.connect(d, shared_buffers=64, max_worker_processes=0)
    try:
        cur = conn.cursor()
        with pytest.raises(errors.ForeignKeyViolation):
            cur.execute("INSERT INTO c VALUES (2)")
        conn.rollback()
        cur.execute("SELECT conname FROM pg_constraint")
        assert cur.fetchall() == [("c_pid_fkey",)]
        with conn._instance.connect() as b:
            assert check_catalog(b) == []
    finally:
        conn.close()


def test_self_reference_and_multi_column(db):
    db.x("CREATE TABLE tree (id int PRIMARY KEY, "
         "up int REFERENCES tree ON DELETE CASCADE ON UPDATE CASCADE)")
    db.x("INSERT INTO tree VALUES (1, NULL), (2, 1), (3, 2), (4, 3), (5, 1), (6, NULL)")
    db.x("UPDATE tree SET id = 10 WHERE id = 1")
    assert db.rows("SELECT * FROM tree ORDER BY id") == [
        (2, 10), (3, 2), (4, 3), (5, 10), (6, None), (10, None)]
    assert db.x("DELETE FROM tree WHERE id = 10").rowcount == 1   # the cascade is not counted
    assert db.rows("SELECT * FROM tree") == [(6, None)]
    db.x("CREATE TABLE p2 (a int, b text, PRIMARY KEY (a, b))")
    db.x("CREATE TABLE c2 (x int, y text, FOREIGN KEY (y, x) REFERENCES p2 (b, a) "
         "ON UPDATE CASCADE)")
    db.x("INSERT INTO p2 VALUES (1, 'a')")
    db.x("INSERT INTO c2 VALUES (1, 'a'), (NULL, 'zz')")     # a NULL: not checked
    msg = _err(db, "INSERT INTO c2 VALUES (2, 'a')", errors.ForeignKeyViolation, "23503")
    assert msg.endswith('Key (y, x)=(a, 2) is not present in table "p2".')
    db.x("UPDATE p2 SET b = 'q'")
    assert sorted(db.rows("SELECT * FROM c2"), key=repr) == [(1, "q"), (None, "zz")]


def test_checks_lock_the_referenced_table(db, db2):
    """The check holds RowShare on the referenced table (PostgreSQL's SELECT ... FOR KEY
    SHARE): DROP / TRUNCATE / LOCK ... ACCESS EXCLUSIVE wait for the inserting transaction."""
    _two(db, db2)
    db.x("BEGIN")
    db.x("INSERT INTO c VALUES (1, 1)")
    db2.x("BEGIN")
    with pytest.raises(errors.Error) as ei:
        db2.x("LOCK TABLE p IN ACCESS EXCLUSIVE MODE NOWAIT")
    assert ei.value.sqlstate == "55P03"
    db2.x("ROLLBACK")
    db2.x("BEGIN")
    db2.x("LOCK TABLE p IN SHARE MODE NOWAIT")      # Share does not conflict with RowShare
    db2.x("ROLLBACK")
    db.x("COMMIT")


def test_referencing_rows_found_by_index_when_there_is_one(inst):
    """A parent's DELETE finds the referencing rows through an index led by the key's
    columns (idx_scan on the child), else by one sequential scan per statement."""
    from tests.sql.conftest import DB
    db = DB(inst, stats_flush_interval=0)
    try:
        db.x("CREATE TABLE p (id int PRIMARY KEY)")
        db.x("CREATE TABLE ci (id int, pid int REFERENCES p ON DELETE CASCADE)")
        db.x("CREATE INDEX ON ci (pid, id)")
        db.x("CREATE TABLE cs (id int, pid int REFERENCES p ON DELETE CASCADE)")
        db.x("INSERT INTO p SELECT g FROM generate_series(1, 10) g")
        db.x("INSERT INTO ci SELECT g, g FROM generate_series(1, 10) g")
        db.x("INSERT INTO cs SELECT g, g FROM generate_series(1, 10) g")
        before = {t: db.session.table_stats(t) for t in ("ci", "cs")}
        db.x("DELETE FROM p WHERE id <= 3")
        after = {t: db.session.table_stats(t) for t in ("ci", "cs")}
        d = {t: {k: after[t][k] - before[t][k] for k in ("seq_scan", "idx_scan", "n_tup_del")}
             for t in after}
        assert d["ci"] == {"seq_scan": 0, "idx_scan": 3, "n_tup_del": 3}
        assert d["cs"] == {"seq_scan": 1, "idx_scan": 0, "n_tup_del": 3}
    finally:
        db.close()
