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
"""

from __future__ import annotations

from minidb.exec.nodes import PlanNode

__all__ = ["explain_lines"]


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
