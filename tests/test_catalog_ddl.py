"""Transactional DDL through SQL: what rolls back, which files exist, and a model check.

What is proven here:
  * ``BEGIN; DROP TABLE t; ROLLBACK`` keeps t, its rows, its index and its file;
    ``BEGIN; CREATE TABLE u ...; ROLLBACK`` leaves no u and no file; TRUNCATE gives the
    table and its index new files, removes the old ones at COMMIT (kept on ROLLBACK); CREATE
    INDEX and DROP INDEX roll back; a DDL statement in a failed block is refused (25P02) and
    the ROLLBACK undoes the DDL before the error - the catalog checker finds nothing wrong
    after each (no orphan file, no relation without a file);
  * the issue's reproduction: a loop of TRUNCATE + INSERT in one session against UPDATE +
    count(*) in another, then a clean close and a reopen: every count a session got was a
    committed state, the last committed rows are all there, no relation file leaked; and
    its one race made deterministic: a TRUNCATE committing between a statement's binding
    and its planning (the statement locks, binds again and plans against the new files);
  * a hypothesis state machine: two sessions mixing CREATE / DROP / TRUNCATE / CREATE INDEX
    / DROP INDEX / INSERT with BEGIN, COMMIT and ROLLBACK, against a model; after every step
    each session's view (tables and row counts) and the files agree with the model, and
    after reopening the committed state does.

Not proven here: two sessions using the same table while one's DDL is uncommitted (the
relation locks make one wait; the sessions share one thread, so the model keeps them off
each other's locked tables; the waits themselves are the isolation specs' and
tests/sql/test_locks.py's); ANALYZE statistics (tests/sql).
"""

from __future__ import annotations

import shutil
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import minidb
import minidb.index as ix
from minidb.catalog import check_catalog, relation_files
from minidb.errors import InFailedSqlTransaction, UndefinedTable


def connect(path):
    conn = minidb.connect(str(path))
    conn.autocommit = True
    return conn


def run(conn, sql, params=None):
    cur = conn.cursor()
    cur.execute(sql, params)
    return cur.fetchall() if cur.description else None


def catalog_problems(conn, sessions=()) -> list[str]:
    """The checker's findings, the files of open transactions' new relations excepted."""
    inst = conn.session.instance
    creating = [rfn for s in sessions for rfn, at_commit in s.session.xact.pending_deletes
                if not at_commit]
    with inst.connect() as b:
        return check_catalog(b, in_progress=creating)


def files(conn) -> set[int]:
    with conn.session.instance.connect() as b:
        return relation_files(b)


