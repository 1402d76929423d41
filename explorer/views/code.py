"""The code is the view: "Show the code" printed from a view function's own source.

:func:`snippet` takes a :class:`~explorer.views.core.View` (or plain function) and the arguments a page called it
with, and writes a runnable Python file: the imports the function's body uses (read from its module's own import
lines), the page's inputs as assignments, the body itself with its final ``return X`` written as ``result = X``,
and the figure functions' bodies after it (``fig = ...``; ``fig.show()``). The module's helpers the body calls are
printed above it as ``def``\\ s, its constants as assignments. Nothing is a second copy: change a view's body and
the page and its snippet change together.

A view body must end with its only ``return`` (errors are raised, not returned); :func:`snippet` raises
``ValueError`` for one that does not. The view cache's :func:`~explorer.views.core.load` prints as
:func:`bertcore.loading.sources.load`, which loads the same model.

A snippet is plain Python in "percent" cells (``# %%`` lines, the format of Jupytext and VS Code): the ``.py``
download runs as a script and :func:`notebook` turns each cell into a notebook cell.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import sys
import textwrap
import threading
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Any

import nbformat

from bertcore.loading.sources import DEFAULT, PACKAGED, PACKAGED_MLM, ModelSource

from .core import View

CELL = "# %%"
# an import a snippet prints otherwise: the view cache's loader is the library's loader, cached
REWRITE = {("explorer.views.core", "load"): "from bertcore.loading.sources import load",
           ("explorer.views.core", "progress"): "progress = None  # the app draws a progress bar here"}
CONSTANT_TYPES = (int, float, str, bool, type(None), tuple, frozenset)


def source_expr(source: ModelSource) -> str:
    """``source`` as a Python expression (``sources.DEFAULT``, ``sources.PACKAGED`` or a ``ModelSource(...)``)."""
    for name, known in (("DEFAULT", DEFAULT), ("PACKAGED", PACKAGED), ("PACKAGED_MLM", PACKAGED_MLM)):
        if source == known:
            return f"sources.{name}"
    return f"sources.ModelSource({source.kind!r}, {source.ref!r}, {source.label!r})"


def value_expr(value: Any) -> str:
    """An input as Python text: a model source by :func:`source_expr`, a path as ``Path('...')``, anything else by
    ``repr``."""
    if isinstance(value, ModelSource):
        return source_expr(value)
    if isinstance(value, PurePath):
        return f"Path({str(value)!r})"
    return repr(value)


# ast.parse in two threads at once can fail on CPython 3.11 ("SystemError: AST constructor recursion depth mismatch",
# python/cpython#106905; seen here with 20 students on the Masking page), and every session's script runs in a thread:
# parse under one lock, once per function or module object (a module edited and re-imported is a new object).
_PARSE = threading.Lock()


@functools.lru_cache(maxsize=None)
def _parsed(obj) -> tuple[ast.Module, str]:
    """``obj``'s source (a function or a module), dedented, and its syntax tree; parsed once."""
    with _PARSE:
        text = textwrap.dedent(inspect.getsource(obj))
        return ast.parse(text), text


def _function(fn: Callable) -> tuple[ast.FunctionDef, str]:
    fn = fn.fn if isinstance(fn, View) else fn
    tree, text = _parsed(fn)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise ValueError(f"{fn.__qualname__} is not a plain function")
    return node, text


def _body(fn: Callable, target: str) -> tuple[list[ast.stmt], str]:
    """``fn``'s body as written (comments kept) without its docstring, its final ``return X`` as ``target = X``."""
    node, text = _function(fn)
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    name = getattr(fn, "__qualname__", repr(fn))
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        raise ValueError(f"{name} must end with `return <value>`: its body becomes the snippet")
    for stmt in body[:-1]:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Return):
                raise ValueError(f"{name} returns before its end (line {sub.lineno}); raise an error instead, so "
                                 "its body reads as a script")
    lines = text.splitlines()
    floor = node.body[0].end_lineno if body[0] is not node.body[0] else node.lineno  # docstring's or def's last line
    first = body[0].lineno - 1  # 0-based index of the first statement's line
    while first > floor and lines[first - 1].strip().startswith("#"):
        first -= 1  # comments just above the first statement belong to it
    out = lines[first:node.end_lineno]
    ret = body[-1].lineno - 1 - first
    out[ret] = re.sub(r"^(\s*)return\b", rf"\g<1>{target} =", out[ret], count=1)
    return body, textwrap.dedent("\n".join(out)).strip("\n")


