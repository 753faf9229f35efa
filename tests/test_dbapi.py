"""DB-API 2.0 (PEP 249): ``minidb`` the module, ``minidb.dbapi`` Connection and Cursor.

What is proven here:
  * the module surface PEP 249 asks for: apilevel, threadsafety, paramstyle, the exception
    tree (every class from ``minidb.errors``, also as Connection attributes), type objects
    comparing equal to the SQL type names ``description`` carries, the constructors;
  * the DB-API mechanics, against a *fake engine* (``FakeEngine``, the interface of
    ``minidb.sql.engine.Engine`` over real sessions), so they hold whatever SQL the real
    engine accepts: fetch*, description, rowcount, arraysize, iteration; non-autocommit mode
    begins a transaction implicitly, rollback() undoes it, another connection sees it only
    after commit(); a failed transaction refuses statements (25P02) until rollback(), and
    commit() of it raises and rolls back; autocommit mode and explicit BEGIN/COMMIT/ROLLBACK;
    isolation_level; the context manager (commit or roll back, then close); InterfaceError
    after close; qmark parameters checked (mapping, bare string); executemany prepares once;
    unexpected Python errors become InternalError;
  * several connections in one process share one Instance, which the last close() closes
    (the directory lock is free again), in threads too; conflicting instance settings are
    refused; one connection used by two threads at once raises ProgrammingError; a program
    that exits without close() still has its committed rows on disk (atexit checkpoint);
  * end to end through the real SQL engine (skipped while ``minidb.sql.engine`` does not
    exist): DDL, DML with parameters, SELECT with WHERE / ORDER BY / aggregates,
    description's type codes, rowcount of UPDATE and DELETE, executemany, transactions
    between two connections, and each kind of bad input raising its class with its
    SQLSTATE while leaving the table as it was.

Not proven here: the SQL language itself (the engine's tests), connections across processes.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field

import pytest

import minidb
import minidb.dbapi
from minidb import errors
from minidb.catalog import ColumnDef
from minidb.instance import Instance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minidb.dbapi.__file__)))


# ---------------------------------------------------------------------------------------------
# a fake engine: the Engine interface over real sessions, a handful of statement forms


@dataclass
class Result:
    description: list | None
    rows: list
    rowcount: int
    status: str
    messages: list = field(default_factory=list)


class FakeEngine:
    """``minidb.sql.engine.Engine``'s interface over real sessions, for the
    DB-API's own mechanics.  Statements it knows:

    create table T (col type, ...)     insert into T values (?, ...)    select * from T
    select ?                           select 1/0 (DivisionByZero)      boom (a KeyError)
    begin / commit / rollback          block (waits on FakeEngine.gate)
    """

    prepared = 0  # prepare() calls, over all instances
    gate: threading.Event | None = None
    entered: threading.Event | None = None

    def __init__(self, session):
        self.session = session

    @staticmethod
    def split_statements(text):
        parts = text.split(";")
        return [p.strip() for p in parts[:-1] if p.strip()], parts[-1]

    def prepare(self, sql):
        FakeEngine.prepared += 1
        engine = self

        class Prepared:
            def execute(self, params=None):
                return engine._run(sql, params or ())
        return Prepared()

    def execute(self, sql, params=None):
        return self._run(sql, tuple(params or ()))

    def _run(self, sql, params):
        s = sql.strip().rstrip(";").strip()
        low = s.lower()
        if s.count("?") != len(params):
            raise errors.ProgrammingError(
                f"the statement has {s.count('?')} parameters, {len(params)} were given")
        sess = self.session
        if low in ("begin", "start transaction"):
            sess.begin()
            return Result(None, [], -1, "BEGIN")
        if low == "commit":
            return Result(None, [], -1, "COMMIT" if sess.commit() else "ROLLBACK")
        if low == "rollback":
            sess.rollback()
            return Result(None, [], -1, "ROLLBACK")
        if low == "boom":
            raise KeyError("boom")
        if low == "block":
            FakeEngine.entered.set()
            FakeEngine.gate.wait(10)
            return Result(None, [], -1, "BLOCK")
        if low == "select 1/0":
            raise errors.DivisionByZero("division by zero")
        if low == "select ?":
            return Result([("?column?", None, None, None, None, None, None)], [params], 1,
                          "SELECT 1")
        m = re.fullmatch(r"create table (\w+) \((.*)\)", low)
        if m:
            cols = [ColumnDef(*c.strip().split(None, 1)) for c in m.group(2).split(",")]
            sess.instance.catalog.create_table(m.group(1), cols)
            return Result(None, [], -1, "CREATE TABLE")
        m = re.fullmatch(r"insert into (\w+) values \((.*)\)", low)
        if m:
            sess.insert(m.group(1), params)
            return Result(None, [], 1, "INSERT 0 1")
        m = re.fullmatch(r"select \* from (\w+)", low)
        if m:
            t = sess.instance.catalog.table(m.group(1))
            rows = sorted(sess.select(m.group(1)), key=repr)
            desc = [(c.name, c.type, None, None, None, None, None) for c in t.columns]
            return Result(desc, rows, len(rows), f"SELECT {len(rows)}")
        raise errors.ProgrammingError(f"fake engine: cannot run {sql!r}")


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(minidb.dbapi, "_engine_class", lambda: FakeEngine)
    FakeEngine.prepared = 0
    return FakeEngine


@pytest.fixture
def db(tmp_path):
    """The path of a fresh data directory (small pool)."""
    return str(tmp_path / "data")


@pytest.fixture
def conns(db):
    """``conns(n, **settings)``: n connections to ``db``, closed afterwards."""
    made = []

    def make(n=1, **settings):
        settings.setdefault("shared_buffers", 64)
        new = [minidb.connect(db, **settings) for _ in range(n)]
        made.extend(new)
        return new if n > 1 else new[0]
    yield make
    for c in made:
        c.close()


# ---------------------------------------------------------------------------------------------
# module surface


def test_module_globals():
    assert minidb.apilevel == "2.0"
    assert minidb.threadsafety == 1
    assert minidb.paramstyle == "qmark"


def test_exception_hierarchy_is_pep_249s_and_lives_in_minidb_errors():
    m = minidb
    assert issubclass(m.Warning, Exception) and not issubclass(m.Warning, m.Error)
    assert issubclass(m.Error, Exception)
    assert issubclass(m.InterfaceError, m.Error)
    assert issubclass(m.DatabaseError, m.Error)
    for cls in (m.DataError, m.OperationalError, m.IntegrityError, m.InternalError,
                m.ProgrammingError, m.NotSupportedError):
        assert issubclass(cls, m.DatabaseError)
        assert getattr(errors, cls.__name__) is cls
        assert getattr(m.Connection, cls.__name__) is cls
    assert issubclass(errors.UniqueViolation, m.IntegrityError)
    assert errors.UniqueViolation("x").sqlstate == "23505"


def test_type_objects_compare_equal_to_sql_type_names():
    assert minidb.NUMBER == "integer" and "bigint" == minidb.NUMBER
    assert minidb.NUMBER == "double precision"
    assert minidb.STRING == "text" and minidb.STRING == "character varying(20)"
    assert minidb.STRING == "character(84)"
    assert minidb.DATETIME == "timestamp"
    assert minidb.NUMBER != "text" and minidb.STRING != "integer"
    assert minidb.NUMBER != "boolean" and minidb.ROWID != "integer"
    assert minidb.NUMBER != minidb.STRING


def test_constructors():
    assert minidb.Date(2024, 2, 29) == datetime.date(2024, 2, 29)
    assert minidb.Time(1, 2, 3) == datetime.time(1, 2, 3)
    assert minidb.Timestamp(2024, 1, 2, 3, 4, 5) == datetime.datetime(2024, 1, 2, 3, 4, 5)
    assert minidb.Binary(b"ab") == b"ab"
    ticks = 1_700_000_000
    ts = minidb.TimestampFromTicks(ticks)
    assert ts == datetime.datetime.fromtimestamp(ticks).replace(microsecond=0)
    assert minidb.DateFromTicks(ticks) == ts.date()
    assert minidb.TimeFromTicks(ticks) == ts.time()


# ---------------------------------------------------------------------------------------------
# mechanics against the fake engine


def test_connect_defaults_to_minidb_data_in_the_current_folder(fake, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    conn = minidb.connect(shared_buffers=64)
    try:
        assert conn.datadir == os.path.realpath(tmp_path / "minidb-data")
        assert os.path.exists(tmp_path / "minidb-data" / "MINIDB_VERSION")
    finally:
        conn.close()


def test_cursor_fetch_description_rowcount_iteration(fake, conns):
    conn = conns()
    conn.autocommit = True
    cur = conn.cursor()
    assert cur.description is None and cur.rowcount == -1 and cur.arraysize == 1
    assert cur.lastrowid is None
    cur.execute("create table t (a integer, b text)")
    assert cur.description is None and cur.statusmessage == "CREATE TABLE"
    with pytest.raises(minidb.ProgrammingError, match="no results"):
        cur.fetchone()
    for i in range(5):
        assert cur.execute("insert into t values (?, ?)", (i, f"r{i}")) is cur
        assert cur.rowcount == 1
    cur.execute("select * from t")
    assert [d[0] for d in cur.description] == ["a", "b"]
    assert cur.description[0][1] == minidb.NUMBER and cur.description[1][1] == minidb.STRING
    assert all(len(d) == 7 for d in cur.description)
    assert cur.rowcount == 5
    assert cur.fetchone() == (0, "r0")
    assert cur.fetchmany() == [(1, "r1")]  # arraysize
    cur.arraysize = 2
    assert cur.fetchmany() == [(2, "r2"), (3, "r3")]
    assert cur.fetchmany(5) == [(4, "r4")]
    assert cur.fetchone() is None and cur.fetchall() == [] and cur.fetchmany() == []
    cur.execute("select * from t")
    assert list(cur) == [(i, f"r{i}") for i in range(5)]
    assert conn.execute("select ?", (7,)).fetchall() == [(7,)]
    cur.setinputsizes([None])
    cur.setoutputsize(10)


def test_non_autocommit_begins_implicitly_and_rollback_undoes(fake, conns):
    a, b = conns(2)
    assert a.autocommit is False
    a.autocommit = True
    a.execute("create table t (a integer)")
    a.autocommit = False
    cur = a.cursor()
    cur.execute("insert into t values (?)", (1,))
    assert a.transaction_status == "in transaction"
    assert b.execute("select * from t").fetchall() == []  # not committed: invisible
    a.rollback()
    assert a.transaction_status == "idle"
    assert a.execute("select * from t").fetchall() == []
    a.rollback()
    cur.execute("insert into t values (?)", (2,))
    a.commit()
    b.rollback()  # b's own implicit transaction (READ COMMITTED sees the commit anyway)
    assert b.execute("select * from t").fetchall() == [(2,)]
    a.commit()  # nothing open: nothing to do
    b.commit()


def test_failed_transaction_refuses_statements_until_rollback(fake, conns):
    conn = conns()
    conn.autocommit = True
    conn.execute("create table t (a integer)")
    conn.autocommit = False
    conn.execute("insert into t values (?)", (1,))
    with pytest.raises(minidb.ProgrammingError) as e:
        conn.execute("insert into t values (?)", ("not a number",))
    assert e.value.sqlstate == "42804"
    assert conn.transaction_status == "failed"
    with pytest.raises(minidb.InternalError) as e:
        conn.execute("select * from t")
    assert e.value.sqlstate == "25P02"
    conn.rollback()
    assert conn.execute("select * from t").fetchall() == []
    # commit() of a failed transaction raises and rolls back
    conn.execute("insert into t values (?)", (2,))
    with pytest.raises(minidb.DatabaseError):
        conn.execute("insert into t values (?)", ("x",))
    with pytest.raises(errors.InFailedSqlTransaction, match="rolled back"):
        conn.commit()
    assert conn.transaction_status == "idle"
    assert conn.execute("select * from t").fetchall() == []


def test_autocommit_mode_and_explicit_transaction_statements(fake, conns):
    a, b = conns(2)
    a.autocommit = True
    b.autocommit = True
    a.execute("create table t (a integer)")
    a.execute("insert into t values (?)", (1,))
    assert a.transaction_status == "idle"
    assert b.execute("select * from t").fetchall() == [(1,)]
    a.execute("BEGIN")
    a.execute("insert into t values (?)", (2,))
    assert b.execute("select * from t").fetchall() == [(1,)]
    a.execute("ROLLBACK")
    a.execute("begin")
    a.execute("insert into t values (?)", (3,))
    with pytest.raises(minidb.ProgrammingError, match="autocommit"):
        a.autocommit = False
    a.commit()  # commits the block BEGIN opened
    assert b.execute("select * from t").fetchall() == [(1,), (3,)]
    # in non-autocommit mode, transaction statements get no implicit BEGIN before them
    a.autocommit = False
    c = a.execute("begin")
    assert c.statusmessage == "BEGIN"
    a.execute("insert into t values (?)", (4,))
    assert a.execute("commit").statusmessage == "COMMIT"
    assert b.execute("select * from t").fetchall() == [(1,), (3,), (4,)]


def test_isolation_level(fake, conns):
    a, b = conns(2)
    a.autocommit = b.autocommit = True
    a.execute("create table t (a integer)")
    b.autocommit = False
    assert b.isolation_level is None
    b.isolation_level = "repeatable read"
    assert b.isolation_level == "REPEATABLE READ"
    assert b.execute("select * from t").fetchall() == []
    a.execute("insert into t values (?)", (1,))
    assert b.execute("select * from t").fetchall() == []  # the snapshot of the transaction
    with pytest.raises(minidb.ProgrammingError, match="isolation_level"):
        b.isolation_level = None
    b.commit()
    assert b.execute("select * from t").fetchall() == [(1,)]
    b.rollback()
    with pytest.raises(minidb.NotSupportedError, match="SERIALIZABLE"):
        b.isolation_level = "SERIALIZABLE"
    with pytest.raises(minidb.ProgrammingError):
        b.isolation_level = "chaos"


def test_context_manager_commits_or_rolls_back_then_closes(fake, db):
    with minidb.connect(db, shared_buffers=64) as conn:
        conn.autocommit = True
        conn.execute("create table t (a integer)")
        conn.autocommit = False
        conn.execute("insert into t values (?)", (1,))
    assert conn.closed
    with pytest.raises(ZeroDivisionError):
        with minidb.connect(db) as conn:
            conn.execute("insert into t values (?)", (2,))
            1 / 0
    assert conn.closed
    with minidb.connect(db) as conn:
        assert conn.execute("select * from t").fetchall() == [(1,)]


def test_everything_after_close_raises_interface_error(fake, conns):
    conn = conns()
    cur = conn.cursor()
    cur.execute("select ?", (1,))
    cur.close()
    cur.close()
    for call in (lambda: cur.execute("select ?", (1,)), cur.fetchone, cur.fetchall,
                 lambda: cur.executemany("select ?", [(1,)])):
        with pytest.raises(minidb.InterfaceError):
            call()
    cur2 = conn.cursor()
    conn.close()
    conn.close()  # harmless
    for call in (conn.cursor, conn.commit, conn.rollback, lambda: conn.execute("select 1"),
                 lambda: cur2.execute("select ?", (1,)), cur2.fetchall,
                 lambda: setattr(conn, "autocommit", True)):
        with pytest.raises(minidb.InterfaceError):
            call()
    with pytest.raises(minidb.InterfaceError):
        with conn:
            pass


def test_parameters_are_a_sequence_for_the_question_marks(fake, conns):
    cur = conns().cursor()
    assert cur.execute("select ?", [5]).fetchone() == (5,)
    assert cur.execute("select ?", ("abc",)).fetchone() == ("abc",)
    with pytest.raises(minidb.ProgrammingError, match="qmark"):
        cur.execute("select ?", {"a": 1})
    with pytest.raises(minidb.ProgrammingError, match="sequence"):
        cur.execute("select ?", "abc")
    with pytest.raises(minidb.ProgrammingError, match="sequence"):
        cur.execute("select ?", 5)
    with pytest.raises(minidb.ProgrammingError, match="parameters"):
        cur.execute("select ?", (1, 2))
    assert cur.description is None and cur.rowcount == -1  # a failed execute leaves nothing


def test_executemany_prepares_once_and_sums_rowcounts(fake, conns):
    conn = conns()
    conn.autocommit = True
    conn.execute("create table t (a integer, b text)")
    conn.autocommit = False
    cur = conn.cursor()
    cur.executemany("insert into t values (?, ?)", [(i, str(i)) for i in range(10)])
    assert FakeEngine.prepared == 1
    assert cur.rowcount == 10
    conn.commit()
    assert len(conn.execute("select * from t").fetchall()) == 10
    cur.executemany("insert into t values (?, ?)", iter([]))
    assert cur.rowcount == 0


def test_errors_carry_sqlstate_and_unexpected_ones_become_internal_error(fake, conns):
    conn = conns()
    conn.autocommit = True
    with pytest.raises(minidb.DataError) as e:
        conn.execute("select 1/0")
    assert e.value.sqlstate == "22012"
    with pytest.raises(minidb.InternalError, match="KeyError") as e:
        conn.execute("boom")
    assert e.value.sqlstate == "XX000" and isinstance(e.value.__cause__, KeyError)
    assert conn.execute("select ?", (1,)).fetchone() == (1,)


def test_unknown_setting_is_refused(fake, db):
    with pytest.raises(minidb.ProgrammingError, match="no_such_knob"):
        minidb.connect(db, no_such_knob=1)


def test_connections_share_one_instance_closed_by_the_last(fake, db):
    a = minidb.connect(db, shared_buffers=64)
    b = minidb.connect(db, trace_xact=False)  # session setting: fine
    assert a._instance is b._instance
    assert a.session.backend.slot != b.session.backend.slot
    with pytest.raises(errors.CantChangeParameter, match="shared_buffers"):
        minidb.connect(db, shared_buffers=128)
    c = minidb.connect(db, shared_buffers=64)  # same value: fine
    c.close()
    a.close()
    with pytest.raises(errors.DatabaseInUse):
        Instance(db)  # b still holds it
    b.close()
    inst = Instance(db)  # the lock is free again
    inst.close()
    d = minidb.connect(db, shared_buffers=128)  # a fresh instance, new sizes
    assert d._instance.settings.shared_buffers == 128
    d.close()


def test_connections_in_threads(fake, conns):
    setup = conns()
    setup.autocommit = True
    setup.execute("create table t (a integer, b text)")
    nthreads, per = 4, 25
    failures = []

    def worker(k):
        try:
            with minidb.connect(setup.datadir) as conn:
                cur = conn.cursor()
                for i in range(per):
                    cur.execute("insert into t values (?, ?)", (k * 1000 + i, f"t{k}"))
                    if i % 5 == 4:
                        conn.commit()
                conn.rollback()
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    rows = setup.execute("select * from t").fetchall()
    assert sorted(r[0] for r in rows) == sorted(k * 1000 + i for k in range(nthreads)
                                                for i in range(per))


def test_one_connection_used_by_two_threads_at_once_is_refused(fake, conns):
    conn = conns()
    conn.autocommit = True
    FakeEngine.gate, FakeEngine.entered = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: conn.execute("block"))
    t.start()
    try:
        assert FakeEngine.entered.wait(10)
        with pytest.raises(minidb.ProgrammingError, match="another thread"):
            conn.execute("select ?", (1,))
    finally:
        FakeEngine.gate.set()
        t.join(10)
    # handed over between calls: fine
    out = []
    t = threading.Thread(target=lambda: out.append(conn.execute("select ?", (2,)).fetchone()))
    t.start()
    t.join(10)
    assert out == [(2,)]


def test_committed_rows_survive_an_exit_without_close(db):
    code = textwrap.dedent(f"""
        import minidb, minidb.dbapi
        from minidb.catalog import ColumnDef
        minidb.dbapi._engine_class = lambda: (lambda session: None)
        conn = minidb.connect({db!r}, shared_buffers=64)
        conn.session.instance.catalog.create_table("t", [ColumnDef("a", "integer")])
        conn.session.insert("t", (41,))
        conn.session.begin()
        conn.session.insert("t", (42,))
        conn.session.commit()
        conn.session.begin()
        conn.session.insert("t", (43,))   # never committed
        # no close(): the atexit hook checkpoints
    """)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    from minidb.session import Session
    with Instance(db, shared_buffers=64) as inst:
        with Session(inst) as s:
            assert sorted(s.select("t")) == [(41,), (42,)]


# ---------------------------------------------------------------------------------------------
# end to end through the SQL engine


@pytest.fixture
def sql(conns):
    """An autocommit connection (real engine) with a table t(id primary key, v, name)."""
    conn = conns()
    conn.autocommit = True
    conn.execute("CREATE TABLE t (id integer PRIMARY KEY, v integer NOT NULL, name text)")
    conn.cursor().executemany("INSERT INTO t VALUES (?, ?, ?)",
                              [(i, i * 10, f"n{i}") for i in range(1, 6)])
    return conn


def all_rows(conn):
    return conn.execute("SELECT id, v, name FROM t ORDER BY id").fetchall()


def test_end_to_end_select_insert_update_delete(sql):
    cur = sql.cursor()
    cur.execute("SELECT id, name FROM t WHERE v >= ? AND name <> ? ORDER BY id DESC", (20, "n3"))
    assert cur.fetchall() == [(5, "n5"), (4, "n4"), (2, "n2")]
    assert [d[0] for d in cur.description] == ["id", "name"]
    assert cur.description[0][1] == minidb.NUMBER and cur.description[1][1] == minidb.STRING
    assert cur.rowcount == 3
    cur.execute("SELECT count(*), sum(v), min(name), max(id) FROM t")
    assert cur.fetchone() == (5, 150, "n1", 5)
    cur.execute("UPDATE t SET v = v + 1 WHERE id <= ?", (2,))
    assert cur.rowcount == 2 and cur.description is None
    assert cur.statusmessage == "UPDATE 2"
    cur.execute("DELETE FROM t WHERE id = ?", (5,))
    assert cur.rowcount == 1 and cur.statusmessage == "DELETE 1"
    cur.execute("DELETE FROM t WHERE id = ?", (5,))
    assert cur.rowcount == 0
    cur.execute("INSERT INTO t VALUES (?, ?, ?), (?, ?, ?)", (6, 60, None, 7, 70, "it's"))
    assert cur.rowcount == 2 and cur.statusmessage == "INSERT 0 2"
    assert all_rows(sql) == [(1, 11, "n1"), (2, 21, "n2"), (3, 30, "n3"), (4, 40, "n4"),
                             (6, 60, None), (7, 70, "it's")]
    # a string parameter is a value, never SQL
    cur.execute("SELECT count(*) FROM t WHERE name = ?", ("x' OR '1'='1",))
    assert cur.fetchone() == (0,)


def test_end_to_end_transactions_between_two_connections(sql, conns):
    other = conns()
    sql.autocommit = False
    sql.execute("UPDATE t SET v = 0 WHERE id = 1")
    assert other.execute("SELECT v FROM t WHERE id = 1").fetchone() == (10,)
    sql.rollback()
    assert all_rows(sql)[0] == (1, 10, "n1")
    sql.execute("UPDATE t SET v = 0 WHERE id = 1")
    sql.commit()
    other.rollback()
    assert other.execute("SELECT v FROM t WHERE id = 1").fetchone() == (0,)
    other.rollback()
    sql.autocommit = True
    sql.execute("BEGIN")
    sql.execute("DELETE FROM t")
    sql.execute("ROLLBACK")
    assert len(all_rows(sql)) == 5


@pytest.mark.parametrize("stmt, params, cls, sqlstate", [
    ("SELEC * FROM t", (), minidb.ProgrammingError, "42601"),
    ("SELECT * FROM nosuch", (), minidb.ProgrammingError, "42P01"),
    ("SELECT nosuch FROM t", (), minidb.ProgrammingError, "42703"),
    ("INSERT INTO t VALUES (9, true, 'a')", (), minidb.ProgrammingError, "42804"),
    ("INSERT INTO t VALUES (?, ?, ?)", ("x", 1, "a"), minidb.DataError, "22P02"),
    ("INSERT INTO t VALUES (?, ?, ?), (?, ?, ?)", (9, 9, "a", 1, 1, "b"),
     minidb.IntegrityError, "23505"),
    ("UPDATE t SET v = v / (id - 3)", (), minidb.DataError, "22012"),
    ("SELECT v / 0 FROM t", (), minidb.DataError, "22012"),
    ("INSERT INTO t VALUES (8, NULL, 'a')", (), minidb.IntegrityError, "23502"),
])
def test_end_to_end_bad_input_raises_its_class_and_changes_nothing(sql, stmt, params, cls,
                                                                     sqlstate):
    before = all_rows(sql)
    with pytest.raises(cls) as e:
        sql.execute(stmt, params)
    assert e.value.sqlstate == sqlstate
    assert str(e.value)
    assert all_rows(sql) == before
    # the same inside a non-autocommit transaction: it fails, rollback() recovers
    sql.autocommit = False
    sql.execute("UPDATE t SET name = 'changed' WHERE id = 1")
    with pytest.raises(cls):
        sql.execute(stmt, params)
    with pytest.raises(errors.InFailedSqlTransaction):
        sql.execute("SELECT 1")
    sql.rollback()
    assert all_rows(sql) == before


def test_end_to_end_unsupported_construct_and_wrong_parameter_count(sql):
    with pytest.raises(minidb.NotSupportedError) as e:
        sql.execute("SELECT * FROM t, LATERAL generate_series(1, 2) WITH ORDINALITY x")
    assert e.value.sqlstate.startswith("0A")
    with pytest.raises(minidb.ProgrammingError):
        sql.execute("SELECT * FROM t WHERE id = ?", ())
    with pytest.raises(minidb.ProgrammingError):
        sql.execute("SELECT * FROM t WHERE id = ?", (1, 2))
    with pytest.raises(minidb.ProgrammingError):
        sql.execute("SELECT 1; SELECT 2")  # one statement per execute()
    assert len(all_rows(sql)) == 5


def test_end_to_end_executemany_and_types(conns):
    conn = conns()
    conn.execute("CREATE TABLE k (id bigint PRIMARY KEY, x double precision, ok boolean, "
                 "at timestamp, s varchar(10))")
    ts = datetime.datetime(2024, 2, 29, 12, 30, 0, 250000)
    rows = [(i, i / 4, i % 2 == 0, ts + datetime.timedelta(days=i), f"s{i}")
            for i in range(100)]
    cur = conn.cursor()
    parses = conn._engine.counters["parses"]
    cur.executemany("INSERT INTO k VALUES (?, ?, ?, ?, ?)", rows)
    assert cur.rowcount == 100
    assert conn._engine.counters["parses"] == parses + 1  # one prepared statement
    conn.commit()
    cur.execute("SELECT * FROM k ORDER BY id")
    assert cur.fetchall() == rows
    assert [d[1] == minidb.NUMBER for d in cur.description] == [True, True, False, False,
                                                                False]
    assert cur.description[3][1] == minidb.DATETIME
    cur.execute("SELECT id FROM k WHERE ok AND x < ? ORDER BY id LIMIT 3", (10.0,))
    assert cur.fetchall() == [(0,), (2,), (4,)]


def test_end_to_end_threads_each_with_a_connection(sql):
    def worker(k, failures):
        try:
            with minidb.connect(sql.datadir) as conn:
                cur = conn.cursor()
                for i in range(20):
                    cur.execute("INSERT INTO t VALUES (?, ?, ?)", (1000 * k + i, k, "w"))
                    cur.execute("UPDATE t SET v = v + 1 WHERE id = 1")
                    conn.commit()
        except BaseException as e:  # pragma: no cover - reported below
            failures.append(e)
    failures = []
    threads = [threading.Thread(target=worker, args=(k, failures)) for k in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures
    assert sql.execute("SELECT count(*) FROM t WHERE name = 'w'").fetchone() == (60,)
    assert sql.execute("SELECT v FROM t WHERE id = 1").fetchone() == (10 + 60,)
