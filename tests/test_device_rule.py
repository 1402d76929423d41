"""The device rule on the CPU: every view of the app, the SAE and transcoder trainer and the graph builder make no
tensor on an implicit device (:mod:`tests.device_rule`), so the same code computes on a GPU when the model is there.

The views run with the arguments of the concurrency suite (:data:`tests.concurrency.test_views.CALLS`: small and
fast), their model through the view cache as the app loads it."""

from __future__ import annotations

import textwrap

import pytest
import torch

from explorer.views import core

from .concurrency.test_views import CALLS, every_view, made, resolve  # noqa: F401 - made: the fixture
from .device_rule import ROOT, ImplicitDevice


def test_the_rule_sees_a_factory_with_no_device_in_an_analysis():
    """A ``torch.zeros(n)`` added to a file of bertcore's analyses is found, with its line; the same call given the
    input's device, a module's parameters made in its ``__init__`` and code outside the ruled folders are not."""
    source = textwrap.dedent("""
        import torch

        def broken(x):
            return x + torch.zeros(x.shape[-1])

        def kept(x):
            return x + torch.zeros(x.shape[-1], device=x.device) + x.new_zeros(x.shape[-1])

        class Probe(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(3))
        """)
    names: dict = {}
    exec(compile(source, str(ROOT / "bertcore/analysis/made_up.py"), "exec"), names)  # noqa: S102
    outside: dict = {}
    exec(compile(source, str(ROOT / "bench/made_up.py"), "exec"), outside)  # noqa: S102
    x = torch.ones(2, 3)
    with ImplicitDevice() as seen:
        names["kept"](x), names["Probe"](), outside["broken"](x)
    assert seen.sites == []
    with ImplicitDevice() as seen:
        names["broken"](x)
    assert [str(s) for s in seen.sites] == ["bertcore/analysis/made_up.py:5 zeros"]


def test_the_rule_blames_the_caller_of_the_tokenizers_tensors():
    """``Encoding.tensors()`` makes the inputs on the device its caller names: with none, the caller is blamed."""
    from bertcore.loading import sources
    from bertcore.tokenization.tokenizer import encode

    enc = encode(core.load(sources.PACKAGED_MLM).tokenizer, "A short sentence.")
    source = "def inputs(enc):\n    return enc.tensors()\n\ndef placed(enc):\n    return enc.tensors('cpu')\n"
    names: dict = {}
    exec(compile(source, str(ROOT / "explorer/views/made_up.py"), "exec"), names)  # noqa: S102
    with ImplicitDevice() as seen:
        names["placed"](enc)
        names["inputs"](enc)
    assert [str(s) for s in seen.sites] == ["explorer/views/made_up.py:2 tensor"]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_view_makes_no_tensor_on_an_implicit_device(made, name):  # noqa: F811 - the fixture
    view = every_view()[name]
    args, kwargs = resolve(CALLS[name], made)
    with ImplicitDevice() as seen:
        view.fn(*args, **kwargs)
    assert not seen.sites, f"{name}: tensors made with no device at " + ", ".join(map(str, seen.sites))


@pytest.mark.parametrize("kind", ["sae", "transcoder"])
def test_the_sae_and_transcoder_trainer_make_no_tensor_on_an_implicit_device(tmp_path, kind):
    """A short run of ``python -m bertcore.sae train`` (its evaluation and a resample included) on a tiny model."""
    from bertcore.modeling import heads
    from bertcore.sae.train import Trainer

    from .sae.test_sae_train import options
    from .conftest import save_tiny_bert

    folder = save_tiny_bert(tmp_path / "mlm", heads.BertForPreTraining)
    cfg = options(folder, kind=kind, max_steps=12, eval_every=6, resample_every=96, dead_tokens=48, device="cpu")
    with ImplicitDevice() as seen:
        assert Trainer(cfg, tmp_path / "run").run() == 0
    assert not seen.sites, f"{kind} training: tensors made with no device at " + ", ".join(map(str, seen.sites))
