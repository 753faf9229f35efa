"""Crash recovery as a hypothesis state machine: random transactions against a model of the
committed state, power lost at random points, recovery checked against the model.

The machine keeps the crash-test file layer (``minidb.fileio.CrashFiles``) installed the
whole time, so every write and fsync of relation files, WAL segments, the commit log and
the control file is recorded.  Its rules are transactions through the DB-API, each
committed or rolled back: inserts of a few to a few dozen rows (wide keys in a secondary
index on ``pad``: leaf and upper page splits), HOT updates (of the unindexed ``v``), non-HOT
updates (``pad`` grows; indexed when the table has the ``pad`` index), deletes, VACUUM,
CREATE INDEX, CREATE TABLE / DROP TABLE / TRUNCATE, and CHECKPOINT.  Power is lost

* now (``crash_now``: every file keeps its fsynced content plus a random subset of its
  unsynced writes, each kept, dropped or torn at 512-byte boundaries), or
* at the n-th write or fsync from now (``arm``): inside whichever statement, commit,
  eviction, checkpoint or background WAL flush reaches it.

Recovery then opens the directory (sometimes losing power again part-way through it:
``recovery_crash``), and the database must equal the model - a transaction whose COMMIT was
running at the crash may be either way - with the catalog, heap and B-tree checkers finding
nothing.  At the end the directory is closed cleanly, reopened and checked once more.

The CI tier runs a few short examples (the whole file in well under a minute); the class
marked ``long`` runs many longer ones.
"""

from __future__ import annotations

import random
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import minidb
import minidb.fileio as fileio
from tests.wal.crashkit import abandon, check_database, forget_instances, recovery_crash

# wal_writer_delay at its maximum: the background thread's writes would move crash points
SETTINGS = dict(max_worker_processes=0, shared_buffers=24, wal_segment_size=1 << 20,
                wal_buffers=16, wal_writer_delay=10000)
NAMES = ["ta", "tb", "tc"]
# Choices that depend on the model (which table, which keys) come from a Random seeded by
# the rule's argument, not from hypothesis draws: after a crash the model may be either
# side of the COMMIT that was running, and hypothesis requires each example's draws to
# replay the same.
SEEDS = st.integers(0, 2 ** 32 - 1)


def _copy(model: dict) -> dict:
    return {t: {"rows": dict(m["rows"]), "indexes": set(m["indexes"])} for t, m in model.items()}


def _state_of(conn) -> dict:
    """The database as the model sees it: per table its rows and its index names."""
    inst = conn._instance
    cur = conn.cursor()
    out = {}
    for name in sorted(inst.catalog.tables):
        cur.execute(f"select k, v, pad from {name} order by k")
        out[name] = {"rows": {k: (v, pad) for k, v, pad in cur.fetchall()},
                     "indexes": {i for i, d in inst.catalog.indexes.items() if d.table == name}}
    conn.commit()
    return out


def _describe(state: dict) -> dict:
    return {t: (len(m["rows"]), sorted(m["indexes"])) for t, m in state.items()}


