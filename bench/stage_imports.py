"""Which parts of curate import which stage, and who opens a run folder: the import graph the
stage contract is held to (docs: Run folders, "Who knows the stages").

    python bench/stage_imports.py [TREE ...]     # default: this checkout

For each package outside the stages (report, flows, export's neighbours, api, cli, core) it
lists the stage packages it imports, with ``*`` for one named in a string (an
``importlib.import_module`` target or a registry's list of modules), and every module outside
``curate/core`` that imports ``open_run``.
"""

from __future__ import annotations

import ast
import collections
import re
import sys
from pathlib import Path

STAGE_PACKAGES = {"generate", "filter", "mine", "export", "convert", "train"}
SHOWN = ("report", "flows", "export", "api", "cli", "core")


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


if __name__ == "__main__":
    main(sys.argv[1:])
