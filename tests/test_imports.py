"""The layering: bertcore imports no UI library and explorer.figures no Streamlit; no import cycle
inside bertcore (module-level imports); the training package split keeps the names the pages and
scripts use."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from .conftest import ROOT

PKG = ROOT / "bertcore"
# package -> the libraries that none of its modules may pull in (directly or through anything they import)
LAYERS = {
    "bertcore": ("streamlit", "plotly"),  # the model and the analyses run without a UI
    "explorer.figures": ("streamlit",),  # figures are pure functions of arrays: plotly only
}


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
    assert not nx.has_path(g, "bertcore.training.loop", "bertcore.training.cli")
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


def modules_of(package: str) -> list[str]:
    """Every module of a package folder (``__init__`` as the package itself), sorted."""
    folder = ROOT.joinpath(*package.split("."))
    names = {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in folder.rglob("*.py")}
    return sorted(n.removesuffix(".__init__") for n in names)


@pytest.mark.parametrize("package", list(LAYERS))
def test_layering(package):
    """Importing every module of the package, in a fresh interpreter, loads none of its forbidden libraries."""
    forbidden = LAYERS[package]
    modules = modules_of(package)
    assert len(modules) > 5, modules
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(forbidden)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", f"{package} pulls in {out.stdout.strip()}"
