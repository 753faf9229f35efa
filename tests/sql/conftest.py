"""Fixtures for the SQL tests: an instance, sessions with engines, and a full dump of the
database (every table's rows, sorted, plus the catalog's tables and indexes) used to check
that a failed statement left everything as it was."""

from __future__ import annotations

import pytest

from minidb.instance import Instance
from minidb.session import Session
from minidb.sql import Engine


class DB:
    """A session and its engine, with small helpers."""

    def __init__(self, inst, **settings):
        self.inst = inst
        self.session = Session(inst, **settings)
        self.engine = Engine(self.session)

    def x(self, sql, *params):
        return self.engine.execute(sql, list(params) if params else None)

    def rows(self, sql, *params):
        return self.x(sql, *params).rows

    def one(self, sql, *params):
        rows = self.rows(sql, *params)
        assert len(rows) == 1, rows
        return rows[0][0] if len(rows[0]) == 1 else rows[0]

    def plan(self, sql, *params) -> str:
        return "\n".join(r[0] for r in self.rows("EXPLAIN " + sql, *params))

    def close(self):
        self.session.close()


def dump(db: DB) -> dict:
    """Everything a statement could change, as plain data."""
    cat = db.inst.catalog
    cat.refresh()
    out = {"tables": {}, "indexes": sorted((i.name, i.table, tuple(i.columns), i.unique)
                                           for i in cat.indexes.values())}
    for name in sorted(cat.tables):
        rows = db.rows(f'SELECT * FROM "{name}"')
        out["tables"][name] = sorted(rows, key=repr)
    return out


@pytest.fixture
def inst(tmp_path):
    i = Instance(tmp_path / "data", shared_buffers=256, allow_server_files=True)  # COPY files
    try:
        yield i
    finally:
        i.close()


@pytest.fixture
def db(inst):
    d = DB(inst, deadlock_timeout=100)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def db2(inst):
    d = DB(inst, deadlock_timeout=100)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def dumper():
    return dump
