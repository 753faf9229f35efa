"""The REPL (``minidb [DATADIR]``, ``minidb.repl``) and the ``minidb`` command line.

What is proven here:
  * psql's output formats, cell by cell: the aligned table (centred headers, numbers right,
    text left, multi-line cells marked ``+``, title, ``(N rows)``), the expanded ``\\x``
    records (the ``-[ RECORD n ]`` rule as psql draws it), values as PostgreSQL's text
    output (t/f, NULL as nothing, shortest exact floats with PostgreSQL's exponent range,
    timestamps without trailing zeros);
  * golden transcripts: every ``tests/repl_golden/NAME.sql`` is piped into
    ``minidb DATADIR -a --on-error continue`` (a fresh data directory each, standard error
    merged into standard output) and the transcript must equal ``NAME.out`` byte for byte.
    Regenerate them after an intended change of output with
    ``MINIDB_REGEN_GOLDEN=1 python -m pytest tests/test_repl.py`` and read the diff before
    committing it.  ``\\timing`` is off by default, so transcripts hold no times;
  * ``-c``: the result on stdout and exit 0; an error as one ``ERROR:  ...`` line on
    stderr, no traceback, exit 1; script mode stops at the first error with exit 1 (the
    statements after it do not run) unless ``--on-error continue``; an unopenable data
    directory gives exit 2; ``minidb demo`` is still a subcommand;
  * interactive mode through prompt_toolkit's pipe input: a statement typed over two lines
    runs once, as one history entry; the prompt shows ``=*`` inside a transaction and
    ``=!`` inside a failed one; ``\\q`` ends the loop.

Not proven: what a real terminal shows (colours, cursor movement), the history file across
runs.
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
    r = subprocess.run([sys.executable, "-m", "minidb.cli", datadir, "-a", "--on-error",
                        "continue", "--set", "shared_buffers=64"], input=script,
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
    assert r.stderr == ""
    r = run_minidb(d, "-c", "\\dt")
    assert r.returncode == 0 and " t " in r.stdout


def test_dash_c_error_is_one_line_without_traceback_and_exit_1(tmp_path):
    d = str(tmp_path / "data")
    r = run_minidb(d, "-c", "SELECT * FROM no_such_table")
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith("ERROR:  ") and r.stderr.count("\n") == 1, r.stderr
    assert "no_such_table" in r.stderr and "Traceback" not in r.stderr
    r = run_minidb(d, "-c", "\\nonsense")
    assert r.returncode == 1 and r.stderr == "invalid command \\nonsense\nTry \\? for help.\n"


def test_script_stops_at_the_first_error_unless_told_to_continue(tmp_path):
    d = str(tmp_path / "data")
    script = ("CREATE TABLE t (a integer);\nINSERT INTO t VALUES (1);\nSELECT 1/0;\n"
              "INSERT INTO t VALUES (2);\n")
    r = run_minidb(d, stdin=script)
    assert r.returncode == 1
    assert r.stdout == "CREATE TABLE\nINSERT 0 1\n"
    assert r.stderr.startswith("ERROR:  division by zero")
    r = run_minidb(d, "-c", "SELECT count(*) FROM t")
    assert r.returncode == 0 and r.stdout.splitlines()[2].strip() == "1"
    r = run_minidb(d, "--on-error", "continue", stdin=script.replace("CREATE", "-- ", 1))
    assert r.returncode == 1  # something failed, even though the rest ran
    r = run_minidb(d, "-c", "SELECT count(*) FROM t")
    assert r.stdout.splitlines()[2].strip() == "3"
    script_file = tmp_path / "s.sql"
    script_file.write_text("SELECT 7 AS seven\n")  # no ';' at the end: run at end of input
    r = run_minidb(d, "-f", str(script_file))
    assert r.returncode == 0 and r.stdout == " seven \n-------\n     7\n(1 row)\n\n"


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
