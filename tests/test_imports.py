"""No import cycle inside bertcore (module-level imports), and the training package split keeps
the names the pages and scripts use."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "bertcore"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        root = ".".join(base + ([node.module] if node.module else []))
    else:
        root = node.module or ""
    return [root] + [f"{root}.{a.name}" for a in node.names]


def import_graph() -> nx.DiGraph:
    """Edges module -> module for imports executed at import time (not inside functions or TYPE_CHECKING)."""
    files = {(_module_name(p)): p for p in PKG.rglob("*.py")}
    g = nx.DiGraph()
    for name, path in files.items():
        g.add_node(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(name, path.name == "__init__.py", node)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                if t in files and t != name:
                    g.add_edge(name, t)
    return g


def test_no_import_cycle_in_bertcore():
    g = import_graph()
    assert "bertcore.training.loop" in g and "bertcore.runs.layout" in g
    cycles = list(nx.simple_cycles(g))
    assert cycles == [], cycles


def test_the_cli_and_the_loop_do_not_import_each_other():
    g = import_graph()
    assert not nx.has_path(g, "bertcore.training.loop", "bertcore.train")
    assert not nx.has_path(g, "bertcore.runs", "bertcore.training.loop")


def test_public_names_after_the_split():
    from bertcore import data as D
    from bertcore import runs as R
    from bertcore import training as T

    for name in ("PretrainCollator", "build_pretraining_data", "load_documents", "check_upload", "CORPORA"):
        assert hasattr(D, name), name
    for name in ("RunDir", "launch", "cancel", "resume", "DeviceLock", "devices", "device_user", "task_of"):
        assert hasattr(R, name), name
    for name in ("Trainer", "TrainConfig", "lr_at", "make_optimizer", "autocast", "ExitCode", "validate"):
        assert getattr(T, name) is not None, name
