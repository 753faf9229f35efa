"""EXPLAIN: a plan tree as PostgreSQL prints it (FORMAT TEXT).

Each node is one line ``Name  (cost=startup..total rows=N width=W)``; with ANALYZE,
``(actual time=first..last rows=N loops=L)`` follows (per loop averages, times in ms, as
PostgreSQL prints them); children are indented under ``->``; detail lines (Filter,
Index Cond, Hash Cond, Sort Key, Group Key ...) are indented under their node.  With
BUFFERS each node gets ``Buffers: shared hit=H read=R`` (inclusive of its children, from
the backend's buffer-manager counters), and minidb adds its own counters where they are
not zero: ``Heap Fetches`` (heap fetches made by index scans below the node),
and ``Index Items Killed`` (entries marked LP_DEAD).  With WAL (PostgreSQL 13+) each node
that wrote WAL gets ``WAL: records=N fpi=N bytes=N`` (inclusive of its children, from the
backend's WAL usage counters: records inserted, full-page images among them, bytes; a
commit record is written after the plan ran and is in no node).

FORMAT JSON (``explain_json``) prints the same tree as PostgreSQL's JSON format: one array
holding one object with ``"Plan"`` (and with ANALYZE ``"Planning Time"``, ``"Triggers"``,
``"Execution Time"``).  A node's object uses PostgreSQL's keys for the fields minidb has:
``"Node Type"`` (the title without its relation part; ``Hash Left Join`` is ``"Node Type":
"Hash Join", "Join Type": "Left"``; ``Insert on t`` is ``"ModifyTable"`` with
``"Operation": "Insert"``; ``HashAggregate`` is ``"Aggregate"`` with ``"Strategy":
"Hashed"``; grouping sets' MixedAggregate has ``"Strategy": "Mixed"`` and a ``"Grouping
Sets"`` list of ``{"Hash Keys": [[...]]}`` / ``{"Group Keys": [[]]}``), ``"Parent
Relationship"`` (Outer / Inner / Member / Subquery / InitPlan /
SubPlan, with ``"Subplan Name"``), ``"Parallel Aware"``, ``"Scan Direction"``, ``"Index
Name"``, ``"Relation Name"``, ``"Alias"``, ``"Startup Cost"``, ``"Total Cost"``, ``"Plan
Rows"``, ``"Plan Width"``, with ANALYZE ``"Actual Startup Time"``, ``"Actual Total Time"``
(unless TIMING off), ``"Actual Rows"``, ``"Actual Loops"``, the detail lines as keys
(``"Filter"``, ``"Index Cond"``, ``"Hash Cond"``; ``"Sort Key"``, ``"Group Key"``,
``"Partition By"``, ``"Order By"`` as lists), BUFFERS as ``"Shared Hit Blocks"`` /
``"Shared Read Blocks"``, WAL as ``"WAL Records"`` / ``"WAL FPI"`` / ``"WAL Bytes"``, and the
children under ``"Plans"``.  Departure: PostgreSQL prints every key of a node type even when
it is zero or empty (``"Shared Dirtied Blocks": 0``); minidb prints the keys it has values
for, and never ``"Async Capable"`` or ``"Output"``.
"""

from __future__ import annotations

import json
import re

from minidb.exec.nodes import PlanNode

__all__ = ["explain_lines", "explain_json"]


def _fmt_ms(s: float) -> str:
    return f"{s * 1000:.3f}"


