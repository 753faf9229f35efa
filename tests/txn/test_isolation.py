"""The isolation tester: concurrency schedules as data, one runner for all of them.

In the manner of PostgreSQL's isolation tester, a schedule is a *spec* file
(``isolation/specs/NAME.spec``): a setup, sessions each with named steps, and
permutations (orders of steps).  The runner plays every permutation on a fresh instance
and compares what each step printed with ``isolation/expected/NAME.out``.  A new schedule
is a new spec file and its expected output; no Python is written.

Spec format (line oriented; ``isolation/README.md`` has a worked example)::

    # comment lines (every spec opens with one: the scenario, the expected outcome, and
    # what the spec does not prove)
    setup                              a block of calls run, in order, before each
      create_table("t", "k bigint not null, v bigint")      permutation, in a session of
      insert_many("t", [(1, 100), (2, 200)])                 its own (autocommit)
    teardown                           optional; run after each permutation
      ...
    session a                          a session; ``key=value`` words after the name are
      step a_begin  begin(RR)          settings for its backend (``lock_timeout=5000``)
      step a_inc    update("t", key(1), add(1))
    session b
      step b_inc    update("t", key(1), add(1))
    permutation a_begin a_inc b_inc    the steps in the order they are issued; an indented
      a_commit                         line continues the permutation above it

A step (and a setup line) is one Python expression, called with the session's methods as
plain names (``begin``, ``commit``, ``rollback``, ``insert``, ``insert_many``, ``select``,
``select_tids``, ``get``, ``update``, ``delete``, ``select_for_update``: those of
``minidb.session.Session``), the helpers ``RC``, ``RR``, ``key(k)`` (where k = k),
``add(d)`` (v := v + d), ``setv(x)`` (v := x), ``table(name="t")`` (the visible rows as a
dict key -> value, sorted, asserted free of duplicate keys) and ``xid_status(session)``
("committed", "aborted", "in progress": the last xid that session was seen holding), and
any name bound by an earlier step.  A step may instead be ``name = expression``: the value
is bound for the later steps of the permutation (in every session) and not printed.
``create_table(name, "col type [not null], ...")``, ``drop_table(name)`` and
``truncate(name)`` are DDL statements of the session's transaction (rolled back with it).
``sql(text, *params)`` runs one SQL statement through a ``minidb.sql.Engine`` on the
session (same transaction as its method calls): a SELECT gives its rows, anything else its
status tag.  Step names are
unique across sessions; a step may appear several times in one permutation.

Expected output: per permutation, a ``starting permutation: STEP ...`` line, then per
step ``step NAME: TEXT`` followed by its result (``repr``, omitted when None), or
``ERROR:  SQLSTATE message`` when it raised a minidb error.  A step that has to wait for
another session's transaction prints ``step NAME: TEXT <waiting for SESSION ...>``; when it
ends, after the step that released it, ``step NAME: <... completed>`` and its result.

How waiting is told apart from slowness, without timing: every step runs in a thread;
the runner polls until the step has ended or its backend sleeps on a transaction that is
*still running* - ``proc_wait_xid[slot]`` names an xid some slot's ``proc_xid`` holds (the
wait-for graph XactLockTableWait publishes) - or sleeps in a heavyweight lock's queue
(``proc_wait_lock[slot]``, ``minidb.txn.lmgr``); the holder shown is a session holding a
conflicting mode (else one waiting ahead with a conflicting request).  A wait on an xid
that has just ended does not count: the waiter is about to wake.  A session with the
runner setting ``settle=end`` is never shown waiting: each of its steps is settled only
when it ends (for steps that a lock_timeout or a deadlock check ends, so the output does
not depend on whether the poll saw the wait before the error).  After every step, each waiting step is settled
the same way (ended, or asleep on a running transaction).  ``WAIT_LIMIT_S`` bounds every
poll so that a hang is a failure, never a timing assumption.

After each permutation: no step may still be waiting; every session is rolled back; each
table's heap passes ``check_heap``; no pin, content lock or transaction wait is left.

Regenerating: ``MINIDB_ISOLATION_REGEN=1 python -m pytest tests/txn/test_isolation.py``
rewrites each permutation's section of the expected file from what ran (sections of
permutations no longer in the spec are dropped).  Read the diff before committing it.

Departures from PostgreSQL's tester: steps are Session calls, not SQL (these tests are
for the transaction layer, below the SQL executor); sessions are threads of one process,
each with its own backend slot, not separate server processes; a spec must list its
permutations (no default of all interleavings); a step may not be issued to a session
whose previous step is still waiting; and there are no ordering markers, so a schedule
whose output depends on which of two released waiters runs first must not be written.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from minidb.catalog import ColumnDef
from minidb.errors import Error as MinidbError
from minidb.heap.check import check_heap
from minidb.instance import Instance
from minidb.session import Session
from minidb.sql.engine import Engine
from minidb.txn.lmgr import CONFLICTS, WAITING
from minidb.txn.clog import ABORTED, COMMITTED, IN_PROGRESS
from txn_steps import RC, RR, Step, add, key, poll

HERE = Path(__file__).parent / "isolation"
SPECS = HERE / "specs"
EXPECTED = HERE / "expected"
REGEN = os.environ.get("MINIDB_ISOLATION_REGEN") == "1"

SESSION_CALLS = ("begin", "commit", "rollback", "insert", "insert_many", "select",
                 "select_tids", "get", "update", "delete", "select_for_update")


# ---------------------------------------------------------------------------------------------
# the spec file
@dataclass
class Code:
    """One step or setup line: the source text and its compiled expression."""
    text: str
    target: str | None  # ``name = ...``: the name bound
    expr: object        # compiled code object of the expression


@dataclass
class StepDef:
    name: str
    session: str
    code: Code


@dataclass
class Spec:
    name: str
    setup: list[Code] = field(default_factory=list)
    teardown: list[Code] = field(default_factory=list)
    sessions: dict[str, dict] = field(default_factory=dict)   # name -> backend settings
    steps: dict[str, StepDef] = field(default_factory=dict)
    permutations: list[list[str]] = field(default_factory=list)


class SpecError(Exception):
    pass


def _compile(text: str, where: str) -> Code:
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as e:
        raise SpecError(f"{where}: {e.msg}: {text}") from None
    if len(tree.body) != 1:
        raise SpecError(f"{where}: one expression per line: {text}")
    node = tree.body[0]
    target = None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name):
        target, value = node.targets[0].id, node.value
    elif isinstance(node, ast.Expr):
        value = node.value
    else:
        raise SpecError(f"{where}: an expression or `name = expression`: {text}")
    return Code(text, target, compile(ast.Expression(value), where, "eval"))


def _setting(word: str, where: str):
    k, sep, v = word.partition("=")
    if not sep:
        raise SpecError(f"{where}: session settings are key=value: {word}")
    try:
        return k, ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return k, v


def parse_spec(path: Path) -> Spec:
    spec = Spec(path.stem)
    block = None     # ("setup" | "teardown" | "session" | "permutation", session name)
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        where = f"{path.name}:{lineno}"
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        indented = raw[0].isspace()
        if not indented:
            word, _, rest = line.partition(" ")
            if word in ("setup", "teardown"):
                if rest:
                    raise SpecError(f"{where}: `{word}` stands alone on its line")
                block = (word, None)
            elif word == "session":
                name, *settings = rest.split()
                if name in spec.sessions:
                    raise SpecError(f"{where}: session {name} defined twice")
                spec.sessions[name] = dict(_setting(w, where) for w in settings)
                block = ("session", name)
            elif word == "permutation":
                spec.permutations.append(rest.split())
                block = ("permutation", None)
            else:
                raise SpecError(f"{where}: unknown keyword {word!r}")
            continue
        if block is None:
            raise SpecError(f"{where}: indented line outside a block")
        kind, sname = block
        if kind in ("setup", "teardown"):
            getattr(spec, kind).append(_compile(line, where))
        elif kind == "permutation":
            spec.permutations[-1].extend(line.split())
        else:
            word, _, rest = line.partition(" ")
            name, _, text = rest.strip().partition(" ")
            if word != "step" or not name or not text.strip():
                raise SpecError(f"{where}: expected `step NAME EXPRESSION`")
            if name in spec.steps:
                raise SpecError(f"{where}: step {name} defined twice")
            spec.steps[name] = StepDef(name, sname, _compile(text.strip(), where))
    if not spec.permutations:
        raise SpecError(f"{path.name}: no permutation")
    seen = set()
    for perm in spec.permutations:
        for s in perm:
            if s not in spec.steps:
                raise SpecError(f"{path.name}: permutation names unknown step {s!r}")
        if " ".join(perm) in seen:
            raise SpecError(f"{path.name}: permutation listed twice: {' '.join(perm)}")
        seen.add(" ".join(perm))
    return spec


# ---------------------------------------------------------------------------------------------
# the expected file: sections keyed by their "starting permutation:" line
HEADER = "starting permutation: "


def read_expected(path: Path) -> dict[str, str]:
    sections: dict[str, str] = {}
    if not path.exists():
        return sections
    current = None
    for line in path.read_text().splitlines():
        if line.startswith(HEADER):
            current = line[len(HEADER):]
            sections[current] = line + "\n"
        elif current is not None and line:
            sections[current] += line + "\n"
    return sections


def write_expected(path: Path, spec: Spec, sections: dict[str, str]) -> None:
    order = [" ".join(p) for p in spec.permutations]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(sections[k] for k in order if k in sections))


# ---------------------------------------------------------------------------------------------
# running a permutation
STATUS = {COMMITTED: "committed", ABORTED: "aborted", IN_PROGRESS: "in progress"}


def _create_table(sess: Session):
    def create_table(name: str, columns: str) -> None:
        defs = []
        for col in columns.split(","):
            cname, ctype, *rest = col.split()
            if rest and " ".join(rest).lower() != "not null":
                raise SpecError(f"column {cname}: only `not null` may follow the type")
            defs.append(ColumnDef(cname, ctype, bool(rest)))
        sess.statement(lambda snap: (sess.backend.catalog.create_table(name, defs), True))
    return create_table


def _ddl(sess: Session, method: str):
    """``drop_table(name)`` / ``truncate(name)``: one DDL statement of the session's
    transaction (transactional, as the SQL commands)."""
    def call(name: str) -> None:
        sess.statement(lambda snap: (getattr(sess.backend.catalog, method)(name), True))
    return call


def _table(sess: Session):
    def table(name: str = "t") -> dict:
        rows = sess.select(name)
        d = dict(sorted(rows))
        assert len(d) == len(rows), f"duplicate keys in {rows}"
        return d
    return table


def setv(x):
    return lambda r: (r[0], x)


class Run:
    """One permutation of one spec, on its own instance."""

    def __init__(self, spec: Spec, datadir: Path):
        self.spec = spec
        self.inst = Instance(datadir, shared_buffers=64)
        self.sessions: dict[str, Session] = {}
        self.opened: list[Session] = []
        self.bound: dict[str, object] = {}
        self.last_xid: dict[str, int] = {}
        self.out: list[str] = []
        self.engines: dict[int, Engine] = {}
        self.settle_end_sessions: list[Session] = []

    def sql_for(self, sess: Session):
        def sql(text: str, *params):
            e = self.engines.get(id(sess))
            if e is None:
                e = self.engines[id(sess)] = Engine(sess)
            r = e.execute(text, list(params))
            return r.rows if r.description is not None else r.status
        return sql

    def session(self, **settings) -> Session:
        s = Session(self.inst, **settings)
        self.opened.append(s)
        return s

    def xid_status(self, name: str) -> str:
        xid = self.last_xid.get(name)
        if xid is None:
            return "no xid"
        return STATUS[self.inst.clog.status(xid)]

    def namespace(self, sess: Session) -> dict:
        ns = {"RC": RC, "RR": RR, "key": key, "add": add, "setv": setv,
              "table": _table(sess), "xid_status": self.xid_status,
              "create_table": _create_table(sess), "drop_table": _ddl(sess, "drop_table"),
              "truncate": _ddl(sess, "truncate_table"), "sql": self.sql_for(sess)}
        ns.update({c: getattr(sess, c) for c in SESSION_CALLS})
        ns.update(self.bound)
        return ns

    def evaluate(self, code: Code, sess: Session):
        value = eval(code.expr, self.namespace(sess))  # noqa: S307 - the spec is test code
        if code.target is not None:
            self.bound[code.target] = value
            return None
        return value

    # -- waiting ---------------------------------------------------------------------------------
    def holder(self, sess: Session) -> str | None:
        """The session whose running transaction ``sess`` sleeps on, or None."""
        seg = self.inst.seg
        slot = sess.backend.slot
        xid = int(seg.proc_wait_xid[slot])
        if xid:
            slots = [int(s) for s in (seg.proc_xid == xid).nonzero()[0]]
        else:
            slots = self.lock_blockers(slot)
        if not slots:
            return None          # not waiting, or the holder has ended: the waiter is waking
        for name, s in self.sessions.items():
            if s.backend.slot == slots[0]:
                return name
        return f"slot {slots[0]}"

    def lock_blockers(self, slot: int) -> list[int]:
        """Slots blocking ``slot``'s heavyweight lock request: holders of a conflicting
        mode, else waiters ahead of it with a conflicting request."""
        seg = self.inst.seg
        e = int(seg.proc_wait_lock[slot])
        if e < 0 or seg.proc_wait_status[slot] != WAITING:
            return []
        conf = CONFLICTS[int(seg.proc_wait_mode[slot])]
        hold = seg.lock_hold[e]
        hard = [int(t) for t in hold.nonzero()[0] if t != slot and int(hold[t]) & conf]
        if hard:
            return hard
        return [int(t) for t in (seg.proc_wait_lock == e).nonzero()[0]
                if t != slot and seg.proc_wait_seq[t] < seg.proc_wait_seq[slot]
                and conf >> int(seg.proc_wait_mode[t]) & 1]

    def settle(self, step: Step, sess: Session) -> str | None:
        """Wait until ``step`` ended (None) or sleeps on a running transaction (its holder)."""
        found: list[str] = []

        def settled() -> bool:
            if step.done:
                return True
            if sess in self.settle_end_sessions:
                return False
            h = self.holder(sess)
            if h is not None:
                found.append(h)
                return True
            return False

        poll(settled, "the step ends or waits on a running transaction")
        return None if step.done else found[-1]

    def note_xid(self, name: str) -> None:
        xid = self.sessions[name].xact.xid
        if xid:
            self.last_xid[name] = int(xid)

    def report(self, step: Step) -> None:
        try:
            value = step.join()
        except MinidbError as e:
            msg = re.sub(r"([Pp]rocess) \d+", r"\1 PID", str(e))   # pids vary by run
            self.out.append(f"ERROR:  {e.sqlstate} {msg}")
            return
        if value is not None:
            self.out.append(repr(value))

    # -- the permutation ------------------------------------------------------------------------
    def play(self, perm: list[str]) -> str:
        spec = self.spec
        setup = self.session()
        for code in spec.setup:
            self.evaluate(code, setup)
        self.settle_end_sessions = []
        for name, settings in spec.sessions.items():
            settings = dict(settings)
            end = settings.pop("settle", None) == "end"
            self.sessions[name] = self.session(**settings)
            if end:
                self.settle_end_sessions.append(self.sessions[name])
        self.out.append(HEADER + " ".join(perm))
        waiting: list[tuple[str, Step]] = []   # (step name, running step), oldest first
        for sname in perm:
            sd = spec.steps[sname]
            if any(spec.steps[w].session == sd.session for w, _ in waiting):
                raise SpecError(f"step {sname} issued while session {sd.session} waits")
            sess = self.sessions[sd.session]
            step = Step(lambda sd=sd, sess=sess: self.evaluate(sd.code, sess), name=sname)
            holder = self.settle(step, sess)
            self.note_xid(sd.session)
            if holder is None:
                self.out.append(f"step {sname}: {sd.code.text}")
                self.report(step)
            else:
                self.out.append(f"step {sname}: {sd.code.text} <waiting for {holder} ...>")
            # the waiters this step may have released, in the order they started waiting
            still = []
            for wname, wstep in waiting:
                wsess = self.sessions[spec.steps[wname].session]
                if self.settle(wstep, wsess) is None:
                    self.note_xid(spec.steps[wname].session)
                    self.out.append(f"step {wname}: <... completed>")
                    self.report(wstep)
                else:
                    still.append((wname, wstep))
            waiting = still
            if holder is not None:
                waiting.append((sname, step))
        assert not waiting, f"steps still waiting at the end: {[w for w, _ in waiting]}"
        if spec.teardown:
            down = self.session()
            for code in spec.teardown:
                self.evaluate(code, down)
        return "\n".join(self.out) + "\n"

    def check_and_close(self, assert_no_pins) -> None:
        try:
            for s in self.opened:
                s.rollback()
            check = self.session()
            for name in list(self.inst.catalog.tables):
                check_heap(check.backend, self.inst.catalog.heap_rel(name))
            assert_no_pins(self.inst)
            assert not (self.inst.seg.proc_wait_xid != 0).any()
            assert not (self.inst.seg.proc_xact_waiters != 0).any()
            assert not (self.inst.seg.lock_tag[:, 0] != 0).any(), "heavyweight locks left"
            assert not self.inst.seg.fp_bits.any() and not self.inst.seg.fp_strong.any()
        finally:
            for s in self.opened:
                s.close()
            self.inst.close()


# ---------------------------------------------------------------------------------------------
# the tests
def _cases() -> list:
    cases = []
    for path in sorted(SPECS.glob("*.spec")):
        spec = parse_spec(path)
        for i, perm in enumerate(spec.permutations):
            cases.append(pytest.param(path, i, id=f"{spec.name}-{i}"))
    return cases


@pytest.mark.parametrize("path, index", _cases())
def test_permutation(path, index, tmp_path, assert_no_pins):
    spec = parse_spec(path)
    perm = spec.permutations[index]
    run = Run(spec, tmp_path / "data")
    try:
        got = run.play(perm)
    finally:
        run.check_and_close(assert_no_pins)
    out = EXPECTED / f"{spec.name}.out"
    sections = read_expected(out)
    key_ = " ".join(perm)
    if REGEN:
        sections[key_] = got
        write_expected(out, spec, sections)
        return
    if key_ not in sections:
        pytest.fail(f"no expected output for permutation {index} of {spec.name}: run "
                    "MINIDB_ISOLATION_REGEN=1 python -m pytest tests/txn/test_isolation.py")
    assert got == sections[key_], (
        f"{spec.name}, permutation {index}: output differs from {out.name} "
        "(MINIDB_ISOLATION_REGEN=1 regenerates it)")


def test_expected_files_match_specs():
    """Every expected file has a spec, and exactly one section per permutation of it."""
    specs = {p.stem: parse_spec(p) for p in SPECS.glob("*.spec")}
    assert specs, "no spec files"
    for out in EXPECTED.glob("*.out"):
        assert out.stem in specs, f"{out.name} has no spec"
    if REGEN:
        return
    for name, spec in specs.items():
        sections = read_expected(EXPECTED / f"{name}.out")
        want = [" ".join(p) for p in spec.permutations]
        assert list(sections) == want, f"{name}.out: sections differ from the permutations"


def test_every_spec_says_what_it_proves():
    """Each spec opens with a comment: scenario, expected outcome, what it does not prove."""
    for path in SPECS.glob("*.spec"):
        head = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            head.append(line)
        text = " ".join(head).lower()
        assert head, f"{path.name} does not open with a comment"
        assert re.search(r"does not prove|do not prove", text), \
            f"{path.name}: the opening comment must say what the spec does not prove"


def test_spec_format_errors_are_reported(tmp_path):
    bad = tmp_path / "bad.spec"
    bad.write_text("# x\nsession a\n  step s1 begin(\npermutation s1\n")
    with pytest.raises(SpecError, match="bad.spec:3"):
        parse_spec(bad)
    bad.write_text("# x\nsession a\n  step s1 begin()\npermutation s2\n")
    with pytest.raises(SpecError, match="unknown step"):
        parse_spec(bad)
