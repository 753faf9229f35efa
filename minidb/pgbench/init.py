"""``minidb bench -i``: pgbench's four tables, filled for a scale factor.

The steps are pgbench's (``-I``, default ``dtgvp``; ``-n`` drops the ``v``):

====  ======================  ==================================================================
step  printed as              what it does here
====  ======================  ==================================================================
d     drop tables             ``DROP TABLE IF EXISTS`` the four tables (NOTICEs as pgbench's)
t     create tables           ``CREATE TABLE`` with pgbench's columns, types and filler widths
                              (``aid`` is bigint from scale 20000, as in pgbench)
g     client-side generate    TRUNCATE, then rows straight onto new heap pages with
                              ``heap_bulk_insert`` (100,000 rows a batch, a progress line
                              after each), xmin = the frozen xid 2
v     vacuum                  ``VACUUM ANALYZE`` each table
p     primary keys            a unique index ``<table>_pkey`` on each key, built by sorting
                              (``minidb.index.create_index(..., primary=True)``)
====  ======================  ==================================================================

Rows per unit of scale: 1 branch, 10 tellers, 100,000 accounts; history starts empty.
Balances start at 0; only pgbench_accounts gets a filler (84 blanks), the other fillers are
NULL, as in pgbench.

Why the frozen xid: pgbench 14+ loads with ``COPY ... FREEZE``, whose tuples every snapshot
sees without consulting the commit log.  minidb's 64-bit xids never wrap, so freezing has no
other purpose; xmin = 2 (``FROZEN_XID``) reads as committed for everyone, which is what COPY
FREEZE gives.  Loading row by row through INSERT would take minutes at scale 10.

``-F fillfactor`` applies to the load: pages of the three tables are filled to that
percentage.  minidb has no per-table storage parameters, so later updates follow the session
setting ``heap_fillfactor`` - pass ``--set heap_fillfactor=N`` to the runs to keep the same
reserve (PostgreSQL keeps it per table).

Existing indexes on the tables when ``g`` runs alone (``-I g``) are rebuilt after the load,
since a bulk load does not maintain them.

Through a server (``target`` a ``Served``: ``minidb bench -i -h DIR``, or a DATADIR that a
``minidb serve`` holds) the steps are the SQL pgbench 15 itself sends, over the protocol:
``DROP TABLE IF EXISTS``, ``CREATE TABLE``, then in one transaction ``TRUNCATE`` and
``COPY ... FROM STDIN WITH (FREEZE ON)`` of each table (the rows generated here, streamed in
CopyData messages of 100,000 rows, a progress line after each), ``VACUUM ANALYZE``, and
``ALTER TABLE ... ADD PRIMARY KEY``.  The server's COPY loads rows as any COPY does (its
departures: minidb/server/README.md); ``-F`` is the session's ``heap_fillfactor`` during the
load, as embedded.

``accounts_per_scale`` (hidden CLI option ``--accounts-per-scale``) shrinks pgbench_accounts
for tests only: the built-in scripts and ``--check`` then use the same figure.  Published
pgbench results all use 100,000.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import minidb.errors as errors
from minidb.config import BLCKSZ
from minidb.pgbench.conn import BenchError, Log, Served, connect, open_target
from minidb.pgbench.scripts import NACCOUNTS, NBRANCHES, NTELLERS

__all__ = ["init_pgbench", "InitResult", "TABLES", "DEFAULT_STEPS"]

TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_history", "pgbench_tellers")
DEFAULT_STEPS = "dtgvp"
LOAD_BATCH_ROWS = 100_000     # pgbench reports progress every 100,000 rows
QUIET_LOG_SECONDS = 5.0       # -q: a progress line every 5 seconds instead
BIGINT_SCALE = 20_000         # aid exceeds int4 from here (pgbench's SCALE_32BIT_THRESHOLD)

_STEP_NAMES = {"d": "drop tables", "t": "create tables", "g": "client-side generate",
               "v": "vacuum", "p": "primary keys"}
_STEP_BANNERS = {"d": "dropping old tables...", "t": "creating tables...",
                 "g": "generating data (client-side)...", "v": "vacuuming...",
                 "p": "creating primary keys..."}
_NOT_HERE = {"G": "server-side data generation (G)", "f": "foreign keys (f)"}

_PKEYS = (("pgbench_branches", "bid"), ("pgbench_tellers", "tid"), ("pgbench_accounts", "aid"))


@dataclass
class InitResult:
    """What ``init_pgbench`` did: the steps, each one's seconds, and the tables' rows and
    heap pages afterwards."""
    scale: int
    steps: str
    step_seconds: dict = field(default_factory=dict)   # printed name -> seconds
    total_seconds: float = 0.0
    rows: dict = field(default_factory=dict)
    pages: dict = field(default_factory=dict)

    def done_line(self) -> str:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in self.step_seconds.items())
        return f"done in {self.total_seconds:.2f} s ({parts})."


def _ddl(scale: int) -> list[str]:
    aid = "bigint" if scale >= BIGINT_SCALE else "int"
    return [
        f"CREATE TABLE pgbench_history (tid int, bid int, aid {aid}, delta int, "
        f"mtime timestamp, filler char(22))",
        "CREATE TABLE pgbench_tellers (tid int not null, bid int, tbalance int, filler char(84))",
        f"CREATE TABLE pgbench_accounts (aid {aid} not null, bid int, abalance int, "
        f"filler char(84))",
        "CREATE TABLE pgbench_branches (bid int not null, bbalance int, filler char(88))",
    ]


def init_pgbench(target, scale: int = 1, *, fillfactor: int = 100, vacuum: bool = True,
                 steps: str | None = None, quiet: bool = False,
                 accounts_per_scale: int = NACCOUNTS, settings: dict | None = None,
                 log=None) -> InitResult:
    """Create and fill pgbench's tables in ``target`` (a data directory or an open
    Instance).  ``log``: a stream for pgbench's progress messages (None: silent)."""
    if scale < 1:
        raise BenchError(f'invalid scaling factor: "{scale}"')
    if not 10 <= fillfactor <= 100:
        raise BenchError(f'invalid fillfactor: "{fillfactor}"')
    if accounts_per_scale < 1:
        raise BenchError(f"invalid accounts per scale: {accounts_per_scale}")
    if steps is None:
        steps = DEFAULT_STEPS if vacuum else DEFAULT_STEPS.replace("v", "")
    for s in steps:
        if s in _NOT_HERE:
            raise BenchError(f"initialization step {_NOT_HERE[s]} is not supported by minidb")
        if s not in _STEP_NAMES and s != " ":
            raise BenchError(f'unrecognized initialization step "{s}"\n'
                             'Allowed step characters are: "dtgvp".')
    say = Log.of(log)
    res = InitResult(scale, steps)
    t_all = time.perf_counter()
    with open_target(target, settings, create=True) as (inst, sess_settings):
        if isinstance(inst, Served):        # a server holds it: through its socket
            _init_served(inst, res, scale, fillfactor, accounts_per_scale, quiet,
                         sess_settings, say)
            res.total_seconds = time.perf_counter() - t_all
            say(res.done_line())
            return res
        session, engine = connect(inst, sess_settings)
        try:
            for s in steps:
                if s == " ":
                    continue
                say(_STEP_BANNERS[s])
                t0 = time.perf_counter()
                if s == "d":
                    r = engine.execute("DROP TABLE IF EXISTS " + ", ".join(TABLES))
                    for m in r.messages:
                        say(m)
                elif s == "t":
                    for sql in _ddl(scale):
                        engine.execute(sql)
                elif s == "g":
                    _generate(session, engine, scale, fillfactor, accounts_per_scale, quiet, say)
                elif s == "v":
                    for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts",
                              "pgbench_history"):
                        engine.execute(f"VACUUM ANALYZE {t}")
                elif s == "p":
                    _primary_keys(session)
                res.step_seconds[_STEP_NAMES[s]] = time.perf_counter() - t0
            res.total_seconds = time.perf_counter() - t_all
            cat = inst.catalog
            cat.refresh()
            for t in TABLES:
                if t in cat.tables:
                    res.rows[t] = engine.execute(f"SELECT count(*) FROM {t}").rows[0][0]
                    res.pages[t] = inst.smgr.nblocks(cat.tables[t].relfilenode)
        except errors.Error as e:
            raise BenchError(f"{type(e).__name__}: {e}") from e
        finally:
            session.close()
    say(res.done_line())
    return res


