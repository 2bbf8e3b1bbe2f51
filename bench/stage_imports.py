"""Which parts of curate import which stage, and who opens a run folder: the import graph the
stage contract is held to (docs: Run folders, "Who knows the stages").

    python bench/stage_imports.py [TREE ...]     # default: this checkout

For each package outside the stages (report, flows, export's neighbours, api, cli, core) it
lists the stage packages it imports, with ``*`` for one named in a string (an
``importlib.import_module`` target or a registry's list of modules), every module outside
``curate/core`` that imports ``open_run``, and every one outside it that takes a lock (``folder_lock``,
``fcntl``) or names a run by content (a path or f-string built from ``value_digest``, ``file_digest``
or ``fingerprint``: ``curate.core.stage.placed`` is the one place that does).
"""

from __future__ import annotations

import ast
import collections
import re
import sys
from pathlib import Path

STAGE_PACKAGES = {"generate", "filter", "mine", "export", "convert", "train"}
SHOWN = ("report", "flows", "export", "api", "cli", "core")


LOCKS = {"folder_lock", "_lock", "open_run"}
DIGESTS = {"value_digest", "file_digest", "tree_digest", "fingerprint"}


def _digest_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in DIGESTS
               for n in ast.walk(node))


def own_runs(tree: Path) -> list[str]:
    """Modules outside curate/core that take a lock or name a folder from a digest (``file:line``)."""
    found = []
    for path in sorted((tree / "curate").rglob("*.py")):
        rel = path.relative_to(tree / "curate")
        if rel.parts[0] == "core":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            lock = (isinstance(node, ast.ImportFrom) and any(a.name in LOCKS for a in node.names)) or (
                isinstance(node, ast.Import) and any(a.name == "fcntl" for a in node.names))
            named = (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _digest_call(node.right)) or (
                isinstance(node, ast.JoinedStr) and _digest_call(node))
            if lock or named:
                found.append(f"{rel}:{node.lineno} ({'lock' if lock else 'run name'})")
    return found


def graph(tree: Path) -> tuple[dict[str, set[str]], list[str]]:
    edges: dict[str, set[str]] = collections.defaultdict(set)
    open_run: set[str] = set()
    for path in sorted((tree / "curate").rglob("*.py")):
        rel = path.relative_to(tree / "curate")
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("curate."):
                target = node.module.split(".")[1]
                if target != package and target in STAGE_PACKAGES:
                    edges[package].add(target)
                if package != "core" and any(a.name == "open_run" for a in node.names):
                    open_run.add(str(rel))
        for named in re.findall(r'"curate\.(\w+)\.[\w.]+"', text):
            if named in STAGE_PACKAGES and named != package:
                edges[package].add(named + "*")
    return edges, sorted(open_run)


def main(trees: list[str]) -> None:
    for tree in trees or ["."]:
        edges, open_run = graph(Path(tree))
        print(f"## {tree}")
        for package in SHOWN:
            print(f"  {package:7} -> {', '.join(sorted(edges.get(package, ()))) or '-'}")
        print(f"  open_run outside core/: {', '.join(open_run) or 'none'}")
        print(f"  a lock or run name outside core/: {', '.join(own_runs(Path(tree))) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])
