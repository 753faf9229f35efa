"""The REPL (``minidb [DATADIR]``, ``minidb.repl``) and the ``minidb`` command line.

What is proven here:
  * psql's output formats, cell by cell: the aligned table (centred headers, numbers right,
    text left, multi-line cells marked ``+``, title, ``(N rows)``), the expanded ``\\x``
    records (the ``-[ RECORD n ]`` rule as psql draws it), values as PostgreSQL's text
    output (t/f, NULL as nothing, shortest exact floats with PostgreSQL's exponent range,
    timestamps without trailing zeros); borders 0 and 2, unaligned and tuples-only output
    (checked against psql 15's) in the ``pset`` golden;
  * golden transcripts: every ``tests/repl_golden/NAME.sql`` is piped into
    ``minidb DATADIR -a`` from the golden folder (a fresh data directory each, standard
    error merged into standard output) and the transcript, exit code included, must equal
    ``NAME.out`` byte for byte: errors that do not stop a script, ON_ERROR_STOP (exit 3),
    ``\\i``/``\\ir`` (files under ``include/``), ``\\set`` and interpolation, ``\\pset``,
    ``\\d+`` and name patterns, the query buffer (``\\g``, ``\\gx``, ``\\p``, ``\\r``).
    Regenerate them after an intended change of output with
    ``MINIDB_REGEN_GOLDEN=1 python -m pytest tests/test_repl.py`` and read the diff before
    committing it.  ``\\timing`` is off by default, so transcripts hold no times;
  * exit statuses as psql's, in subprocesses: a script runs to its end after errors (0),
    ON_ERROR_STOP stops it (3, from ``-v ON_ERROR_STOP=1`` or ``--on-error stop``); ``-c``
    exits with its last command's status (0/1), a multi-statement ``-c`` stops at its first
    failing statement; errors are one ``ERROR:  ...`` line on stderr without traceback, with
    ``minidb:FILE:LINE:`` for ``-f``; an unopenable data directory, a file given as one, a
    directory in use (the message names the holder's pid and what to do) exit 2; a new
    directory is announced on stderr; ``minidb demo`` is still a subcommand;
  * the scanner (quotes, comments, parentheses, variables, backslash commands inside a
    statement) and psql's name patterns; ``\\dt``'s row estimate (the planner's guess from
    the actual page count, then ANALYZE's measure); the pager (through ``PAGER``, only on a
    terminal and for long output unless ``always``); tab completion from the catalog;
  * interactive mode through prompt_toolkit's pipe input: a statement typed over two lines
    runs once, as one history entry; the prompt shows ``=*`` inside a transaction and
    ``=!`` inside a failed one; a backslash command inside a statement runs and the
    statement continues; ON_ERROR_STOP does not end an interactive session; ``\\q`` ends
    the loop.

Not proven: what a real terminal shows (colours, cursor movement, a real pager), the
history file across runs.
"""

from __future__ import annotations

import datetime
import io
import os
import re
import subprocess
import sys

import pytest

import minidb
from minidb.repl import Repl, _pg_float, format_aligned, format_expanded, format_value

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(minidb.__file__)))
GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repl_golden")
REGEN = os.environ.get("MINIDB_REGEN_GOLDEN") == "1"