def _def_text(fn: Callable) -> str:
    """``fn``'s whole source (comments kept) without its decorators."""
    node, text = _function(fn)
    return "\n".join(text.splitlines()[node.lineno - 1:node.end_lineno])


def _used_names(nodes: Sequence[ast.AST]) -> list[str]:
    """Free names, in order of first use: loaded names minus those assigned in ``nodes``."""
    loaded, stored = [], set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if isinstance(sub.ctx, ast.Load):
                    loaded.append(sub.id)
                else:
                    stored.add(sub.id)
            elif isinstance(sub, ast.arg):
                stored.add(sub.arg)
            elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                stored.add(sub.name)
            elif isinstance(sub, ast.ExceptHandler) and sub.name:
                stored.add(sub.name)
            elif isinstance(sub, ast.alias):
                stored.add((sub.asname or sub.name).split(".")[0])
    seen, out = set(), []
    for name in loaded:
        if name not in stored and name not in seen and not hasattr(builtins, name):
            seen.add(name)
            out.append(name)
    return out


def _imports_of(module) -> dict[str, str]:
    """``{bound name: import line}`` for every module-level import of ``module``'s file."""
    out = {}
    tree, _ = _parsed(module)
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = ast.unparse(ast.Import([a]))
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            modname = node.module or ""
            if node.level:  # a relative import, as an absolute one
                package = module.__package__ or ""
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                modname = f"{base}.{modname}" if modname else base
            for a in node.names:
                line = REWRITE.get((modname, a.name)) or ast.unparse(ast.ImportFrom(modname, [a], 0))
                out[a.asname or a.name] = line
    return out


class _Writer:
    def __init__(self) -> None:
        self.imports: list[str] = []
        self.defs: list[str] = []
        self.constants: list[str] = []
        self.done: set[tuple[str, str]] = set()

    def resolve(self, fn: Callable, names: list[str]) -> None:
        """Bring each free name of ``fn``'s body into the snippet: an import, a helper's ``def`` or a constant."""
        raw = fn.fn if isinstance(fn, View) else fn
        module = sys.modules[raw.__module__]
        imports = _imports_of(module)
        for name in names:
            if (module.__name__, name) in self.done:
                continue
            self.done.add((module.__name__, name))
            if name in imports:
                self.imports.append(imports[name])
                continue
            if not hasattr(module, name):
                raise ValueError(f"{raw.__qualname__} uses {name!r}, which its module does not define")
            value = getattr(module, name)
            inner = value.fn if isinstance(value, View) else value
            if inspect.isfunction(inner) and inner.__module__ == module.__name__:
                node, _ = _function(inner)
                self.resolve(inner, _used_names([*node.body, node.args] + ([node.returns] if node.returns else [])))
                self.defs.append(_def_text(inner))
            elif isinstance(value, CONSTANT_TYPES):
                self.constants.append(f"{name} = {value!r}")
            else:
                self.imports.append(f"from {module.__name__} import {name}")


