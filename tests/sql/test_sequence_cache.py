"""Sequences with CACHE above 1 (``minidb.catalog.sequence``): each session reserves CACHE
values at a time and hands them out from its own memory, as PostgreSQL's SeqTable.  The
expected values are PostgreSQL 15's for the same two-session script."""

from __future__ import annotations

import pytest

from minidb import errors
from tests.sql.conftest import DB


@pytest.fixture
def ab(inst):
    a, b = DB(inst), DB(inst)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _next(db, seq, n):
    return [db.one(f"SELECT nextval('{seq}')") for _ in range(n)]


def test_two_sessions_interleave_in_blocks(ab):
    a, b = ab
    a.x("CREATE SEQUENCE sc CACHE 5")
    assert _next(a, "sc", 2) == [1, 2]
    assert _next(b, "sc", 2) == [6, 7]
    assert _next(a, "sc", 4) == [3, 4, 5, 11]
    assert b.one("SELECT currval('sc')") == 7 and b.one("SELECT lastval()") == 7
    a.x("SELECT setval('sc', 100)")               # drops a's cache, not b's
    assert _next(a, "sc", 2) == [101, 102]
    assert _next(b, "sc", 4) == [8, 9, 10, 106]
    a.x("ALTER SEQUENCE sc RESTART WITH 1000")
    assert _next(a, "sc", 2) == [1000, 1001]


def test_cycle_and_limit(ab):
    a, b = ab
    a.x("CREATE SEQUENCE sc2 INCREMENT 3 MAXVALUE 10 CYCLE CACHE 4")
    assert _next(a, "sc2", 6) == [1, 4, 7, 10, 1, 4]
    assert _next(b, "sc2", 3) == [1, 4, 7]
    a.x("CREATE SEQUENCE sc3 MAXVALUE 3 CACHE 10")
    assert _next(a, "sc3", 3) == [1, 2, 3]
    for db in (a, b):
        with pytest.raises(errors.SequenceGeneratorLimitExceeded) as ei:
            db.x("SELECT nextval('sc3')")
        assert 'nextval: reached maximum value of sequence "sc3" (3)' in str(ei.value)


def test_serial_with_cache(ab):
    a, b = ab
    a.x("CREATE TABLE st (id serial, v int)")
    a.x("ALTER SEQUENCE st_id_seq CACHE 3")
    a.x("INSERT INTO st (v) VALUES (1)")
    b.x("INSERT INTO st (v) VALUES (2)")
    a.x("INSERT INTO st (v) VALUES (3)")
    assert a.rows("SELECT * FROM st ORDER BY v") == [(1, 1), (4, 2), (2, 3)]


def test_cache_zero_is_refused(ab):
    a, _ = ab
    with pytest.raises(errors.InvalidParameterValue) as ei:
        a.x("CREATE SEQUENCE sc4 CACHE 0")
    assert "CACHE (0) must be greater than zero" in str(ei.value)