def _generate(session, engine, scale, fillfactor, aps, quiet, say) -> None:
    from minidb.heap.heapam import heap_bulk_insert
    from minidb.index import create_index, drop_index
    from minidb.txn.clog import FROZEN_XID

    backend = session.backend
    cat = session.backend.catalog
    cat.refresh()
    for t in ("pgbench_accounts", "pgbench_branches", "pgbench_tellers"):
        cat.table(t)  # all exist (UndefinedTable otherwise)
    # indexes a bulk load would leave stale: dropped now, rebuilt after the load
    saved = []
    for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts"):
        for iname in list(cat.tables[t].indexes):
            idef = cat.indexes[iname]
            saved.append((idef.table, idef.name, list(idef.columns), idef.unique, idef.primary))
            drop_index(backend, iname)
    engine.execute("TRUNCATE " + ", ".join(TABLES))
    before = session.settings.get("heap_fillfactor")
    engine.execute(f"SET heap_fillfactor = {fillfactor}")
    try:
        nb, nt, na = NBRANCHES * scale, NTELLERS * scale, aps * scale
        bid = np.arange(1, nb + 1, dtype=np.int32)
        heap_bulk_insert(backend, cat.heap_rel("pgbench_branches"),
                         {"bid": bid, "bbalance": np.zeros(nb, np.int32)}, nb, xmin=FROZEN_XID)
        tid = np.arange(1, nt + 1, dtype=np.int32)
        heap_bulk_insert(backend, cat.heap_rel("pgbench_tellers"),
                         {"tid": tid, "bid": (tid - 1) // NTELLERS + 1,
                          "tbalance": np.zeros(nt, np.int32)}, nt, xmin=FROZEN_XID)
        arel = cat.heap_rel("pgbench_accounts")
        aid_type = np.int64 if scale >= BIGINT_SCALE else np.int32
        t0 = time.perf_counter()
        last_log = t0
        for lo in range(0, na, LOAD_BATCH_ROWS):
            hi = min(lo + LOAD_BATCH_ROWS, na)
            n = hi - lo
            aid = np.arange(lo + 1, hi + 1, dtype=aid_type)
            heap_bulk_insert(backend, arel,
                             {"aid": aid, "bid": ((aid - 1) // aps + 1).astype(np.int32),
                              "abalance": np.zeros(n, np.int32), "filler": [""] * n},
                             n, xmin=FROZEN_XID)
            now = time.perf_counter()
            elapsed = now - t0
            if quiet:
                if now - last_log < QUIET_LOG_SECONDS and hi < na:
                    continue
                last_log = now
            elif hi % LOAD_BATCH_ROWS != 0:
                continue
            remaining = (na - hi) * elapsed / hi
            say(f"{hi} of {na} tuples ({hi * 100 // na}%) done "
                f"(elapsed {elapsed:.2f} s, remaining {remaining:.2f} s)")
    finally:
        engine.execute(f"SET heap_fillfactor = {before}")
    for table, name, cols, unique, primary in saved:
        create_index(backend, table, name, cols, unique=unique, primary=primary)


def _init_served(target: Served, res: InitResult, scale: int, fillfactor: int, aps: int,
                 quiet: bool, settings: dict | None, say) -> None:
    """``init_pgbench``'s steps through a server's socket (see the module docstring)."""
    from minidb.pgwire.client import PGClient  # (the client: only when a server is used)
    try:
        client = PGClient(path=target.path, host=target.host, port=target.port,
                          user=target.user, password=target.password,
                          params={k: ("on" if v is True else "off" if v is False else str(v))
                                  for k, v in (settings or {}).items()})
    except errors.Error as e:
        raise BenchError(f"connection to server failed: {e}") from None
    try:
        for s in res.steps:
            if s == " ":
                continue
            say(_STEP_BANNERS[s])
            t0 = time.perf_counter()
            if s == "d":
                (r,) = client.simple("DROP TABLE IF EXISTS " + ", ".join(TABLES))
                for m in r.messages:
                    say(m)
            elif s == "t":
                for sql in _ddl(scale):
                    client.simple(sql)
            elif s == "g":
                _copy_served(client, scale, fillfactor, aps, quiet, say)
            elif s == "v":
                for t in ("pgbench_branches", "pgbench_tellers", "pgbench_accounts",
                          "pgbench_history"):
                    client.simple(f"VACUUM ANALYZE {t}")
            elif s == "p":
                for table, col in _PKEYS:
                    client.simple(f"ALTER TABLE {table} ADD PRIMARY KEY ({col})")
            res.step_seconds[_STEP_NAMES[s]] = time.perf_counter() - t0
        for t in TABLES:
            (r,) = client.simple(
                f"SELECT count(*), pg_relation_size('{t}'::regclass) FROM {t}")
            n, size = r.rows[0]
            res.rows[t], res.pages[t] = int(n), int(size) // BLCKSZ
    except errors.Error as e:
        raise BenchError(f"{type(e).__name__}: {e}") from e
    finally:
        client.close()


def _copy_served(client, scale, fillfactor, aps, quiet, say) -> None:
    """The ``g`` step over the protocol: one transaction, TRUNCATE and three COPYs."""
    nb, nt, na = NBRANCHES * scale, NTELLERS * scale, aps * scale
    (before,) = client.simple("SHOW heap_fillfactor")
    client.simple(f"SET heap_fillfactor = {fillfactor}")
    client.simple("BEGIN")
    try:
        client.simple("TRUNCATE " + ", ".join(TABLES))
        client.simple("COPY pgbench_branches FROM STDIN WITH (FREEZE ON)", copy_data=[
            "".join(f"{b}\t0\t\\N\n" for b in range(1, nb + 1))])
        client.simple("COPY pgbench_tellers FROM STDIN WITH (FREEZE ON)", copy_data=[
            "".join(f"{t}\t{(t - 1) // NTELLERS + 1}\t0\t\\N\n" for t in range(1, nt + 1))])
        t0 = time.perf_counter()
        last_log = [t0]

        def accounts():
            for lo in range(0, na, LOAD_BATCH_ROWS):
                hi = min(lo + LOAD_BATCH_ROWS, na)
                yield "".join(f"{a}\t{(a - 1) // aps + 1}\t0\t\n" for a in range(lo + 1, hi + 1))
                now = time.perf_counter()
                if quiet:
                    if now - last_log[0] < QUIET_LOG_SECONDS and hi < na:
                        continue
                    last_log[0] = now
                elif hi % LOAD_BATCH_ROWS != 0:
                    continue
                elapsed = now - t0
                say(f"{hi} of {na} tuples ({hi * 100 // na}%) done "
                    f"(elapsed {elapsed:.2f} s, remaining {(na - hi) * elapsed / hi:.2f} s)")
        client.simple("COPY pgbench_accounts FROM STDIN WITH (FREEZE ON)",
                      copy_data=accounts())
        client.simple("COMMIT")
    except BaseException:
        if client.transaction_status != "I" and not client.closed:
            client.simple("ROLLBACK")
        raise
    finally:
        client.simple(f"SET heap_fillfactor = {before.rows[0][0]}")


def _primary_keys(session) -> None:
    from minidb.index import create_index
    for table, col in _PKEYS:
        create_index(session.backend, table, f"{table}_pkey", [col], unique=True, primary=True)