@pytest.fixture
def conn(tmp_path):
    c = connect(tmp_path / "d")
    run(c, "CREATE TABLE t (k integer PRIMARY KEY, v integer)")
    run(c, "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
    yield c
    c.close()


def test_drop_table_rolls_back(conn):
    before = files(conn)
    run(conn, "BEGIN")
    run(conn, "DROP TABLE t")
    with pytest.raises(UndefinedTable):
        run(conn, "SELECT * FROM t")
    run(conn, "ROLLBACK")
    assert run(conn, "SELECT k, v FROM t ORDER BY k") == [(1, 10), (2, 20), (3, 30)]
    assert run(conn, "SELECT v FROM t WHERE k = 2") == [(20,)]   # through t_pkey
    assert files(conn) == before
    assert catalog_problems(conn) == []
    run(conn, "DROP TABLE t")
    assert {f for f in files(conn) if f >= 16384} == set()   # t's and t_pkey's files gone
    assert catalog_problems(conn) == []


def test_create_table_rolls_back(conn):
    before = files(conn)
    run(conn, "BEGIN")
    run(conn, "CREATE TABLE u (a integer PRIMARY KEY, b text)")
    run(conn, "INSERT INTO u VALUES (1, 'x')")
    assert run(conn, "SELECT * FROM u") == [(1, "x")]
    assert len(files(conn)) == len(before) + 2       # u and u_pkey, until the end
    run(conn, "ROLLBACK")
    with pytest.raises(UndefinedTable):
        run(conn, "SELECT * FROM u")
    assert files(conn) == before
    assert catalog_problems(conn) == []


def test_truncate_new_files_old_ones_go_at_commit(conn):
    cat = conn.session.backend.catalog
    old = (cat.table("t").relfilenode, cat.index("t_pkey").relfilenode)
    run(conn, "BEGIN")
    run(conn, "TRUNCATE t")
    run(conn, "INSERT INTO t VALUES (9, 90)")
    new = (cat.table("t").relfilenode, cat.index("t_pkey").relfilenode)
    assert set(old).isdisjoint(new)
    assert set(old) | set(new) <= files(conn)
    run(conn, "ROLLBACK")
    assert run(conn, "SELECT count(*) FROM t") == [(3,)]
    assert set(old) <= files(conn) and set(new).isdisjoint(files(conn))
    run(conn, "BEGIN")
    run(conn, "TRUNCATE t")
    run(conn, "INSERT INTO t VALUES (9, 90)")
    run(conn, "COMMIT")
    assert run(conn, "SELECT k, v FROM t WHERE k = 9") == [(9, 90)]
    assert run(conn, "SELECT count(*) FROM t") == [(1,)]
    assert set(old).isdisjoint(files(conn))
    assert catalog_problems(conn) == []


def test_create_and_drop_index_roll_back(conn):
    before = files(conn)
    run(conn, "BEGIN")
    run(conn, "CREATE INDEX t_v ON t (v)")
    assert "t_v" in conn.session.backend.catalog.indexes
    run(conn, "ROLLBACK")
    assert "t_v" not in conn.session.backend.catalog.indexes
    assert files(conn) == before
    run(conn, "CREATE INDEX t_v ON t (v)")
    run(conn, "BEGIN")
    run(conn, "DROP INDEX t_v")
    run(conn, "ROLLBACK")
    with conn.session.instance.connect() as b:
        assert ix.check_btree(b, "t_v")["leaf_items"] == 3
    assert catalog_problems(conn) == []


def test_ddl_in_a_failed_block_is_refused_and_nothing_is_half_done(conn):
    before = files(conn)
    run(conn, "BEGIN")
    run(conn, "CREATE TABLE u (a integer)")
    run(conn, "DROP TABLE t")
    with pytest.raises(UndefinedTable):
        run(conn, "DROP TABLE nope")
    for sql in ("CREATE TABLE w (a integer)", "TRUNCATE t", "CREATE INDEX t_v ON t (v)"):
        with pytest.raises(InFailedSqlTransaction) as ei:
            run(conn, sql)
        assert ei.value.sqlstate == "25P02"
    run(conn, "ROLLBACK")
    assert run(conn, "SELECT count(*) FROM t") == [(3,)]
    assert sorted(conn.session.backend.catalog.tables) == ["t"]
    assert files(conn) == before
    assert catalog_problems(conn) == []


# ---------------------------------------------------------------------------------------------
# the reproduction
ROWS = 20
ROUNDS = 12
# With relation locks the UPDATE and the count wait for each TRUNCATE's transaction to end
# and then plan against the files it committed: no statement may fail (without the lock
# manager they met I/O errors and 'tuple does not exist'; with the locks taken only after
# planning, a first plan sometimes opened the file a TRUNCATE had just removed - see
# test_a_truncate_committed_between_binding_and_planning), no answer be wrong, no file leak.


def test_truncate_insert_loop_against_update_and_count(tmp_path):
    path = tmp_path / "d"
    a, b = connect(path), connect(path)
    try:
        run(a, "CREATE TABLE t (k integer PRIMARY KEY, v integer)")
        values = ", ".join(f"({i}, 0)" for i in range(ROWS))
        run(a, f"INSERT INTO t VALUES {values}")
        counts, errors, done = [], [], threading.Event()

        def reader():
            while not done.is_set():
                try:
                    run(b, "UPDATE t SET v = v + 1 WHERE k % 3 = 0")
                    counts.append(run(b, "SELECT count(*) FROM t")[0][0])
                except Exception as e:     # noqa: BLE001 - kept and asserted on below
                    errors.append(e)

        th = threading.Thread(target=reader)
        th.start()
        try:
            for r in range(ROUNDS):
                run(a, "BEGIN")
                run(a, "TRUNCATE t")
                run(a, f"INSERT INTO t VALUES {values}")
                run(a, "COMMIT")
        finally:
            done.set()
            th.join()
        assert counts and set(counts) == {ROWS} and not errors, (counts, errors)
        assert catalog_problems(a) == []
    finally:
        b.close()
        a.close()
    c = connect(path)
    try:
        assert run(c, "SELECT count(*), count(DISTINCT k) FROM t") == [(ROWS, ROWS)]
        cat = c.session.backend.catalog
        named = {cat.table("t").relfilenode, cat.index("t_pkey").relfilenode}
        assert {f for f in files(c) if f >= 16384} == named
        assert catalog_problems(c) == []
    finally:
        c.close()


def test_a_truncate_committed_between_binding_and_planning(tmp_path, monkeypatch):
    """The reproduction's race, made deterministic: the reader binds its statement against
    the catalog it sees, and the writer's TRUNCATE commits (removing the file the binding
    named) before the reader has its locks.  The planner opens the relation's files, so
    the locks must come first and the binding be made again against the new catalog."""
    import minidb.sql.engine as engine_mod
    path = tmp_path / "d"
    a, b = connect(path), connect(path)
    try:
        run(a, "CREATE TABLE t (k integer PRIMARY KEY, v integer)")
        run(a, "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
        old = a.session.backend.catalog.table("t").relfilenode
        fired = []

        class Racing(engine_mod.Binder):
            def bind(self, stmt):
                bound = super().bind(stmt)
                if self.catalog is b.session.backend.catalog and not fired:
                    fired.append(1)
                    run(a, "TRUNCATE t")   # commits: the old files are gone
                    assert old not in files(a)
                return bound

        monkeypatch.setattr(engine_mod, "Binder", Racing)
        before = dict(b._engine.counters)
        cur = b.cursor()
        cur.execute("UPDATE t SET v = v + 1 WHERE k % 3 = 0")
        assert fired and cur.rowcount == 0
        assert run(b, "SELECT count(*) FROM t") == [(0,)]
        assert b._engine.counters["plans"] - before["plans"] == 2   # + count(*)
        assert b.session.backend.catalog.table("t").relfilenode != old
    finally:
        b.close()
        a.close()


# ---------------------------------------------------------------------------------------------
# the model check
NAMES = ("a", "b")


class Sess:
    def __init__(self, conn):
        self.conn = conn
        self.session = conn.session
        self.in_tx = False
        self.ops: list[tuple] = []     # this transaction's changes, in order
        self.ddl: set[str] = set()     # tables this transaction changed the schema of
        self.inserted: set[str] = set()
        self.read: set[str] = set()    # tables this transaction read (AccessShare held)


def apply(state: dict, ops) -> dict:
    out = {k: dict(v) for k, v in state.items()}
    for op, name, *arg in ops:
        if op == "create":
            out[name] = {"rows": 0, "index": False}
        elif op == "drop":
            del out[name]
        elif op == "truncate":
            out[name]["rows"] = 0
        elif op == "insert":
            out[name]["rows"] += arg[0]
        elif op == "index":
            out[name]["index"] = arg[0]
    return out


class DDLMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="minidb-ddl-")
        self.path = f"{self.dir}/d"
        self.committed: dict = {}
        self.s = [Sess(connect(self.path)), Sess(connect(self.path))]

    def view(self, s: Sess) -> dict:
        return apply(self.committed, s.ops)

    def other(self, i: int) -> Sess:
        return self.s[1 - i]

    def do(self, i: int, sql: str, op: tuple) -> None:
        s = self.s[i]
        run(s.conn, sql)
        if s.in_tx:
            s.ops.append(op)
            (s.inserted if op[0] == "insert" else s.ddl).add(op[1])
        else:
            self.committed = apply(self.committed, [op])

    def free_for_ddl(self, i: int, name: str) -> bool:
        """No lock of the other session's open transaction conflicts with DDL's
        AccessExclusive on ``name`` (the two sessions share one thread: a wait would be a
        wait for ourselves)."""
        o = self.other(i)
        return name not in o.ddl and name not in o.inserted and name not in o.read

    @rule(i=st.sampled_from([0, 1]))
    def begin(self, i):
        s = self.s[i]
        if not s.in_tx:
            run(s.conn, "BEGIN")
            s.in_tx = True

    @rule(i=st.sampled_from([0, 1]), commit=st.booleans())
    def end(self, i, commit):
        s = self.s[i]
        if s.in_tx:
            run(s.conn, "COMMIT" if commit else "ROLLBACK")
            if commit:
                self.committed = apply(self.committed, s.ops)
            s.in_tx, s.ops, s.ddl, s.inserted, s.read = False, [], set(), set(), set()

    @rule(i=st.sampled_from([0, 1]), name=st.sampled_from(NAMES))
    def create(self, i, name):
        if name not in self.view(self.s[i]) and self.free_for_ddl(i, name) \
                and name not in self.view(self.other(i)):
            self.do(i, f"CREATE TABLE {name} (k integer, v text)", ("create", name))

    @rule(i=st.sampled_from([0, 1]), name=st.sampled_from(NAMES))
    def drop(self, i, name):
        if name in self.view(self.s[i]) and self.free_for_ddl(i, name):
            self.do(i, f"DROP TABLE {name}", ("drop", name))

    @rule(i=st.sampled_from([0, 1]), name=st.sampled_from(NAMES))
    def truncate(self, i, name):
        if name in self.view(self.s[i]) and self.free_for_ddl(i, name):
            self.do(i, f"TRUNCATE {name}", ("truncate", name))

    @rule(i=st.sampled_from([0, 1]), name=st.sampled_from(NAMES), n=st.integers(1, 3))
    def insert(self, i, name, n):
        if name in self.view(self.s[i]) and name not in self.other(i).ddl:
            values = ", ".join(f"({k}, 'r{k}')" for k in range(n))
            self.do(i, f"INSERT INTO {name} VALUES {values}", ("insert", name, n))

    @rule(i=st.sampled_from([0, 1]), name=st.sampled_from(NAMES))
    def index(self, i, name):
        v = self.view(self.s[i])
        if name in v and self.free_for_ddl(i, name):
            if v[name]["index"]:
                self.do(i, f"DROP INDEX {name}_k", ("index", name, False))
            else:
                self.do(i, f"CREATE INDEX {name}_k ON {name} (k)", ("index", name, True))

    @invariant()
    def sessions_see_the_model(self):
        for i, s in enumerate(self.s):
            v = self.view(s)
            for name in NAMES:
                if name in v and name in self.other(i).ddl:
                    # the other session's DDL holds AccessExclusive: a SELECT would wait
                    assert name in s.session.backend.catalog.tables
                elif name in v:
                    assert run(s.conn, f"SELECT count(*) FROM {name}") == [(v[name]["rows"],)]
                    if s.in_tx:
                        s.read.add(name)   # its AccessShare lock stays to the end
                    assert (f"{name}_k" in s.session.backend.catalog.indexes) == v[name]["index"]
                else:  # (a failing SELECT would fail an open block: ask the catalog)
                    assert name not in s.session.backend.catalog.tables
        assert catalog_problems(self.s[0].conn, self.s) == []

    def teardown(self):
        try:
            for s in self.s:
                s.conn.close()     # an open transaction rolls back
            c = connect(self.path)
            try:
                cat = c.session.backend.catalog
                assert sorted(cat.tables) == sorted(self.committed)
                for name, m in self.committed.items():
                    assert run(c, f"SELECT count(*) FROM {name}") == [(m["rows"],)]
                    assert (f"{name}_k" in cat.indexes) == m["index"]
                    if m["index"]:
                        with c.session.instance.connect() as b:  # (aborted rows' entries
                            # stay until VACUUM: at least one per row)
                            assert ix.check_btree(b, f"{name}_k")["leaf_items"] >= m["rows"]
                assert catalog_problems(c) == []
            finally:
                c.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


DDLMachine.TestCase.settings = settings(
    max_examples=12, stateful_step_count=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_ddl_model = DDLMachine.TestCase


@pytest.mark.long
def test_ddl_model_long():
    from hypothesis.stateful import run_state_machine_as_test
    run_state_machine_as_test(DDLMachine, settings=settings(
        max_examples=100, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))
