"""minidb.sql.normalize's cache of skeletons agrees with the lexer's walk (its definition)
on generated statements: the first text of a skeleton teaches the cache, the next ones with
other literals (other values, other kinds, integers out of range) must get exactly what the
walk gives them."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from minidb.sql import normalize as N

_WORDS = ["SELECT", "INSERT", "UPDATE", "DELETE", "INTO", "FROM", "WHERE", "SET", "VALUES",
          "IN", "AND", "OR", "ORDER", "BY", "GROUP", "LIMIT", "OFFSET", "RETURNING", "ON",
          "abs", "k", "v", "b1", "t_2", "E", "x", "e5", "in", "values", "where", "CURRENT_TIMESTAMP"]
_OPS = ["=", "<>", "!=", "<", "-", "+", "*", "/", "(", ")", ",", "::", ".", ";", "[", "]",
        "||", "é", "١", "'", "\x00", "?", "$1", "--", "\""]
_INTS = ["0", "5", "42", "007", "2147483647", "2147483648", "9223372036854775807",
         "9223372036854775808", "99999999999999999999", "١٢"]
_OTHER_NUMS = ["1.5", ".5", "5.", "1e3", "2E-2"]
_STRS = ["'a'", "''", "'it''s'", "'x y'", "'5'", "'a''''b'"]
_LITS = _INTS + _OTHER_NUMS + _STRS

_piece = st.one_of(st.sampled_from(_WORDS), st.sampled_from(_OPS), st.just(None))
_sep = st.sampled_from([" ", " ", " ", "", "  ", "\n"])


@st.composite
def _template(draw):
    """A statement of words, operators and literal slots (None), as pieces and separators."""
    first = draw(st.sampled_from(["SELECT", "INSERT", "UPDATE", "DELETE", "select", "BEGIN"]))
    body = draw(st.lists(st.tuples(_piece, _sep), min_size=0, max_size=14))
    return [(first, " ")] + body


_expr = st.recursive(
    st.sampled_from([[None], ["-", None], ["k"], ["b1"], [None, "::", "int"], ["abs", "(", None, ")"],
                     ["x", ".", None], ["CURRENT_TIMESTAMP"]]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "||", "/"]), inner).map(
            lambda t: t[0] + [t[1]] + t[2]),
        inner.map(lambda e: ["("] + e + [")"]),
        st.lists(inner, min_size=1, max_size=3).map(
            lambda es: ["("] + sum(([","] + e for e in es[1:]), es[0]) + [")"])),
    max_leaves=4)
_cond = st.tuples(st.sampled_from(["k", "v", "(k)", "5", "t_2"]),
                  st.sampled_from(["=", "<>", "!=", "<", "IN", "BETWEEN"]), _expr).map(
    lambda t: [t[0], t[1]] + t[2])
_conds = st.lists(_cond, min_size=1, max_size=3).map(
    lambda cs: sum((["AND"] + c for c in cs[1:]), cs[0]))
_tail = st.sampled_from([[], ["ORDER", "BY", None], ["LIMIT", None], ["RETURNING", None],
                         ["GROUP", "BY", None, "LIMIT", None], [";"], [";", "SELECT", None],
                         ["'"], ["é"], ["\x00"], ["E", None]])
_stmt = st.one_of(
    st.tuples(st.sampled_from([["SELECT", "v", "FROM", "a"], ["SELECT", None, ",", "k", "FROM", "a"],
                               ["DELETE", "FROM", "a"]]), _conds, _tail).map(
        lambda t: t[0] + ["WHERE"] + t[1] + t[2]),
    st.tuples(st.lists(st.tuples(st.sampled_from(["v", "s"]), _expr), min_size=1, max_size=3),
              _conds, _tail).map(
        lambda t: ["UPDATE", "a", "SET"] + sum(([","] + [c, "="] + e for c, e in t[0][1:]),
                                              [t[0][0][0], "="] + t[0][0][1]) + ["WHERE"] + t[1] + t[2]),
    st.tuples(st.lists(st.lists(_expr, min_size=1, max_size=3), min_size=1, max_size=2), _tail).map(
        lambda t: ["INSERT", "INTO", "a", "VALUES"] + sum(
            ([","] + ["("] + sum(([","] + e for e in row[1:]), row[0]) + [")"] for row in t[0][1:]),
            ["("] + sum(([","] + e for e in t[0][0][1:]), t[0][0][0]) + [")"]) + t[1]))


@st.composite
def _statement(draw):
    """A statement of the shapes normalize replaces in, as pieces and separators."""
    pieces = draw(_stmt)
    return [(p, draw(_sep)) for p in pieces]


def _fill(template, lits):
    out = []
    it = iter(lits)
    for piece, sep in template:
        out.append(next(it) if piece is None else piece)
        out.append(sep)
    return "".join(out)


def _check(sql):
    assert N.normalize(sql) == N._walk(sql), sql
    assert N.normalize(sql) == N._walk(sql), sql     # (now from the cache)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_template(), _statement(), _statement()), st.data())
def test_fast_normalize_agrees_with_the_walk(template, data):
    n = sum(1 for p, _ in template if p is None)
    ints = st.lists(st.sampled_from(_INTS[:7]), min_size=n, max_size=n)
    any_lits = st.lists(st.sampled_from(_LITS), min_size=n, max_size=n)
    _check(_fill(template, data.draw(ints)))           # teaches the skeleton
    _check(_fill(template, data.draw(ints)))           # other values, same kinds
    _check(_fill(template, data.draw(any_lits)))       # other kinds, decimals, huge integers


def test_pgbench_statements_from_the_cache():
    N._SKELETONS.clear()
    for aid, delta in ((1, 5), (100000, -5000), (2147483648, -2147483648), (77, 0)):
        for sql in (f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid}",
                    f"UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid}",
                    f"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                    f"VALUES (3, 1, {aid}, {delta}, CURRENT_TIMESTAMP)",
                    f"SELECT * FROM a WHERE k = {aid} ORDER BY 2 LIMIT {delta + 5001}"):
            _check(sql)
    # one skeleton per statement and sign (a unary minus is part of the skeleton)
    assert len({k.replace("-", "") for k in N._SKELETONS}) == 4
    assert all(r is not N._LEX for r in N._SKELETONS.values())


def test_skeleton_literals_and_their_kinds():
    # a kept literal changing kind, a string after an integer, a literal inside a word
    for sql in ("SELECT 5 FROM a WHERE k = 1", "SELECT 'x' FROM a WHERE k = 1",
                "SELECT * FROM a WHERE k = 5'x'", "SELECT * FROM a WHERE k = 6'y'",
                "SELECT * FROM a WHERE k = t1", "SELECT * FROM a WHERE k = t2",
                "SELECT * FROM a WHERE k = 1.5", "SELECT * FROM a WHERE k = 1.25",
                "SELECT * FROM a WHERE k = 99999999999999999999",
                "SELECT * FROM a WHERE k = 9", "SELECT * FROM a WHERE s = 'a\x00b'",
                "SELECT * FROM a WHERE k IN (1, 2) AND s = E'q'",
                "SELECT * FROM a WHERE k IN (3, 4) AND s = E'r'"):
        _check(sql)


def test_integers_of_thousands_of_digits_stay_in_the_text():
    huge = "9" * 5000
    for sql in (f"SELECT v FROM a WHERE k = {huge}", f"SELECT v FROM a WHERE k = 5 AND b = {huge}",
                f"SELECT v FROM a WHERE k = 6 AND b = {huge}", f"SELECT v FROM a WHERE k = 7 AND b = 8"):
        _check(sql)
    assert N.normalize(f"SELECT v FROM a WHERE k = {huge}") is None
    assert N.normalize(f"SELECT v FROM a WHERE k = 5 AND b = -{huge}")[2] == [5]
    assert N.normalize("SELECT v FROM a WHERE k = " + "0" * 5000 + "5")[2] == [5]

