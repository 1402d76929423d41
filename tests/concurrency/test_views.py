"""Two sessions, one model, through the views: each view's body (uncached, so it really computes) runs in a loop in
thread A on the model the view cache shares (``explorer.views.core.load``), while thread B runs plain forwards on
the same model object; both must equal their single-threaded results and the model's mode, hooks and flags stay
as they were (see test_shared_model.py for the harness)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from bertcore.loading import sources
from explorer.views import core

from .test_shared_model import OTHER_LENGTH, SAME_LENGTH, run_beside_plain_forwards

S = sources.PACKAGED_MLM
MASK_ARGS = (S, "The keys to the cabinet [MASK] on the table.", None, 0.3, False, 0.8, 0.1, 0)

# "module.view" -> (args, kwargs): one call per view of explorer.views
CALLS: dict[str, tuple[tuple, dict]] = {
    "masking.draw": (MASK_ARGS, {}),
    "masking.guesses": (MASK_ARGS, {"temperature": 1.5, "top_k": 10}),
    "masking.lens": (MASK_ARGS, {}),
}


def every_view() -> dict[str, core.View]:
    """``"module.name" -> View`` for every view defined in a module of :mod:`explorer.views`."""
    import explorer.views as package

    out = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"explorer.views.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, core.View) and value.fn.__module__ == module.__name__:
                out[f"{info.name}.{name}"] = value
    return out


@pytest.fixture(scope="module")
def mlm():
    return core.load(S)  # the object every view of S computes with


@pytest.mark.parametrize("other", [SAME_LENGTH, OTHER_LENGTH], ids=["same_length", "other_length"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_view_beside_plain_forwards_on_one_model(mlm, name, other):
    view = every_view()[name]
    args, kwargs = CALLS[name]
    run_beside_plain_forwards(mlm.model, mlm.tokenizer, lambda: view.fn(*args, **kwargs), other)


def test_the_suite_covers_every_view():
    assert sorted(every_view()) == sorted(CALLS), "add the new views to CALLS"
