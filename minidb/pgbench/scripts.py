"""Transaction scripts: pgbench's three built-in scripts and ``-f`` files.

A script is what one *transaction* of a client runs, top to bottom.  Its text follows
pgbench's rules:

* a line whose first non-blank character is a backslash is a *meta command*, ending at the
  end of the line (a backslash as the line's last character continues it on the next one);
* anything else is SQL, one command per statement: a command ends at a semicolon outside
  quotes and comments (several may share a line, one may span lines); text left at the end
  of the file without a semicolon is a last command;
* ``--`` comments and blank lines are skipped;
* ``:name`` in SQL is replaced by the value of variable ``name`` (``::`` casts are left
  alone); a name no ``\\set``, ``\\gset``, ``-D`` or automatic variable (``scale``,
  ``client_id``, ``random_seed``) defines is an error when the command runs.  Departure:
  references inside string literals, quoted identifiers and comments are left alone
  (pgbench replaces them there too), so ``'10:30'`` is safe;
* ``\\gset [prefix]`` (or ``\\aset [prefix]``) in place of a query's semicolon stores the
  columns of its one result row (``\\aset``: of every row, the last one winning) into
  variables named ``prefix`` + column name - e.g. ``SHOW enable_seqscan \\gset``.

Meta commands: ``\\set name expression`` (``minidb.pgbench.expr``) and
``\\sleep n [us | ms | s]`` (n a number or a ``:variable``).  pgbench's others (``\\setshell``,
``\\shell``, ``\\if`` ..., pipelines) are refused with an error naming them.

A weight may follow a script's name or file: ``-b select-only@9 -f mine.sql@1`` chooses
select-only for nine transactions in ten.  Built-in names may be abbreviated to any unique
prefix (``-b simple``), as in pgbench.

The built-in scripts are pgbench's, statement for statement; ``accounts_per_scale`` replaces
the ``100000`` of the ``aid`` range, for the tests' small tables only (see ``init``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from minidb.pgbench.expr import Expr, ExprError, compile_expression

__all__ = ["BUILTIN_SCRIPTS", "NACCOUNTS", "NBRANCHES", "NTELLERS", "Command", "Script",
           "ScriptError", "builtin_script", "parse_script", "load_script",
           "AUTOMATIC_VARIABLES", "find_builtin"]

# rows per unit of scale, as pgbench's naccounts / ntellers / nbranches
NBRANCHES = 1
NTELLERS = 10
NACCOUNTS = 100_000

AUTOMATIC_VARIABLES = ("scale", "client_id", "random_seed")

_TPCB = """\
\\set aid random(1, {naccounts} * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""

_SIMPLE_UPDATE = """\
\\set aid random(1, {naccounts} * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
"""

_SELECT_ONLY = """\
\\set aid random(1, {naccounts} * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
"""

# name -> (description printed as "transaction type", text)
BUILTIN_SCRIPTS = {
    "tpcb-like": ("<builtin: TPC-B (sort of)>", _TPCB),
    "simple-update": ("<builtin: simple update>", _SIMPLE_UPDATE),
    "select-only": ("<builtin: select only>", _SELECT_ONLY),
}


class ScriptError(Exception):
    """A script that cannot be parsed: the message names the file and line, as pgbench's."""


@dataclass
class Command:
    """One command of a script.

    kind "sql": ``fragments`` and ``params`` interleave (``fragments[0] params[0]
    fragments[1] ...``); ``qmark`` is the text with ``?`` for every variable; ``gset`` is
    the ``\\gset`` / ``\\aset`` prefix (None: the result is discarded), ``aset`` which one.
    kind "set": ``var`` := ``expr``.  kind "sleep": ``expr`` x ``unit_s`` seconds.
    """
    kind: str
    text: str                 # as pgbench shows it in -r reports: one line
    lineno: int
    fragments: list = field(default_factory=list)
    params: list = field(default_factory=list)
    qmark: str = ""
    gset: str | None = None
    aset: bool = False
    var: str = ""
    expr: Expr | None = None
    unit_s: float = 1.0


@dataclass
class Script:
    """A parsed script: its description (the summary's "transaction type"), commands,
    weight, and the built-in's name when it is one."""
    desc: str
    commands: list[Command]
    weight: int = 1
    builtin: str | None = None

    @property
    def writes(self) -> bool:
        """True for the built-ins that update balances and insert history."""
        return self.builtin in ("tpcb-like", "simple-update")


def find_builtin(name: str) -> str:
    """The built-in script a (possibly abbreviated) name designates."""
    if name in BUILTIN_SCRIPTS:
        return name
    found = [n for n in BUILTIN_SCRIPTS if n.startswith(name)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise ScriptError(f'no builtin script found for name "{name}"')
    raise ScriptError(f'ambiguous builtin name: {len(found)} builtin scripts found for '
                      f'prefix "{name}"')


def _split_weight(spec: str) -> tuple[str, int]:
    m = re.fullmatch(r"(.*)@(\d+)", spec, re.DOTALL)
    if m is None:
        return spec, 1
    w = int(m.group(2))
    if w > 2 ** 31 - 1:
        raise ScriptError(f'weight specification "@{m.group(2)}" is out of range')
    return m.group(1), w


def builtin_script(spec: str, *, accounts_per_scale: int = NACCOUNTS) -> Script:
    """A built-in script by (abbreviated) name, with an optional ``@weight``."""
    name, weight = _split_weight(spec)
    name = find_builtin(name)
    desc, text = BUILTIN_SCRIPTS[name]
    s = parse_script(text.format(naccounts=accounts_per_scale), desc,
                     source=f"<builtin {name}>")
    s.weight = weight
    s.builtin = name
    return s


def load_script(spec: str) -> Script:
    """A script file (``-f FILE[@weight]``); ``-`` reads standard input."""
    path, weight = _split_weight(spec)
    if path != spec and not os.path.exists(path) and os.path.exists(spec):
        path, weight = spec, 1   # a file whose name itself ends in "@digits"
    try:
        if path == "-":
            import sys
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise ScriptError(f'could not read file "{path}": {e.strerror}') from None
    s = parse_script(text, path, source=path)
    s.weight = weight
    return s


# ---------------------------------------------------------------------------------------------
# parsing
_META_NAME = re.compile(r"\\([A-Za-z]+)")
_GSET = re.compile(r"\\([ga]set)(?:[ \t]+([A-Za-z0-9_]+))?[ \t]*$")
_UNSUPPORTED_META = {"setshell", "shell", "if", "elif", "else", "endif", "startpipeline",
                     "endpipeline", "syncpipeline"}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _scan(text: str):
    """Yield ``(start, end, name)`` of every ``:name`` outside quotes and comments, and
    finally ``(None, None, state)``: the lexical state at the end ("" when outside any
    quote or block comment)."""
    i, n = 0, len(text)
    state = ""
    while i < n:
        ch = text[i]
        if state == "'":
            if ch == "'":
                state = ""
            i += 1
        elif state == '"':
            if ch == '"':
                state = ""
            i += 1
        elif state == "/*":
            if text.startswith("*/", i):
                state = ""
                i += 2
            else:
                i += 1
        elif ch == "'" or ch == '"':
            state = ch
            i += 1
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            state = "/*"
            i += 2
        elif ch == ":":
            if i + 1 < n and text[i + 1] == ":":
                i += 2
                while i < n and text[i] in _NAME_CHARS:
                    i += 1
                continue
            j = i + 1
            while j < n and text[j] in _NAME_CHARS:
                j += 1
            if j > i + 1:
                yield i, j, text[i + 1:j]
            i = j
        else:
            i += 1
    yield None, None, state


def _strip_comments(text: str) -> str:
    """``text`` without whole-line ``--`` comments and surrounding blank space."""
    return "\n".join(ln for ln in text.splitlines()
                     if ln.strip() and not ln.strip().startswith("--")).strip()


def parse_script(text: str, desc: str, *, source: str = "script") -> Script:
    """Parse a script's text (see the module docstring); ``desc`` is its description."""
    from minidb.sql.engine import Engine
    commands: list[Command] = []
    lines = text.splitlines()
    pending = ""            # SQL text not yet ended by a semicolon
    pending_line = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        lineno = i + 1
        i += 1
        blank = not _strip_comments(pending)
        if blank and line.lstrip().startswith("\\"):
            meta = line.strip()
            while meta.endswith("\\") and i < len(lines):
                meta = meta[:-1] + " " + lines[i].strip()
                i += 1
            commands.append(_meta_command(meta, lineno, source))
            pending = ""
            continue
        if blank:
            pending_line = lineno
            pending = ""
        g = _GSET.search(line)
        if g is not None:
            before = pending + line[:g.start()]
            *_, (_, _, state) = _scan(before)
            if state == "" and _strip_comments(before):
                stmts, rest = Engine.split_statements(before)
                for st in stmts:
                    if _strip_comments(st):
                        commands.append(_sql_command(st, pending_line, source))
                if not _strip_comments(rest):
                    raise ScriptError(f"{source}:{lineno}: \\{g.group(1)} must end an SQL "
                                      f"command (in place of its semicolon)\n{line.strip()}")
                commands.append(_sql_command(rest, pending_line, source,
                                             gset=g.group(2) or "", aset=g.group(1) == "aset"))
                pending = ""
                continue
        pending += line + "\n"
        stmts, rest = Engine.split_statements(pending)
        for st in stmts:
            if _strip_comments(st):
                commands.append(_sql_command(st, pending_line, source))
        pending = rest
        if stmts:
            pending_line = lineno
    if _strip_comments(pending):
        commands.append(_sql_command(pending, pending_line, source))
    if not commands:
        raise ScriptError(f'{source}: empty command list for script "{desc}"')
    return Script(desc, commands)


def _sql_command(text: str, lineno: int, source: str, gset: str | None = None,
                 aset: bool = False) -> Command:
    body = _strip_comments(text)
    fragments, params = [], []
    last = 0
    for start, end, name in _scan(body):
        if start is None:
            if name:
                raise ScriptError(f"{source}:{lineno}: unterminated quoted string or comment "
                                  f"in SQL command\n{body}")
            break
        fragments.append(body[last:start])
        params.append(name)
        last = end
    fragments.append(body[last:])
    shown = " ".join(body.split())
    if gset is None:
        shown += ";"
    else:
        shown += f" \\{'aset' if aset else 'gset'}" + (f" {gset}" if gset else "")
    return Command("sql", shown, lineno, fragments=fragments, params=params,
                   qmark="?".join(fragments), gset=gset, aset=aset)


def _meta_command(meta: str, lineno: int, source: str) -> Command:
    m = _META_NAME.match(meta)
    if m is None:
        raise ScriptError(f"{source}:{lineno}: invalid command\n{meta}")
    name = m.group(1).lower()
    args = meta[m.end():].strip()
    if name == "set":
        vm = re.match(r"([A-Za-z0-9_]+)\s+(.*)$", args, re.DOTALL)
        if vm is None:
            raise ScriptError(f'{source}:{lineno}: missing argument in command "set"\n{meta}')
        var, text = vm.group(1), vm.group(2).strip()
        try:
            expr = compile_expression(text)
        except ExprError as e:
            col = meta.index(text) + (e.pos or 0)
            raise ScriptError(f'{source}:{lineno}: {e} in command "set"\n{meta}\n'
                              f"{' ' * col}^ error found here") from None
        return Command("set", meta, lineno, var=var, expr=expr)
    if name == "sleep":
        parts = args.split()
        if not parts or len(parts) > 2:
            raise ScriptError(f'{source}:{lineno}: missing argument in command "sleep"\n{meta}')
        unit = parts[1].lower() if len(parts) == 2 else "s"
        if unit not in ("us", "ms", "s"):
            raise ScriptError(f'{source}:{lineno}: unrecognized time unit, must be us, ms or '
                              f's: "{parts[1]}" in command "sleep"\n{meta}')
        if not re.fullmatch(r"\d+|:[A-Za-z0-9_]+", parts[0]):
            raise ScriptError(f'{source}:{lineno}: invalid sleep time, must be an integer or '
                              f'a :variable\n{meta}')
        return Command("sleep", meta, lineno, expr=compile_expression(parts[0]),
                       unit_s={"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit])
    if name in ("gset", "aset"):
        raise ScriptError(f"{source}:{lineno}: \\{name} must end an SQL command (in place of "
                          f"its semicolon)\n{meta}")
    if name in _UNSUPPORTED_META:
        raise ScriptError(f'{source}:{lineno}: meta command "\\{name}" is not supported by '
                          f"minidb bench\n{meta}")
    raise ScriptError(f'{source}:{lineno}: invalid command "\\{name}"\n{meta}')
