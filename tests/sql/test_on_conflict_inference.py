"""ON CONFLICT's arbiter inference for expression and partial unique indexes (PostgreSQL's
infer_arbiter_indexes): ``(lower(name))``, ``((n + 1), id)`` in any order, ``(id) WHERE
active`` - a partial index is inferred only when the WHERE implies its predicate, and only
rows its predicate accepts conflict in it.  Expected results from PostgreSQL 15."""

from __future__ import annotations

import pytest

from minidb import errors


@pytest.fixture
def oc(db):
    db.x("CREATE TABLE oc (id int, name text, active bool, n int)")
    db.x("CREATE UNIQUE INDEX oc_lower ON oc (lower(name))")
    db.x("CREATE UNIQUE INDEX oc_act ON oc (id) WHERE active")
    db.x("CREATE UNIQUE INDEX oc_expr2 ON oc ((n + 1), id)")
    db.x("INSERT INTO oc VALUES (1, 'Ann', true, 1)")
    return db


def test_expression_index(oc):
    assert oc.rows("INSERT INTO oc VALUES (2, 'ann', true, 5) ON CONFLICT (lower(name)) "
                   "DO UPDATE SET n = oc.n + 10 RETURNING *") == [(1, "Ann", True, 11)]
    assert oc.rows("INSERT INTO oc VALUES (3, 'Eve', true, 10) ON CONFLICT (id, (n + 1)) "
                   "DO NOTHING RETURNING *") == [(3, "Eve", True, 10)]
    assert oc.rows("INSERT INTO oc VALUES (3, 'Eve2', true, 10) ON CONFLICT ((n+1), id) "
                   "DO UPDATE SET name = excluded.name RETURNING *") == [(3, "Eve2", True, 10)]


def test_partial_index(oc):
    assert oc.rows("INSERT INTO oc VALUES (1, 'Bob', true, 7) ON CONFLICT (id) WHERE active "
                   "DO UPDATE SET name = excluded.name RETURNING *") == [(1, "Bob", True, 1)]
    # not active: outside the partial index, so no conflict - inserted
    assert oc.rows("INSERT INTO oc VALUES (1, 'Cid', false, 8) ON CONFLICT (id) WHERE active "
                   "DO NOTHING RETURNING *") == [(1, "Cid", False, 8)]
    r = oc.x("INSERT INTO oc VALUES (1, 'Dan', true, 9) ON CONFLICT (id) "
             "WHERE active AND n > 0 DO NOTHING RETURNING *")
    assert r.rows == [] and r.status == "INSERT 0 0"
    assert oc.rows("SELECT * FROM oc ORDER BY id, name") == \
        [(1, "Bob", True, 1), (1, "Cid", False, 8)]


@pytest.mark.parametrize("target", [
    "(id)",                       # the index on id is partial: a WHERE must imply active
    "(id) WHERE n > 0",           # ... and this one does not
    "((n + 2), id)",              # not the indexed expression
    "(lower(name), id)",          # more than the index's key
])
def test_no_matching_index(oc, target):
    with pytest.raises(errors.ProgrammingError) as ei:
        oc.x(f"INSERT INTO oc VALUES (4, 'x', true, 1) ON CONFLICT {target} DO NOTHING")
    assert ei.value.sqlstate == "42P10"
    assert "there is no unique or exclusion constraint matching the ON CONFLICT " \
           "specification" in str(ei.value)
