"""to_char for numbers (``minidb.exec.numfmt``): a grid of values x patterns x types against
PostgreSQL 15's answers (``golden/pg15_to_char_numbers.json``, made by
``pg_golden_to_char.py``), run through SQL one query per pattern and type, and the pattern
errors."""

from __future__ import annotations

import json

import pytest

from minidb import errors
from tests.sql.pg_golden_to_char import GOLDEN, PATTERNS, TYPES, VALUES

with open(GOLDEN) as _fh:
    PG = json.load(_fh)


@pytest.mark.parametrize("typ", TYPES)
def test_grid_matches_postgres(db, typ):
    vals = [v for v in VALUES if typ != "int" or ("." not in v and "e" not in v)]
    rows = ", ".join(f"({k}, '{v}')" for k, v in enumerate(vals))
    bad = []
    for f in PATTERNS:
        got = db.rows(f"SELECT k, to_char(v::{typ}, $1) FROM (VALUES {rows}) x(k, v) "
                      "ORDER BY k", f)
        for (k, text), v in zip(got, vals):
            want = PG[f"{typ}|{v}|{f}"]
            if text != want:
                bad.append((v, f, want, text))
    assert not bad, bad[:10]


def test_real_smallint_null_and_literal_text(db):
    assert db.rows("SELECT to_char(12.5::real, '99.99'), to_char(1.23456789::real, "
                   "'9.99999999'), to_char(5::smallint, '00'), to_char(NULL::int, '9'), "
                   "to_char(5, NULL), to_char(1.5, 'FM9.9 \"x\"')") == \
        [(" 12.50", " 1.23457", " 05", None, None, "1.5 x")]
    assert db.rows("SELECT to_char(x, 'FM9,999.00'), to_char(x::float8, 'S9999.9') FROM "
                   "(VALUES (1234.5::numeric), (-0.125), (NULL)) v(x)") == \
        [("1,234.50", "+1234.5"), ("-.13", "    -.1"), (None, None)]
    # PostgreSQL 15: '[ NaN]', '[NaN]', '[ NaN]', ' ###.#'
    assert db.rows("SELECT to_char('NaN'::float8, '999.9'), "
                   "to_char('Infinity'::float8, '999.9')") == [(" NaN", " ###.#")]


@pytest.mark.parametrize("fmt,err,msg", [
    ("9.9.9", errors.ProgrammingError, "multiple decimal points"),
    ("9PR9", errors.ProgrammingError, '"9" must be ahead of "PR"'),
    ("S9S", errors.ProgrammingError, 'cannot use "S" twice'),
    ("S9PR", errors.ProgrammingError, 'cannot use "PR" and "S"/"PL"/"MI"/"SG" together'),
    ("RN", errors.NotSupportedError, 'the pattern "RN" is not supported'),
])
def test_pattern_errors(db, fmt, err, msg):
    with pytest.raises(err) as ei:
        db.x("SELECT to_char(5, $1)", fmt)
    assert msg in str(ei.value)