class CrashMachine(RuleBasedStateMachine):

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="minidb-crashm-")
        self.model: dict = {}
        self.pending: dict | None = None
        self.conn = None
        self.layer = None
        self.recoveries = 0

    # -- the file layer and recovery ---------------------------------------------------------
    def _track(self) -> None:
        self.layer = fileio.CrashFiles()
        fileio.set_layer(self.layer)

    def _open(self):
        return minidb.connect(self.dir, **SETTINGS)

    def _check(self, conn) -> None:
        got = _state_of(conn)
        assert got == self.model or (self.pending is not None and got == self.pending), \
            f"after recovery {_describe(got)}, model {_describe(self.model)}"
        check_database(conn, {name: m["indexes"] for name, m in got.items()})
        self.model, self.pending = got, None

    def _reopen_and_check(self) -> None:
        conn = self._open()
        try:
            self._check(conn)
        finally:
            conn.close()

    def _recover(self) -> None:
        """The power went: drop the instance, recover (a third of the time losing power
        again part-way through the recovery), check."""
        rng = self.layer._rng or random.Random(0)
        again = rng.random() < 0.35
        abandon(self.conn)
        self.conn = None
        fileio.set_layer(None)
        if again:
            recovery_crash(rng, self._reopen_and_check)
        self._track()
        self.conn = self._open()
        self._check(self.conn)
        self.recoveries += 1

    def _txn(self, body, commit: bool) -> None:
        """Run ``body(cur, new)`` as one transaction; on a commit the model becomes ``new``.
        A power loss anywhere in it (or found by it) leads to recovery."""
        new = _copy(self.model)
        try:
            cur = self.conn.cursor()
            if body(cur, new) is False:
                self.conn.rollback()
                return
            if not commit:
                self.conn.rollback()
                return
            self.pending = new
            self.conn.commit()
            self.model, self.pending = new, None
        except fileio.SimulatedCrash:
            self._recover()
        except Exception:
            if not self.layer.crashed:
                raise
            self._recover()   # the crash surfaced as another error on its way out

    # -- set-up and tear-down ----------------------------------------------------------------
    @initialize(seed=st.integers(0, 2 ** 32 - 1))
    def start(self, seed):
        self._track()
        self.layer._rng = random.Random(seed)
        self.conn = self._open()
        cur = self.conn.cursor()
        cur.execute("create table ta (k bigint primary key, v bigint, pad text)")
        self.conn.commit()
        self.model = {"ta": {"rows": {}, "indexes": {"ta_pkey"}}}

    def teardown(self):
        """Every example ends with one more power loss (so none passes without a recovery),
        then a clean close and a reopen that must find exactly the model."""
        self.layer._countdown = -1       # disarmed: the final steps choose their crash
        try:
            if self.conn is not None:
                if not self.layer.crashed:
                    self.layer.crash(self.layer._rng or random.Random(1))
                    self.pending = None
                self._recover()
                self.layer._countdown = -1
                self.conn.rollback()
                self.conn.close()
                self.conn = None
                forget_instances()
                fileio.set_layer(None)
                self._reopen_and_check()   # a clean shutdown keeps exactly the model
                assert self.recoveries > 0
        finally:
            if self.conn is not None:
                abandon(self.conn)
            fileio.set_layer(None)
            forget_instances()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- transactions --------------------------------------------------------------------------
    def _tables(self):
        return sorted(self.model)

    @precondition(lambda self: self.model)
    @rule(r=SEEDS, n=st.integers(1, 40), commit=st.booleans(),
          width=st.integers(1, 240))
    def insert(self, r, n, commit, width):
        r = random.Random(r)
        name = r.choice(self._tables())

        def body(cur, new):
            rows = new[name]["rows"]
            for _ in range(n):
                k = r.randrange(100_000)
                if k in rows:
                    continue
                v, pad = r.randrange(1000), f"{k:06d}" + "p" * r.randint(0, width)
                cur.execute(f"insert into {name} values (?, ?, ?)", (k, v, pad))
                rows[k] = (v, pad)
        self._txn(body, commit or n > 20)

    @precondition(lambda self: any(m["rows"] for m in self.model.values()))
    @rule(r=SEEDS, n=st.integers(1, 8), commit=st.booleans(),
          hot=st.booleans())
    def update(self, r, n, commit, hot):
        r = random.Random(r)
        name = r.choice([t for t in self._tables() if self.model[t]["rows"]])

        def body(cur, new):
            rows = new[name]["rows"]
            for k in r.sample(sorted(rows), min(n, len(rows))):
                v, pad = rows[k]
                if hot:     # v is never indexed: HOT when the page has room
                    v = r.randrange(1000)
                    cur.execute(f"update {name} set v = ? where k = ?", (v, k))
                else:       # pad grows (and may be indexed): a new version elsewhere
                    pad = pad + "q" * r.randint(50, 200)
                    cur.execute(f"update {name} set pad = ? where k = ?", (pad, k))
                rows[k] = (v, pad)
        self._txn(body, commit)

    @precondition(lambda self: any(m["rows"] for m in self.model.values()))
    @rule(r=SEEDS, n=st.integers(1, 10), commit=st.booleans())
    def delete(self, r, n, commit):
        r = random.Random(r)
        name = r.choice([t for t in self._tables() if self.model[t]["rows"]])

        def body(cur, new):
            rows = new[name]["rows"]
            for k in r.sample(sorted(rows), min(n, len(rows))):
                cur.execute(f"delete from {name} where k = ?", (k,))
                del rows[k]
        self._txn(body, commit)

    @precondition(lambda self: self.model)
    @rule(r=SEEDS)
    def vacuum(self, r):
        r = random.Random(r)
        name = r.choice(self._tables())

        def body(cur, new):
            self.conn.commit()
            self.conn.autocommit = True
            try:
                cur.execute(f"vacuum {name}")
            finally:
                self.conn.autocommit = False
        self._txn(body, True)

    @precondition(lambda self: self.model)
    @rule(r=SEEDS, column=st.sampled_from(["pad", "v"]),
          commit=st.booleans())
    def create_index(self, r, column, commit):
        r = random.Random(r)
        name = r.choice(self._tables())
        iname = f"{name}_{column}"
        if iname in self.model[name]["indexes"]:
            return

        def body(cur, new):
            cur.execute(f"create index {iname} on {name} ({column})")
            new[name]["indexes"].add(iname)
        self._txn(body, commit)

    @rule(name=st.sampled_from(NAMES), commit=st.booleans())
    def create_table(self, name, commit):
        if name in self.model:
            return

        def body(cur, new):
            cur.execute(f"create table {name} (k bigint primary key, v bigint, pad text)")
            new[name] = {"rows": {}, "indexes": {f"{name}_pkey"}}
        self._txn(body, commit)

    @precondition(lambda self: len(self.model) > 1)
    @rule(r=SEEDS, commit=st.booleans())
    def drop_table(self, r, commit):
        r = random.Random(r)
        name = r.choice(self._tables())

        def body(cur, new):
            cur.execute(f"drop table {name}")
            del new[name]
        self._txn(body, commit)

    @precondition(lambda self: self.model)
    @rule(r=SEEDS, commit=st.booleans())
    def truncate(self, r, commit):
        r = random.Random(r)
        name = r.choice(self._tables())

        def body(cur, new):
            cur.execute(f"truncate {name}")
            new[name]["rows"] = {}
        self._txn(body, commit)

    @rule()
    def checkpoint(self):
        def body(cur, new):
            self.conn.commit()
            self.conn._instance.checkpoint()
        self._txn(body, True)

    # -- power loss ----------------------------------------------------------------------------
    @rule(n=st.integers(1, 80), seed=st.integers(0, 2 ** 32 - 1))
    def arm(self, n, seed):
        """Lose power at the n-th write or fsync from now, wherever that falls."""
        self.layer.crash_after(n, random.Random(seed))

    @rule(seed=st.integers(0, 2 ** 32 - 1))
    def crash_now(self, seed):
        rng = random.Random(seed)
        self.layer.crash(rng)
        self.layer._rng = rng
        self.pending = None
        self._recover()


CI = settings(max_examples=10, stateful_step_count=30, deadline=None,
              suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=60, stateful_step_count=60, deadline=None,
                suppress_health_check=list(HealthCheck))

TestCrashMachine = CrashMachine.TestCase
TestCrashMachine.settings = CI


class LongCrashMachine(CrashMachine):
    pass


# 60 examples of 60 steps take ~110 s alone on this machine, more under load: the default
# 120 s of pytest-timeout cut it off in its teardown at load 4-5
TestCrashMachineLong = pytest.mark.timeout(600)(pytest.mark.long(LongCrashMachine.TestCase))
TestCrashMachineLong.settings = LONG
