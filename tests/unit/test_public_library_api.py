"""Relay reaches the server and the SMPP codec through their public API only: no class
of theirs is subclassed and no underscore name of theirs is touched."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import relay

GUARDED = ("granian", "uvicorn", "smpplib", "httptools", "prometheus_client")
# prometheus-client documents subclassing its Collector as the way to export values.
MADE_TO_SUBCLASS = {"Collector"}
SOURCES = sorted(Path(relay.__file__).parent.rglob("*.py"))


def library_names(tree: ast.Module) -> set[str]:
    """Local names bound to a guarded library or to something imported from one."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in GUARDED:
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in GUARDED:
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_library_class_is_subclassed_and_no_private_name_is_used(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    ours = library_names(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in GUARDED:
            problems += [f"imports {a.name}" for a in node.names if private(a.name)]
            if any(private(part) for part in (node.module or "").split(".")):
                problems.append(f"imports from {node.module}")
        if isinstance(node, ast.ClassDef):
            problems += [
                f"class {node.name} subclasses {ast.unparse(base)}"
                for base in node.bases
                if root_name(base) in ours and ast.unparse(base) not in MADE_TO_SUBCLASS
            ]
        if isinstance(node, ast.Attribute) and private(node.attr) and root_name(node) in ours:
            problems.append(f"uses {ast.unparse(node)}")
    assert problems == [], path