def run_minidb(*args, stdin: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    """``minidb ARGS`` in a subprocess (standard error separate)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("MINIDB_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "minidb.cli", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


# ---------------------------------------------------------------------------------------------
# formats


def test_aligned_format_is_psqls():
    text = format_aligned(["a", "name", "x"], [["1", "hello", "ab"], ["22", "", "c\nde"]],
                          [True, False, False], title="Things")
    assert text == (
        "     Things\n"
        " a  | name  | x  \n"
        "----+-------+----\n"
        "  1 | hello | ab\n"
        " 22 |       | c +\n"
        "    |       | de\n"
        "(2 rows)\n"
        "\n")
    assert format_aligned(["?column?"], [["1"]], [True]) == (
        " ?column? \n----------\n        1\n(1 row)\n\n")
    assert format_aligned(["a"], [], [True]) == " a \n---\n(0 rows)\n\n"
    assert format_aligned(["c"], [["x"]], footer=["Indexes:", '    "i" btree (c)']) == (
        " c \n---\n x\nIndexes:\n    \"i\" btree (c)\n\n")


def test_expanded_format_is_psqls():
    assert format_expanded(["display_name", "b"], [["x", "1234567"], ["y", "a\nb"]]) == (
        "-[ RECORD 1 ]+--------\n"
        "display_name | x\n"
        "b            | 1234567\n"
        "-[ RECORD 2 ]+--------\n"
        "display_name | y\n"
        "b            | a      +\n"
        "             | b\n"
        "\n")
    assert format_expanded(["display_login", "b"], [["x", "1"]]).startswith(
        "-[ RECORD 1 ]-+--\n")  # as in psql's docs
    # names shorter than the label: the label eats the rule
    assert format_expanded(["a"], [["1"]]) == "-[ RECORD 1 ]\na | 1\n\n"
    assert format_expanded(["a"], []) == "(0 rows)\n\n"


def test_values_print_as_postgresql_prints_them():
    assert format_value(None) == "" and format_value(True) == "t" and format_value(False) == "f"
    assert format_value(42) == "42" and format_value("x y") == "x y"
    assert format_value(datetime.datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02 03:04:05"
    assert format_value(datetime.datetime(2024, 1, 2, 3, 4, 5, 120000)) == \
        "2024-01-02 03:04:05.12"
    cases = {1.0: "1", 2.5: "2.5", 0.1: "0.1", 1 / 3: "0.3333333333333333", -0.0: "-0",
             1e15: "1e+15", 123456789012345.0: "123456789012345", 1e-4: "0.0001",
             1e-5: "1e-05", 1.5e300: "1.5e+300", float("inf"): "Infinity",
             float("-inf"): "-Infinity", float("nan"): "NaN", 100.0: "100"}
    for f, want in cases.items():
        assert _pg_float(f) == want, f


# ---------------------------------------------------------------------------------------------
# golden transcripts


def golden_cases():
    return sorted(f[:-4] for f in os.listdir(GOLDEN) if f.endswith(".sql"))


@pytest.mark.parametrize("case", golden_cases())
def test_golden_transcript(case, tmp_path):
    with open(os.path.join(GOLDEN, case + ".sql")) as f:
        script = f.read()
    datadir = str(tmp_path / "data")
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("MINIDB_TRACEBACK", None)
    r = subprocess.run([sys.executable, "-m", "minidb.cli", datadir, "-a",
                        "--set", "shared_buffers=64"], input=script, cwd=GOLDEN,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=120)
    got = r.stdout.replace(os.path.realpath(datadir), "DATADIR")
    got += f"-- exit code {r.returncode}\n"
    expected_path = os.path.join(GOLDEN, case + ".out")
    if REGEN:
        with open(expected_path, "w") as f:
            f.write(got)
        return
    assert "Traceback" not in got
    if not os.path.exists(expected_path):
        pytest.fail(f"no {case}.out: run MINIDB_REGEN_GOLDEN=1 python -m pytest "
                    f"tests/test_repl.py and read the new file")
    with open(expected_path) as f:
        expected = f.read()
    assert got == expected, (f"transcript of {case}.sql differs from {case}.out "
                             "(MINIDB_REGEN_GOLDEN=1 regenerates it)")


# ---------------------------------------------------------------------------------------------
# -c, script mode, exit codes


def test_dash_c_prints_the_result_and_exits_0(tmp_path):
    d = str(tmp_path / "data")
    r = run_minidb(d, "--set", "shared_buffers=64", "-c",
                   "CREATE TABLE t (a integer, b text); INSERT INTO t VALUES (1, 'one');",
                   "-c", "SELECT a, b FROM t")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "CREATE TABLE\nINSERT 0 1\n a |  b  \n---+-----\n 1 | one\n(1 row)\n\n"
    assert r.stderr == f'minidb: created new data directory "{os.path.abspath(d)}"\n'
    r = run_minidb(d, "-c", "SELECT 1 AS one")   # an existing directory: nothing said
    assert r.returncode == 0 and r.stderr == ""
    r = run_minidb(d, "-c", "\\dt")
    assert r.returncode == 0 and " t " in r.stdout


def test_dash_c_error_is_one_line_without_traceback_and_exit_1(tmp_path):
    d = str(tmp_path / "data")
    assert run_minidb(d, "-c", "SELECT 1").returncode == 0   # created here, announced
    r = run_minidb(d, "-c", "SELECT * FROM no_such_table")
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith("ERROR:  ") and r.stderr.count("\n") == 1, r.stderr
    assert "no_such_table" in r.stderr and "Traceback" not in r.stderr
    r = run_minidb(d, "-c", "\\nonsense")
    assert r.returncode == 1 and r.stderr == "invalid command \\nonsense\nTry \\? for help.\n"


def test_script_goes_on_after_an_error_unless_on_error_stop(tmp_path):
    """psql's rules: a script runs to its end whatever fails (exit 0); ON_ERROR_STOP
    (``-v ON_ERROR_STOP=1``, ``--on-error stop``) stops it at the first error (exit 3)."""
    d = str(tmp_path / "data")
    script = ("CREATE TABLE t (a integer);\nINSERT INTO t VALUES (1);\nSELECT 1/0;\n"
              "INSERT INTO t VALUES (2);\n")
    r = run_minidb(d, stdin=script)
    assert r.returncode == 0
    assert r.stdout == "CREATE TABLE\nINSERT 0 1\nINSERT 0 1\n"
    assert r.stderr.endswith("ERROR:  division by zero\n")
    r = run_minidb(d, "-c", "SELECT count(*) FROM t")
    assert r.returncode == 0 and r.stdout.splitlines()[2].strip() == "2"
    rest = script.replace("CREATE", "-- ", 1)
    for stop in (["-v", "ON_ERROR_STOP=1"], ["--on-error", "stop"]):
        r = run_minidb(d, *stop, stdin=rest)
        assert r.returncode == 3, (stop, r.stderr)
        assert r.stdout == "INSERT 0 1\n" and r.stderr == "ERROR:  division by zero\n"
    r = run_minidb(d, "-c", "SELECT count(*) FROM t")
    assert r.stdout.splitlines()[2].strip() == "4"   # the INSERT after the error never ran
    r = run_minidb(d, "-v", "ON_ERROR_STOP=1", stdin="SELECT 1/0")  # the unfinished last
    assert r.returncode == 3
    script_file = tmp_path / "s.sql"
    script_file.write_text("SELECT 7 AS seven\n")  # no ';' at the end: run at end of input
    r = run_minidb(d, "-f", str(script_file))
    assert r.returncode == 0 and r.stdout == " seven \n-------\n     7\n(1 row)\n\n"
    script_file.write_text("SELECT 1;\n\nSELECT nosuch;\n")  # -f: errors say where
    r = run_minidb(d, "-f", str(script_file))
    assert r.returncode == 0
    assert r.stderr == f'minidb:{script_file}:3: ERROR:  column "nosuch" does not exist\n'



def test_dash_c_exit_status_is_psqls(tmp_path):
    """Each -c runs in turn; the exit status is the last one's (0 or 1); with ON_ERROR_STOP
    the first failure ends the run (exit 1).  One -c holding several statements stops at
    the first that fails, as the server does with a multi-statement query."""
    d = str(tmp_path / "data")
    assert run_minidb(d, "-c", "CREATE TABLE t (a integer)").returncode == 0
    r = run_minidb(d, "-c", "SELECT 1/0", "-c", "SELECT 1 AS x")
    assert r.returncode == 0 and " x " in r.stdout
    r = run_minidb(d, "-c", "SELECT 1 AS x", "-c", "SELECT 1/0")
    assert r.returncode == 1
    r = run_minidb(d, "-v", "ON_ERROR_STOP=1", "-c", "SELECT 1/0", "-c", "SELECT 1 AS x")
    assert r.returncode == 1 and r.stdout == ""
    r = run_minidb(d, "-c", "INSERT INTO t VALUES (1); SELECT 1/0; INSERT INTO t VALUES (2)")
    assert r.returncode == 1 and r.stdout == "INSERT 0 1\n"
    r = run_minidb(d, "-c", "\\d t")
    assert r.returncode == 0 and r.stdout.lstrip().startswith('Table "t"\n')
    r = run_minidb(d, "-c", "SELECT count(*) AS n FROM t \\gx")
    assert r.returncode == 0 and r.stdout == "-[ RECORD 1 ]\nn | 1\n\n"


def test_unopenable_data_directory_exits_2(tmp_path):
    d = tmp_path / "not-minidb"
    d.mkdir()
    (d / "somefile").write_text("mine")
    r = run_minidb(str(d), "-c", "SELECT 1")
    assert r.returncode == 2
    assert "not a minidb data directory" in r.stderr and "Traceback" not in r.stderr
    assert (d / "somefile").read_text() == "mine"


def test_default_data_directory_is_minidb_data_in_the_current_folder(tmp_path):
    r = run_minidb("--set", "shared_buffers=64", stdin="SELECT 1 AS x;\n", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == " x \n---\n 1\n(1 row)\n\n", r.stderr
    assert (tmp_path / "minidb-data" / "MINIDB_VERSION").exists()


def test_timing_prints_milliseconds_after_each_result(tmp_path):
    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    out = io.StringIO()
    try:
        conn.autocommit = True
        repl = Repl(conn, out=out, err=out)
        assert not repl.timing  # off by default: transcripts hold no times
        assert repl.run_script(["\\timing\n", "SELECT 1 AS x;\n", "\\timing off\n",
                                "SELECT 2 AS y;\n"])
    finally:
        conn.close()
    lines = out.getvalue().split("\n")
    assert lines[0] == "Timing is on."
    assert lines[1:6] == [" x ", "---", " 1", "(1 row)", ""]
    assert re.fullmatch(r"Time: \d+\.\d{3} ms", lines[6]), lines[6]
    assert lines[7] == "Timing is off."
    assert "Time:" not in "\n".join(lines[8:])


def test_demo_is_still_a_subcommand_and_repl_is_the_default():
    r = run_minidb("--help")
    assert r.returncode == 0 and "demo" in r.stdout and "DATADIR" in r.stdout
    r = run_minidb("demo", "--help")
    assert r.returncode == 0 and "--scale" in r.stdout
    r = run_minidb("-c", "SELECT 1", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr


# ---------------------------------------------------------------------------------------------
# interactive mode through prompt_toolkit


def test_interactive_multi_line_statement_history_and_prompts(tmp_path):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    conn.autocommit = True
    out = io.StringIO()
    repl = Repl(conn, out=out, err=out)
    seen = []  # (prompt when the buffer was accepted, the buffer)
    handle = repl.handle_text

    def recording(text, **kw):
        seen.append((repl.prompt(), text))
        return handle(text, **kw)
    repl.handle_text = recording
    keys = ("CREATE TABLE t\r(a integer);\r"       # Enter inside a statement: a new line
            "BEGIN;\rINSERT INTO t VALUES (1);\r"
            "SELECT 1/0;\rSELECT 1;\rROLLBACK;\r"
            "SELECT count(*)\rFROM t;\r\\q\r")
    try:
        with create_pipe_input() as inp:
            inp.send_text(keys)
            repl.interactive(input=inp, output=DummyOutput())
    finally:
        conn.close()
    assert repl.done
    assert [t for _, t in seen] == [
        "CREATE TABLE t\n(a integer);", "BEGIN;", "INSERT INTO t VALUES (1);", "SELECT 1/0;",
        "SELECT 1;", "ROLLBACK;", "SELECT count(*)\nFROM t;", "\\q"]
    prompts = [p for p, _ in seen]
    assert prompts[:3] == ["minidb=> ", "minidb=> ", "minidb=*> "]
    assert prompts[4:6] == ["minidb=!> ", "minidb=!> "]
    assert prompts[6] == "minidb=> "
    assert repl.prompt(continuation=True) == "minidb-> "
    assert list(repl.prompt_session.history.get_strings())[0] == "CREATE TABLE t\n(a integer);"
    text = out.getvalue()
    assert text.count("CREATE TABLE\n") == 1
    assert "ERROR:  division by zero" in text
    assert "ERROR:  current transaction is aborted" in text
    assert text.endswith(" count \n-------\n     0\n(1 row)\n\n")


# ---------------------------------------------------------------------------------------------
# data directories: what the command says


def test_a_file_as_data_directory_is_a_clear_error(tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a directory")
    r = run_minidb(str(f), "-c", "SELECT 1")
    assert r.returncode == 2 and r.stdout == ""
    assert "is a file, not a data directory" in r.stderr and "Traceback" not in r.stderr
    assert f.read_text() == "not a directory"
    with pytest.raises(minidb.OperationalError, match="is a file, not a data directory"):
        minidb.connect(str(f))



def test_a_directory_in_use_says_what_to_do(tmp_path):
    d = str(tmp_path / "data")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, minidb; c = minidb.connect(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", d],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        assert holder.stdout.readline() == "open\n"
        r = run_minidb(d, "-c", "SELECT 1")
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"in use by pid {holder.pid}: close the other process (pid {holder.pid}), " \
               "or open a different data directory" in r.stderr, r.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


# ---------------------------------------------------------------------------------------------
# the scanner: psql's lexer rules


def test_scanner_splits_as_psql_does():
    from minidb.repl.scan import QueryScanner
    sc = QueryScanner({"v": "x'y", "t": "tab"})
    assert sc.feed("SELECT 'a;b', \"c;d\", (1;2) -- e;f\n") == []   # nothing ends here
    assert sc.feed("/* g; /* nested; */ h; */ ;") == [
        ("sql", "SELECT 'a;b', \"c;d\", (1;2) -- e;f\n/* g; /* nested; */ h; */ ")]
    assert sc.feed("SELECT 'it''s \\n', E'\\'; still' \\g x") == [
        ("meta", "\\g x")]
    assert sc.buffer == "SELECT 'it''s \\n', E'\\'; still' "
    sc.reset()
    assert sc.feed("SELECT :v, :'v', :\"t\", 1::int, :nosuch, ':v';") == [
        ("sql", "SELECT x'y, 'x''y', \"tab\", 1::int, :nosuch, ':v'")]
    assert sc.feed("-- a comment while the buffer is empty is dropped") == []
    assert sc.buffer == ""
    assert sc.feed("SELECT 1 AS a,") == [] and sc.feed("\\dt") == [("meta", "\\dt")]
    assert sc.buffer == "SELECT 1 AS a,\n"          # the statement stays in the buffer
    assert sc.feed("2 AS b;") == [("sql", "SELECT 1 AS a,\n2 AS b")]


def test_meta_arguments_and_patterns():
    from minidb.repl.scan import meta_args, pattern_regex
    assert meta_args("  a 'b c'd \"E F\" 'it''s' :x :'x' :nosuch :'nosuch'", {"x": "1 2"}) \
        == ["a", "b cd", '"E F"', "it's", "1 2", "'1 2'", ":nosuch", ":'nosuch'"]
    name, schema = pattern_regex("T*")
    assert name.match("tab") and name.match("t") and not name.match("xt") and schema is None
    name, _ = pattern_regex("t?b")
    assert name.match("tab") and not name.match("taab")
    name, _ = pattern_regex('"T*"')
    assert name.match("T*") and not name.match("Tab") and not name.match("t*")
    name, schema = pattern_regex("public.a_b")
    assert schema.match("public") and name.match("a_b") and not name.match("aXb")


# ---------------------------------------------------------------------------------------------
# \dt's row estimate, the pager, completion, interactive backslash commands



def test_row_estimate_is_the_planners_and_then_the_measured_one(tmp_path):
    from minidb.repl import row_estimate
    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    try:
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (id integer, name text)")
        cur.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        cat = conn.session.instance.catalog
        cat.refresh()
        t = cat.tables["t"]
        # never measured: a page's free space over the width the types suggest (4 + 32
        # bytes, 44 of overhead), times the one page there is - not the planner's 10
        assert row_estimate(t, 1) == round((8192 - 24) / (44 + 36))
        assert row_estimate(t, 0) == 0
        cur.execute("ANALYZE t")
        cat.refresh()
        t = cat.tables["t"]
        assert row_estimate(t, 1) == 3 and row_estimate(t, 2) == 6   # reltuples, scaled
        out = io.StringIO()
        Repl(conn, out=out, err=out).run_script(["\\dt\n"])
        assert out.getvalue().splitlines()[3].split("|")[2].strip() == "3"
    finally:
        conn.close()



def test_long_output_goes_through_the_pager_on_a_terminal(tmp_path, monkeypatch):
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"cat > {paged}")
    monkeypatch.delenv("PSQL_PAGER", raising=False)
    monkeypatch.setenv("LINES", "24")
    monkeypatch.setenv("COLUMNS", "80")
    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    try:
        conn.autocommit = True
        out = io.StringIO()
        repl = Repl(conn, out=out, err=out)
        repl.run_command("SELECT 1 AS short")
        assert " short " in out.getvalue() and not paged.exists()   # not a terminal
        repl.tty = True
        repl.run_command("SELECT 2 AS short")                       # fits the screen
        assert not paged.exists()
        out.seek(0)
        out.truncate()
        repl.run_command("CREATE TABLE t (a integer); INSERT INTO t VALUES " +
                         ", ".join(f"({i})" for i in range(40)) + "; SELECT a FROM t")
        assert out.getvalue() == "CREATE TABLE\nINSERT 0 40\n"
        assert paged.read_text().endswith(" 39\n(40 rows)\n\n")
        paged.unlink()
        repl.run_meta("\\pset pager off")
        repl.run_command("SELECT a FROM t")
        assert not paged.exists() and "(40 rows)" in out.getvalue()
        monkeypatch.setenv("PAGER", "")                             # empty: no pager
        repl.run_meta("\\pset pager always")
        repl.run_command("SELECT 3 AS three")
        assert not paged.exists() and " three " in out.getvalue()
    finally:
        conn.close()



def test_tab_completion_offers_tables_columns_keywords_and_meta_commands(tmp_path):
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from minidb.repl.complete import SqlCompleter
    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    try:
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE accounts (id integer PRIMARY KEY, owner text)")
        cur.execute("CREATE TABLE other (odd integer)")
        comp = SqlCompleter(Repl(conn, out=io.StringIO()))

        def offers(text):
            return [c.text for c in comp.get_completions(Document(text), CompleteEvent())]
        assert offers("SELECT * FROM acc") == ["accounts", "accounts_pkey"]
        got = offers("SELECT o")   # columns, relations, then keywords (as typed: lower)
        assert got[:3] == ["owner", "odd", "other"] and {"or", "order"} <= set(got[3:])
        assert offers("SELECT ow") == ["owner"]
        assert "odd" not in offers("SELECT * FROM accounts WHERE o")  # its columns only
        assert offers("SEL") == ["SELECT"] and offers("sel") == ["select"]
        assert offers("\\dt") == ["\\dt", "\\dt+"]
        cur.execute("CREATE TABLE fresh (f integer)")
        assert offers("SELECT * FROM fr") == ["fresh", "from"]        # read at each Tab
    finally:
        conn.close()



def test_interactive_backslash_command_inside_a_statement_keeps_the_buffer(tmp_path):
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    conn = minidb.connect(str(tmp_path / "data"), shared_buffers=64)
    conn.autocommit = True
    out = io.StringIO()
    repl = Repl(conn, out=out, err=out)
    repl.variables["ON_ERROR_STOP"] = "on"      # ignored when interactive, as in psql
    try:
        with create_pipe_input() as inp:
            inp.send_text("SELECT 1/0;\rSELECT 1 AS a,\r\\echo meanwhile\r2 AS b;\r\\q\r")
            repl.interactive(input=inp, output=DummyOutput())
    finally:
        conn.close()
    assert out.getvalue() == ("ERROR:  division by zero\nmeanwhile\n"
                              " a | b \n---+---\n 1 | 2\n(1 row)\n\n")
    assert not repl.stopped and repl.done


def test_locks_meta_command_lists_held_locks(tmp_path):
    d = str(tmp_path / "data")
    script = ("CREATE TABLE t (k int PRIMARY KEY);\nBEGIN;\nSELECT count(*) FROM t;\n"
              "LOCK TABLE t IN SHARE MODE;\n\\locks\nCOMMIT;\n\\locks\nLOCK TABLE t;\n")
    r = run_minidb(d, "--set", "shared_buffers=64", stdin=script)
    out = re.sub(r"\| +\d+$", "| PID", r.stdout, flags=re.M)
    assert " locktype | relation |      mode       | granted |" in out
    assert " relation | t        | AccessShareLock | t       | PID" in out
    assert " relation | t        | ShareLock       | t       | PID" in out
    assert " relation | t_pkey   | AccessShareLock | t       | PID" in out
    assert "(3 rows)" in out and "(0 rows)" in out
    assert "ERROR:  LOCK TABLE can only be used in transaction blocks" in r.stderr + r.stdout
