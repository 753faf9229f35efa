"""The layer rule, checked by reading the source: minidb's modules import only downward.

Every module of the ``minidb`` package is parsed with ``ast`` (no import is executed) and
every import in it is collected, imports inside functions and under ``if TYPE_CHECKING``
included, relative imports resolved against the module's package.  Two rules:

1. **Layers.**  A module imports only from its own layer or a layer before it in
   ``LAYERS``.  A module's layer is the first name under ``minidb``: ``minidb.heap.mvcc`` is
   in ``heap``, ``minidb.catalog`` in ``catalog``.  The package itself
   (``minidb/__init__.py``, which re-exports the DB-API) is the top layer, so
   ``from minidb import errors`` inside minidb counts as an import from the top: write
   ``import minidb.errors as errors`` or ``from minidb.errors import ...``.
2. **No cycles** between modules, inside a layer too (``a`` imports ``b`` and ``b``, even
   in a function, imports ``a``).

``from P import name`` is an import of the module ``P.name`` when that is a module, else of
``P`` (a package's ``__init__``).  The failure messages name each offending import as
``file:line``.

``LAYERS`` is the one written statement of the order; README.md's "Layers" section repeats
it, and ``test_readme_states_the_same_order`` keeps the two equal.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minidb"

# Bottom to top.  "minidb" is the package itself (minidb/__init__.py re-exports the DB-API).
LAYERS = ("errors", "config", "types", "pgwire", "fileio", "shmem", "wal", "storage", "txn",
          "heap", "catalog", "index", "workers", "recovery", "monitor",
          "instance", "amcheck", "session", "exec",
          "sql", "dbapi", "pgbench", "server", "repl",
          "experiments", "cli", "minidb")



@dataclass(frozen=True)
class Import:
    importer: str   # module name, e.g. minidb.heap.mvcc
    imported: str   # module name (a package stands for its __init__)
    path: str       # file, relative to the repository
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}: {self.importer} imports {self.imported}"


def module_files() -> dict[str, Path]:
    """Module name -> file, for every module of the package (packages by their __init__)."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


@functools.cache
def collect_imports() -> tuple[list[Import], list[str]]:
    """Every import of a minidb module by a minidb module, and the imports that name no
    module of the package (as 'file:line: ...' problems)."""
    mods = module_files()
    imports, unresolved = [], []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                if base.split(".")[0] != "minidb":
                    continue
                if base == "minidb":     # the top: whatever is imported from it
                    targets = [base]
                else:
                    targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                               for a in node.names]
            for target in targets:
                if target.split(".")[0] != "minidb":
                    continue
                if target not in mods:
                    unresolved.append(f"{rel}:{node.lineno}: {name} imports {target}, "
                                      f"which is no module of minidb")
                    continue
                if target != name:
                    imports.append(Import(name, target, rel, node.lineno))
    return sorted(set(imports), key=lambda i: (i.path, i.line, i.imported)), unresolved


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "minidb"


def up_imports(imports: list[Import]) -> list[Import]:
    """The imports of a module from a layer above its own."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return [i for i in imports
            if rank[layer_of(i.imported)] > rank[layer_of(i.importer)]]


def cycles(imports: list[Import]) -> list[list[Import]]:
    """One shortest loop of imports through each set of modules that import each other in a
    circle (a strongly connected set of two or more modules, found with Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.importer, set()).add(i.imported)
        graph.setdefault(i.imported, set())
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    scc = set()
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        scc.add(x)
                        if x == v:
                            break
                    if len(scc) > 1:
                        sccs.append(scc)
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    first = {}
    for i in imports:
        first.setdefault((i.importer, i.imported), i)
    loops = []
    for scc in sccs:
        start = min(scc)
        prev, frontier = {}, [start]
        while start not in prev:          # breadth first, back to start inside the set
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & scc):
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        path, w = [], start
        while True:
            v = prev[w]
            path.append(first[(v, w)])
            w = v
            if w == start:
                break
        loops.append(path[::-1])
    return loops


def test_every_module_has_a_layer():
    unknown = sorted({layer_of(m) for m in module_files()} - set(LAYERS))
    assert not unknown, f"packages or modules in no layer (add them to LAYERS): {unknown}"


def test_every_import_names_a_module():
    _, unresolved = collect_imports()
    assert not unresolved, "imports of no module:\n" + "\n".join(unresolved)


def test_no_module_imports_from_a_layer_above():
    imports, _ = collect_imports()
    bad = up_imports(imports)
    assert not bad, ("imports from a layer above the importer's (order: "
                     + " < ".join(LAYERS) + "):\n"
                     + "\n".join(f"{i.where()} ({layer_of(i.importer)} < "
                                 f"{layer_of(i.imported)})" for i in bad))


def test_no_import_cycles():
    imports, _ = collect_imports()
    found = cycles(imports)
    assert not found, "import cycles (one loop of each):\n" + "\n\n".join(
        "\n".join(i.where() for i in loop) for loop in found)


def test_readme_states_the_same_order():
    order = " < ".join(f"`{layer}`" for layer in LAYERS[:-1])
    readme = (ROOT / "README.md").read_text()
    assert order in readme, f"README.md's Layers section must state the order:\n{order}"


def test_the_checker_sees_what_it_must():
    """The checks above would pass on a checker that saw nothing: make sure it sees an up
    import, a cycle and a function-level import of this repository."""
    imports, _ = collect_imports()
    pairs = {(i.importer, i.imported) for i in imports}
    assert ("minidb.heap.mvcc", "minidb.txn.visibility") in pairs
    assert ("minidb.sql.engine", "minidb.sql.commands") in pairs   # inside a method
    fake = [Import("minidb.txn.clog", "minidb.heap.layout", "x.py", 1),
            Import("minidb.heap.layout", "minidb.txn.clog", "y.py", 2)]
    assert up_imports(fake) == fake[:1]
    assert [set(loop) for loop in cycles(fake)] == [set(fake)]