def explain_lines(root: PlanNode, *, qualify: bool = False, costs: bool = True,
                  analyze: bool = False, buffers: bool = False, wal: bool = False,
                  timing: bool = True,
                  instr: dict | None = None) -> list[str]:
    lines: list[str] = []

    def visible(node):
        while node.hidden and node.children:
            node = node.children[0]
        return node

    def emit(node, depth, offset=""):
        node = visible(node)
        if depth == 0:
            head, pad = offset, offset + "  "
        else:
            head = offset + " " * (6 * depth - 4) + "->  "
            pad = offset + " " * (6 * depth + 2)
        line = head + node.title()
        if costs:
            line += (f"  (cost={node.startup_cost:.2f}..{node.total_cost:.2f} "
                     f"rows={node.rows:.0f} width={node.width})")
        ins = instr.get(id(node)) if (analyze and instr is not None) else None
        if analyze:
            if ins is None or ins.loops == 0:
                line += " (never executed)"
            else:
                loops = ins.loops
                rows = round(ins.rows / loops)
                if timing:
                    line += (f" (actual time={_fmt_ms(ins.startup / loops)}.."
                             f"{_fmt_ms(ins.total / loops)} rows={rows} loops={loops})")
                else:
                    line += f" (actual rows={rows} loops={loops})"
        lines.append(line)
        for d in node.details(qualify):
            lines.append(pad + d)
        if ins is not None:
            for k, v in ins.extra.items():
                if isinstance(v, float):
                    v = f"{v:.0f}"
                lines.append(f"{pad}{k}: {v}")
            if buffers:
                parts = []
                if ins.hit:
                    parts.append(f"hit={ins.hit}")
                if ins.read:
                    parts.append(f"read={ins.read}")
                if parts:
                    lines.append(f"{pad}Buffers: shared {' '.join(parts)}")
                if ins.heap_fetches:
                    lines.append(f"{pad}Heap Fetches: {ins.heap_fetches}")
                if ins.killed:
                    lines.append(f"{pad}Index Items Killed: {ins.killed}")
            if wal and (ins.wal_records or ins.wal_fpi or ins.wal_bytes):
                lines.append(f"{pad}WAL: records={ins.wal_records} fpi={ins.wal_fpi} "
                             f"bytes={ins.wal_bytes}")
        for label, sub in getattr(node, "initplans", ()):
            lines.append(pad + label)
            emit(sub, depth + 1, offset + "  ")
        for ch in node.children:
            emit(ch, depth + 1, offset)
        for label, sub in getattr(node, "subplans", ()):
            lines.append(pad + label)
            emit(sub, depth + 1, offset + "  ")

    emit(root, 0)
    return lines


# -- FORMAT JSON -------------------------------------------------------------------------------
_LIST_KEYS = ("Sort Key", "Group Key", "Partition By", "Order By", "Presorted Key")
_JOIN_TYPES = ("Left", "Right", "Full", "Semi", "Anti")
_SCAN_ON = re.compile(r"^(?P<type>Seq Scan|Parallel Seq Scan|Function Scan|Subquery Scan|"
                      r"CTE Scan|WorkTable Scan) on (?P<rel>\S+)(?: (?P<alias>\S+))?$")
_INDEX_SCAN = re.compile(r"^(?P<type>Index Scan|Index Only Scan)(?P<back> Backward)? using "
                         r"(?P<index>\S+) on (?P<rel>\S+)(?: (?P<alias>\S+))?$")
_MODIFY = re.compile(r"^(?P<op>Insert|Update|Delete) on (?P<rel>\S+)(?: (?P<alias>\S+))?$")
_JOIN = re.compile(r"^(?P<type>Nested Loop|Hash|Merge)(?: (?P<jt>Left|Right|Full|Semi|Anti))?"
                   r"(?: Join)?$")
_AGG = {"Aggregate": ("Aggregate", "Plain"), "HashAggregate": ("Aggregate", "Hashed"),
        "GroupAggregate": ("Aggregate", "Sorted"), "Partial Aggregate": ("Aggregate", "Plain"),
        "Finalize Aggregate": ("Aggregate", "Plain"), "MixedAggregate": ("Aggregate", "Mixed")}


def _split_top(text: str) -> list[str]:
    """``a, f(b, c), d`` -> ``["a", "f(b, c)", "d"]``: commas outside parentheses and quotes."""
    out, depth, quote, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quote = not quote
        elif quote:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def _title_fields(title: str) -> dict:
    """PostgreSQL's JSON fields of a node from its text title."""
    m = _INDEX_SCAN.match(title)
    if m:
        rel = m["rel"]
        return {"Node Type": m["type"], "Parallel Aware": False,
                "Scan Direction": "Backward" if m["back"] else "Forward",
                "Index Name": m["index"], "Relation Name": rel, "Alias": m["alias"] or rel}
    m = _SCAN_ON.match(title)
    if m:
        t, rel = m["type"], m["rel"]
        out = {"Node Type": "Seq Scan" if t == "Parallel Seq Scan" else t,
               "Parallel Aware": t.startswith("Parallel")}
        if t in ("Seq Scan", "Parallel Seq Scan"):
            out["Relation Name"] = rel
        elif t == "Function Scan":
            out["Function Name"] = rel
        elif t in ("CTE Scan", "WorkTable Scan"):
            out["CTE Name"] = rel
        out["Alias"] = m["alias"] or rel
        return out
    m = _MODIFY.match(title)
    if m:
        return {"Node Type": "ModifyTable", "Operation": m["op"], "Parallel Aware": False,
                "Relation Name": m["rel"], "Alias": m["alias"] or m["rel"]}
    if title != "Hash":
        m = _JOIN.match(title)
        if m and (m["type"] == "Nested Loop" or title.endswith("Join")):
            typ = m["type"] if m["type"] == "Nested Loop" else m["type"] + " Join"
            return {"Node Type": typ, "Parallel Aware": False, "Join Type": m["jt"] or "Inner"}
    if title in _AGG:
        typ, strategy = _AGG[title]
        out = {"Node Type": typ, "Strategy": strategy}
        if title.startswith(("Partial", "Finalize")):
            out["Partial Mode"] = title.split()[0]
        out["Parallel Aware"] = False
        return out
    return {"Node Type": title, "Parallel Aware": False}