def snippet(title: str, view: Callable, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None,
            draw: Sequence[tuple[Callable, dict[str, Any]]] = ()) -> str:
    """The runnable code of ``view(*args, **kwargs)`` and its figures (see the module).

    Args:
        title: the view in words (the snippet's docstring).
        view: a :class:`View` or plain function whose body ends with its only ``return``.
        args, kwargs: what the page called it with; bound to its parameters by name (defaults filled in) and
            printed as assignments (model sources as ``sources.PACKAGED_MLM`` and the like).
        draw: figure functions ``(fn, extra keyword arguments)``; each ``fn``'s first parameter receives the view's
            result, its body ends as ``fig = ...`` followed by ``fig.show()``.

    Returns:
        Python source whose ``result`` equals the view's value and whose ``fig`` is the page's (last) figure.

    Raises:
        ValueError: a body that does not end with its only ``return``, or a name its module does not define.
    """
    raw = view.fn if isinstance(view, View) else view
    bound = inspect.signature(raw).bind(*args, **(kwargs or {}))
    bound.apply_defaults()
    writer = _Writer()
    body_nodes, body = _body(view, "result")
    writer.resolve(view, [n for n in _used_names(body_nodes) if n not in bound.arguments])
    inputs = [f"{name} = {value_expr(value)}" for name, value in bound.arguments.items()]
    if any(isinstance(v, ModelSource) for v in bound.arguments.values()):
        writer.imports.append("from bertcore import sources")
    if any(isinstance(v, PurePath) for v in bound.arguments.values()):
        writer.imports.append("from pathlib import Path")
    cells = [body]
    for fn, extra in draw:
        params = list(inspect.signature(fn).parameters)
        fig_nodes, fig_body = _body(fn, "fig")
        given = {params[0]: "result", **{k: repr(v) for k, v in extra.items()}}
        writer.resolve(fn, [n for n in _used_names(fig_nodes) if n not in params])
        defaults = {k: repr(p.default) for k, p in inspect.signature(fn).parameters.items()
                    if p.default is not inspect.Parameter.empty and k not in given}
        lines = [f"{k} = {v}" for k, v in {**given, **defaults}.items()]
        cells.append("\n".join([*lines, fig_body, "fig.show()"]))
    imports = list(writer.imports)
    if REWRITE[("explorer.views.core", "load")] in imports:
        imports += ["", "import functools", "load = functools.cache(load)  # each model loaded once, as the app does"]
    defs = ["\n".join(writer.constants)] * bool(writer.constants) + writer.defs
    return document(title, imports, inputs, cells, defs)


def document(title: str, imports: Sequence[str], inputs: Sequence[str], cells: Sequence[str],
             defs: Sequence[str] = ()) -> str:
    """A snippet's text, the one layout of every "Show the code": a docstring naming ``title``, the ``imports``
    (``import`` lines first, sorted; lines after a blank one kept in order), the module-level ``defs``, a cell of
    the ``inputs`` (assignment lines), then one ``# %%`` cell per entry of ``cells``."""
    first, _, rest = "\n".join(dict.fromkeys(imports)).partition("\n\n")
    lines = sorted(filter(None, first.splitlines()), key=lambda s: (not s.startswith("import "), s))
    head = [f'"""BERT Explorer, {title}.', "",
            "Generated by the app from the page's own code and its current inputs. Run it anywhere the project is",
            'installed (pip install -e . in its environment; python this_file.py or a notebook)."""', "",
            *lines, *([""] + rest.splitlines() if rest else [])]
    parts = ["\n".join(head)]
    if defs:
        parts.append("\n\n".join(defs))
    parts.append(f"{CELL}\n# The view's inputs\n" + "\n".join(inputs))
    parts += [f"{CELL}\n{c}" for c in cells]
    return "\n\n".join(parts) + "\n"


def cells(code: str) -> list[str]:
    """``code`` cut at its ``# %%`` lines into cells (empty cells dropped, marker lines removed)."""
    out, current = [], []
    for line in code.splitlines():
        if line.strip() == CELL:
            out.append("\n".join(current).strip("\n"))
            current = []
        else:
            current.append(line)
    out.append("\n".join(current).strip("\n"))
    return [c for c in out if c.strip()]


def notebook(code: str, title: str) -> str:
    """A Jupyter notebook (nbformat 4, JSON text) of ``code``: a markdown title cell, then one code cell per
    ``# %%`` cell. Raises ``nbformat.ValidationError`` if the result is not a valid notebook (it always is)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(f"# BERT Explorer: {title}\n\nGenerated by the app from the view's "
                                              "code and its current inputs. Start Jupyter where the project is "
                                              "installed (`pip install -e .` in its environment).")]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells(code)]
    nbformat.validate(nb)
    return nbformat.writes(nb)
