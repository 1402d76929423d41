""""Show the code" printed from a view's own source (explorer.views.code): a change to a view's computation changes
its snippet and the snippet's result with it; bodies that cannot be printed as a script are refused; the notebook
holds the snippet cell by cell."""

from __future__ import annotations

import importlib
import sys

import nbformat
import numpy as np
import plotly.basedatatypes
import pytest

from bertcore.loading import sources
from explorer.views import code, core
from explorer.views import masking as views

from ..conftest import ROOT

ARGS = (sources.PACKAGED_MLM, "The keys to the cabinet [MASK] on the table.", None, 0.0, False, 0.8, 0.1, 0)
DECODING = "fill_mask.Decoding(temperature, top_k, top_p)"


def _run(snippet: str) -> dict:
    """The snippet executed as a script (figures not shown)."""
    namespace = {"__name__": "__main__"}
    show = plotly.basedatatypes.BaseFigure.show
    plotly.basedatatypes.BaseFigure.show = lambda self, *a, **k: None
    try:
        exec(compile(snippet, "snippet.py", "exec"), namespace)
    finally:
        plotly.basedatatypes.BaseFigure.show = show
    return namespace


@pytest.fixture
def changed_copy(tmp_path, monkeypatch):
    """A temporary copy of the Masking views whose decoding doubles the temperature."""
    text = (ROOT / "explorer" / "views" / "masking.py").read_text(encoding="utf-8")
    guesses = text.index("def guesses(")
    assert text.find(DECODING, guesses) == text.find(DECODING)  # the first one is the guesses' own (sampled's after)
    (tmp_path / "masking_copy.py").write_text(text.replace(DECODING, DECODING.replace("temperature,",
                                                                                      "temperature * 2,"), 1))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("masking_copy", None)
    return importlib.import_module("masking_copy")


def test_changing_a_view_changes_its_snippet_and_the_snippets_result(changed_copy):
    original = code.snippet("Masking", views.guesses, ARGS)
    changed = code.snippet("Masking", changed_copy.guesses, ARGS)
    assert DECODING in original and "fill_mask.Decoding(temperature * 2, top_k, top_p)" in changed
    assert DECODING not in changed
    got = _run(changed)["result"]
    want = changed_copy.guesses.fn(*ARGS)  # the changed view's own value
    np.testing.assert_allclose(got.probs, want.probs, atol=1e-6)
    plain = views.guesses.fn(*ARGS)
    assert not np.allclose(got.probs, plain.probs, atol=1e-3)  # the change shows in the numbers, not only the text
    np.testing.assert_allclose(_run(original)["result"].probs, plain.probs, atol=1e-6)


def test_the_snippet_binds_the_inputs_and_keeps_the_bodys_comments():
    s = code.snippet("Masking", views.lens, ARGS, {"tuned": None}, [(views.lens_figure, {"positions": [6]})])
    assert "text = 'The keys to the cabinet [MASK] on the table.'" in s and "source = sources.DEFAULT" in s
    assert "# which tokens may be selected" in s  # draw()'s comment, printed with its def
    assert "def draw(" in s and "@view" not in s  # the helper view as a plain function
    assert "result = Lens(ll, top_tokens, d.fed_tokens)" in s and "return Lens" not in s.split("def draw(")[0]
    assert "positions = [6]" in s and "fig.show()" in s
    assert "from bertcore.loading.sources import load" in s and "explorer.views.core" not in s


@core.view
def _early(x: int):
    if x:
        return 1
    return 2


@core.view
def _unknown(x: int):
    return not_defined_anywhere(x)  # noqa: F821


def _no_return(x: int):
    print(x)


def test_bodies_that_do_not_read_as_a_script_are_refused():
    with pytest.raises(ValueError, match="returns before its end"):
        code.snippet("t", _early, (1,))
    with pytest.raises(ValueError, match="does not define"):
        code.snippet("t", _unknown, (1,))
    with pytest.raises(ValueError, match="must end with"):
        code.snippet("t", _no_return, (1,))


def test_every_view_module_prints_its_views():
    """Every @view in explorer.views prints (a body the printer cannot read fails here, not on a page)."""
    import inspect
    import pkgutil

    import explorer.views as package

    found = 0
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"explorer.views.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, core.View) and value.fn.__module__ == module.__name__:
                params = inspect.signature(value.fn).parameters
                text = code.snippet(name, value, kwargs={p: None for p in params})
                compile(text, name, "exec")
                found += 1
    assert found >= 3


def test_the_notebook_holds_the_snippet_cell_by_cell():
    s = code.snippet("Masking", views.guesses, (sources.ModelSource("local", "/tmp/x", "x"), "A 'quoted'\n ünï",
                                                None, 0.1, False, 0.8, 0.1, 0), draw=[(views.bars_figure, {})])
    assert "sources.ModelSource('local', '/tmp/x', 'x')" in s and repr("A 'quoted'\n ünï") in s
    nb = nbformat.reads(code.notebook(s, "Masking"), as_version=4)
    nbformat.validate(nb)
    assert nb.cells[0].cell_type == "markdown" and all(c.cell_type == "code" for c in nb.cells[1:])
    assert len(nb.cells) - 1 == s.count(code.CELL) + 1
    assert "\n".join(c.source for c in nb.cells[1:]).replace("\n", "") == s.replace(code.CELL, "").replace("\n", "")
