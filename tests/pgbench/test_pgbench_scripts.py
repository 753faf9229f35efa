"""Script parsing: the built-in scripts are pgbench's statement for statement, and ``-f``
files follow pgbench's rules (meta commands, multi-line SQL, ``:variables``, ``\\gset``,
weights, errors naming file and line)."""

from __future__ import annotations

import pytest

from minidb.pgbench.scripts import (BUILTIN_SCRIPTS, ScriptError, builtin_script, find_builtin,
                                  load_script, parse_script)

TPCB_TEXTS = [
    "\\set aid random(1, 100000 * :scale)",
    "\\set bid random(1, 1 * :scale)",
    "\\set tid random(1, 10 * :scale)",
    "\\set delta random(-5000, 5000)",
    "BEGIN;",
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, "
    ":delta, CURRENT_TIMESTAMP);",
    "END;",
]


def test_tpcb_like_is_pgbench_statement_for_statement():
    s = builtin_script("tpcb-like")
    assert s.desc == "<builtin: TPC-B (sort of)>"
    assert [c.text for c in s.commands] == TPCB_TEXTS
    upd = s.commands[5]
    assert upd.params == ["delta", "aid"]
    assert upd.qmark == "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"
    assert s.commands[9].params == ["tid", "bid", "aid", "delta"]


def test_other_builtins_drop_statements_as_pgbench():
    su = builtin_script("simple-update")
    assert su.desc == "<builtin: simple update>"
    assert [c.text for c in su.commands] == TPCB_TEXTS[:7] + TPCB_TEXTS[9:]
    so = builtin_script("select-only")
    assert so.desc == "<builtin: select only>"
    assert [c.text for c in so.commands] == [TPCB_TEXTS[0], TPCB_TEXTS[6]]


def test_accounts_per_scale_override_changes_only_the_aid_range():
    s = builtin_script("tpcb-like", accounts_per_scale=1000)
    assert s.commands[0].text == "\\set aid random(1, 1000 * :scale)"
    assert [c.text for c in s.commands[1:]] == TPCB_TEXTS[1:]


def test_names_abbreviate_and_take_weights():
    assert find_builtin("tpcb") == "tpcb-like"
    assert find_builtin("se") == "select-only"
    s = builtin_script("simple@7")
    assert (s.builtin, s.weight) == ("simple-update", 7)
    with pytest.raises(ScriptError, match="no builtin script found"):
        find_builtin("nosuch")
    with pytest.raises(ScriptError, match="ambiguous"):
        find_builtin("s")
    assert set(BUILTIN_SCRIPTS) == {"tpcb-like", "simple-update", "select-only"}


def test_custom_script_rules():
    text = """-- a comment line
\\set n random_zipfian(1, 10, 1.2) + \\
      :client_id
SELECT 1; SELECT :n,
   2::int,     -- trailing comment :notavar
   '10:30' AS t, ":quoted" AS q;
\\sleep 2 ms
INSERT INTO t VALUES (:n)"""
    s = parse_script(text, "mine.sql")
    kinds = [c.kind for c in s.commands]
    assert kinds == ["set", "sql", "sql", "sleep", "sql"]
    assert s.commands[0].expr.variables == {"client_id"}
    assert s.commands[1].text == "SELECT 1;"
    sel = s.commands[2]
    assert sel.params == ["n"]
    assert "2::int" in sel.qmark and "'10:30'" in sel.qmark and '":quoted"' in sel.qmark
    assert s.commands[3].unit_s == 1e-3
    assert s.commands[4].params == ["n"]          # the last command needs no semicolon
    assert s.commands[2].lineno == 4


def test_gset_ends_a_query():
    s = parse_script("SHOW enable_seqscan \\gset\nSELECT 1 AS a, 2 AS b \\aset p_\nSELECT :p_a;",
                     "g")
    assert [(c.gset, c.aset) for c in s.commands] == [("", False), ("p_", True), (None, False)]
    assert s.commands[0].qmark == "SHOW enable_seqscan"
    assert s.commands[1].text == "SELECT 1 AS a, 2 AS b \\aset p_"


@pytest.mark.parametrize("text, message", [
    ("\\set x random(1,\nSELECT 1;", 'f.sql:1: unexpected end of expression in command "set"'),
    ("SELECT 1;\n\\set\n", 'f.sql:2: missing argument in command "set"'),
    ("\\sleep 1 hours", "unrecognized time unit"),
    ("\\sleep abc", "invalid sleep time"),
    ("\\shell ls", 'meta command "\\shell" is not supported'),
    ("\\frobnicate", 'invalid command "\\frobnicate"'),
    ("\\gset", "must end an SQL command"),
    ("SELECT 'open", "unterminated quoted string"),
    ("-- nothing\n\n", "empty command list"),
])
def test_errors_name_file_and_line(text, message):
    with pytest.raises(ScriptError) as e:
        parse_script(text, "f.sql", source="f.sql")
    assert message in str(e.value)


def test_set_error_points_at_the_column():
    with pytest.raises(ScriptError) as e:
        parse_script("\\set x 1 + foo(2)", "f", source="f")
    lines = str(e.value).splitlines()
    assert lines[1] == "\\set x 1 + foo(2)"
    assert lines[2].index("^") == lines[1].index("foo")


def test_load_script_file_and_weight(tmp_path):
    p = tmp_path / "s.sql"
    p.write_text("\\set a 1\nSELECT :a;\n")
    s = load_script(f"{p}@3")
    assert (s.desc, s.weight, len(s.commands)) == (str(p), 3, 2)
    with pytest.raises(ScriptError, match="could not read file"):
        load_script(str(tmp_path / "missing.sql"))


def test_current_timestamp_fallback_becomes_a_parameter():
    """When the engine lacks CURRENT_TIMESTAMP, clients pass the time as a value."""
    from minidb.pgbench.client import _NOW, _now_as_parameter
    cmd = builtin_script("tpcb-like").commands[9]
    fr, pa = _now_as_parameter(cmd.fragments, cmd.params)
    assert pa == ["tid", "bid", "aid", "delta", _NOW]
    assert "?".join(fr) == ("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                            "VALUES (?, ?, ?, ?, ?)")
    fr, pa = _now_as_parameter(["SELECT current_timestamp, ", " + CURRENT_TIMESTAMP"], ["x"])
    assert (fr, pa) == (["SELECT ", ", ", " + ", ""], [_NOW, "x", _NOW])