def _detail_value(key: str, text: str):
    if key in _LIST_KEYS:
        return _split_top(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def explain_json(root: PlanNode, *, qualify: bool = False, costs: bool = True,
                 analyze: bool = False, buffers: bool = False, wal: bool = False,
                 timing: bool = True, instr: dict | None = None,
                 planning: float | None = None, execution: float | None = None) -> str:
    """The plan as PostgreSQL's EXPLAIN (FORMAT JSON) prints it (see the module docstring);
    ``planning`` / ``execution`` are seconds (None: not printed)."""

    def visible(node):
        while node.hidden and node.children:
            node = node.children[0]
        return node

    def build(node, relationship=None, subplan_name=None) -> dict:
        node = visible(node)
        d: dict = {}
        fields = _title_fields(node.title())
        d["Node Type"] = fields.pop("Node Type")
        if relationship is not None:
            d["Parent Relationship"] = relationship
        if subplan_name is not None:
            d["Subplan Name"] = subplan_name
        d.update(fields)
        if costs:
            d["Startup Cost"] = round(node.startup_cost, 2)
            d["Total Cost"] = round(node.total_cost, 2)
            d["Plan Rows"] = int(round(node.rows))
            d["Plan Width"] = node.width
        ins = instr.get(id(node)) if (analyze and instr is not None) else None
        if analyze:
            loops = ins.loops if ins is not None else 0
            if timing:
                d["Actual Startup Time"] = round(ins.startup / loops * 1000, 3) if loops else 0.0
                d["Actual Total Time"] = round(ins.total / loops * 1000, 3) if loops else 0.0
            d["Actual Rows"] = round(ins.rows / loops) if loops else 0
            d["Actual Loops"] = loops
        gsets = None
        if d.get("Strategy") == "Mixed":
            gsets = d["Grouping Sets"] = []
        for line in node.details(qualify):
            key, sep, text = line.partition(": ")
            if gsets is not None and key in ("Hash Key", "Group Key"):
                gsets.append({key + "s": [[] if text == "()" else _split_top(text)]})
            elif sep:
                d[key] = _detail_value(key, text)
        if ins is not None:
            for k, v in ins.extra.items():
                d[k] = int(round(v)) if isinstance(v, float) else v
            if buffers:
                d["Shared Hit Blocks"] = ins.hit
                d["Shared Read Blocks"] = ins.read
                if ins.heap_fetches:
                    d["Heap Fetches"] = ins.heap_fetches
                if ins.killed:
                    d["Index Items Killed"] = ins.killed
            if wal:
                d["WAL Records"] = ins.wal_records
                d["WAL FPI"] = ins.wal_fpi
                d["WAL Bytes"] = ins.wal_bytes
        plans = []
        for label, sub in getattr(node, "initplans", ()):
            plans.append(build(sub, "InitPlan", label))
        kids = node.children
        for i, ch in enumerate(kids):
            if d["Node Type"] in ("Append", "Recursive Union"):
                rel = "Member" if d["Node Type"] == "Append" else ("Outer" if i == 0 else "Inner")
            elif d["Node Type"] == "Subquery Scan":
                rel = "Subquery"
            else:
                rel = "Outer" if i == 0 else "Inner"
            plans.append(build(ch, rel))
        for label, sub in getattr(node, "subplans", ()):
            plans.append(build(sub, "SubPlan", label))
        if plans:
            d["Plans"] = plans
        return d

    top: dict = {"Plan": build(root)}
    if planning is not None:
        top["Planning Time"] = round(planning * 1000, 3)
    if analyze:
        top["Triggers"] = []
    if execution is not None:
        top["Execution Time"] = round(execution * 1000, 3)
    return json.dumps([top], indent=2)
