"""The import rule of docs/LAYERING.md: no circle, and every import of bertcore/, explorer/ and app.py goes down
the table of layers (read from the doc itself, so the doc is the rule)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

from .conftest import ROOT

DOC = ROOT / "docs" / "LAYERING.md"


def read_layers(doc: Path = DOC) -> dict[str, int]:
    """``{module prefix: row}`` from the table between ``<!-- layers -->`` and ``<!-- /layers -->``."""
    text = doc.read_text(encoding="utf-8")
    block = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    layers = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            for name in re.findall(r"`([\w.]+)`", cells[1]):
                layers[name] = int(cells[0])
    return layers


def find_modules(root: Path, packages=("bertcore", "explorer"), scripts=("app.py",)) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``packages`` and the top-level ``scripts``."""
    out = {}
    for base in packages:
        for path in (root / base).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    for script in scripts:
        if (root / script).exists():
            out[Path(script).stem] = root / script
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (module level or inside functions).
    ``from pkg import sub`` counts as importing ``pkg.sub`` when that is a module, else ``pkg`` itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_known(a.name, modules) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else _known(target, modules))
    found.discard(None)
    found.discard(name)
    return found


def import_graph(root: Path = ROOT, **kw) -> nx.DiGraph:
    modules = find_modules(root, **kw)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in imports_of(name, path, modules))
    return graph


def layer_of(module: str, layers: dict[str, int]) -> int:
    prefix = module
    while prefix and prefix not in layers:
        prefix = prefix.rpartition(".")[0]
    if not prefix:
        raise KeyError(f"{module} is in no row of docs/LAYERING.md: add it to the table")
    return layers[prefix]


def upward_imports(graph: nx.DiGraph, layers: dict[str, int]) -> list[str]:
    return [f"{a} (row {layer_of(a, layers)}) imports {b} (row {layer_of(b, layers)})"
            for a, b in graph.edges if layer_of(a, layers) < layer_of(b, layers)]


def folder_of(module: str, modules: dict[str, Path], root: Path = ROOT) -> str:
    """The directory of a module's file, dotted (``bertcore.tokenization`` for ``bertcore.tokenization.masking`` and
    for the package's ``__init__``)."""
    return ".".join(modules[module].relative_to(root).parent.parts) or module


def imports_across_folders(graph: nx.DiGraph, layers: dict[str, int], modules: dict[str, Path],
                           root: Path = ROOT) -> list[str]:
    """Imports of a module of another folder (not a folder above or below it) where some module of the importing
    folder sits on a lower row than some module of the imported one: the folders do not show the rows."""
    rows: dict[str, set[int]] = {}
    for m in graph.nodes:
        if graph.degree(m):  # modules that import nothing of the project and that nothing imports do not count
            rows.setdefault(folder_of(m, modules, root), set()).add(layer_of(m, layers))
    out = []
    for a, b in graph.edges:
        fa, fb = folder_of(a, modules, root), folder_of(b, modules, root)
        if fa == fb or fa.startswith(fb + ".") or fb.startswith(fa + "."):
            continue
        if min(rows[fa]) < max(rows[fb]):
            out.append(f"{a} imports {b}, but folder {fa} has rows {sorted(rows[fa])} and {fb} rows {sorted(rows[fb])}")
    return out


def circles(graph: nx.DiGraph) -> list[list[str]]:
    return [c for c in nx.simple_cycles(graph)]


def test_the_project_has_no_import_circle():
    assert circles(import_graph()) == []


def test_every_import_goes_down_the_layers():
    assert upward_imports(import_graph(), read_layers()) == []


def test_the_folders_are_the_rows():
    assert imports_across_folders(import_graph(), read_layers(), find_modules(ROOT)) == []


def test_every_module_has_a_row():
    layers = read_layers()
    for module in find_modules(ROOT):
        layer_of(module, layers)  # raises for a module the table forgot


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_checks_catch_a_circle_and_an_upward_import(tmp_path):
    """The checker on a made-up tree: a lazy circle (as syntax <-> syntax_probe was) and a model-level module
    importing analysis (as positional -> analysis was)."""
    _write(tmp_path, {
        "bertcore/__init__.py": "",
        "bertcore/modeling/config.py": "",
        "bertcore/readouts/positional.py": "from ..analysis import cosine_matrix\n",
        "bertcore/analysis/__init__.py": "from .similarity import cosine_matrix\n",
        "bertcore/analysis/similarity.py": "def cosine_matrix(x):\n    return x\n",
        "bertcore/analysis/syntax.py": "def run():\n    from .syntax_probe import probe\n",
        "bertcore/analysis/syntax_probe.py": "from .syntax import run\n",
        "explorer/__init__.py": "",
    })
    graph = import_graph(tmp_path)
    assert ["bertcore.analysis.syntax", "bertcore.analysis.syntax_probe"] in [sorted(c) for c in circles(graph)]
    layers = {"bertcore": 1, "bertcore.modeling.config": 0, "bertcore.analysis": 4, "explorer": 11}
    assert upward_imports(graph, layers) == ["bertcore.readouts.positional (row 1) imports bertcore.analysis (row 4)"]


def test_the_folder_check_catches_a_folder_that_spans_rows(tmp_path):
    """A folder with a module on a high row (as tokenization/wordpiece read corpora) imported from a lower folder."""
    _write(tmp_path, {
        "bertcore/__init__.py": "",
        "bertcore/modeling/heads.py": "from ..tokenization.masking import mask_tokens\n",
        "bertcore/tokenization/masking.py": "def mask_tokens():\n    pass\n",
        "bertcore/tokenization/wordpiece.py": "from ..data.corpora import load_documents\n",
        "bertcore/data/corpora.py": "def load_documents():\n    pass\n",
    })
    graph, modules = import_graph(tmp_path), find_modules(tmp_path)
    layers = {"bertcore": 1, "bertcore.tokenization": 0, "bertcore.tokenization.wordpiece": 3, "bertcore.data": 3}
    assert upward_imports(graph, layers) == []  # every import goes down a row ...
    found = imports_across_folders(graph, layers, modules, tmp_path)
    assert sorted(found) == [  # ... but tokenization spans rows 0 to 3
        "bertcore.modeling.heads imports bertcore.tokenization.masking, but folder bertcore.modeling has rows [1] and "
        "bertcore.tokenization rows [0, 3]",
        "bertcore.tokenization.wordpiece imports bertcore.data.corpora, but folder bertcore.tokenization has rows "
        "[0, 3] and bertcore.data rows [3]"]


def test_the_table_is_read_from_the_doc():
    layers = read_layers()
    assert layers["bertcore.modeling.config"] == 0 and layers["app"] == 15
    assert layers["bertcore.runs"] < layers["bertcore.training"] < layers["explorer"]
    with pytest.raises(KeyError, match="no row"):
        layer_of("elsewhere.module", layers)
