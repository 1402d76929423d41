"""Every view as code: each page's "Show the code" snippet, run in a fresh offline process,
gives the numbers the page computed (to 1e-6) and draws one of the page's charts (its Plotly JSON, numbers to 1e-6,
Streamlit's theme aside), in the page's default state and in one changed state; the notebook download is a valid
nbformat 4 notebook of the same code.

One fresh subprocess runs every page's two snippets, each in its own namespace. Measured on the quiet 2-core machine
(``/usr/bin/time python -m pytest -q tests/pages/test_as_code.py``, 2026-11-29): 54 s of wall time, 62 s of CPU
(user + sys); under load (average 11-12, niced) it took 131 s of CPU and 358 s of wall time."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shlex
import subprocess
import sys

import numpy as np
import pytest
import torch

from bertcore.sae import io as sae_io
from bertcore.sae.model import TopKSAE
from bertcore.loading.sources import PACKAGED, load
from bertcore.sae import transcoder
from explorer.as_code import RECORD_KEY

from ..circuits.test_attribution import random_transcoders
from ..conftest import ROOT
from .conftest import array, assert_clean, chart_specs, fake_run, page

EVOLUTION_RUN = "20261126-090000-pretrain-code"
TRANSCODER_RUN = "20261129-000000-sae"

# page -> one non-default state (session-state keys of its widgets)
STATES: dict[str, dict[str, object]] = {
    "tokenization": {"tok_text": "Naïve tokenizers cut words: unbelievable!", "tok_pair_on": True,
                     "tok_text_b": "Two sentences.", "tok_syntax": False},
    "embeddings": {"emb_text": "Interest rates rose again.", "emb_pair_on": False},
    "positions": {"pos_start": 10, "pos_end": 40, "pos_base": 500.0},
    "attention": {"att_layer": 4, "att_head": 7, "att_hide": True, "att_words": True,
                  "att_text": "Tokenization splits unbelievable words."},
    "anatomy": {"ana_text": "A different sentence for the pooler."},
    "forward_pass": {"fp_text": "Paris is the [MASK] of France.", "fp_token": 3, "fp_layer": 5, "fp_head": 2},
    "masking": {"msk_rate": 0.5, "msk_seed": 7, "msk_wwm": True, "msk_temp": 2.0, "msk_topk": 20, "msk_k": 3,
                "msk_pair_on": False},
    "word_senses": {"ws_target": "bank", "ws_layer": 2,
                    "ws_sentences": "river | We sat on the bank of the river.\nriver | The boat drifted to the bank.\n"
                                    "money | She paid the check at the bank.\nThe bank raised its rates."},
    "grammar": {"gram_b": "The key to the cabinets are on the table.", "gram_metric": "original"},
    "ablation": {"abl_heads": ["2.3", "4.1"], "abl_layers": [], "abl_mode": "uniform", "abl_pair_on": True},
    "attribution": {"attr_kind": "similarity", "attr_steps": 8, "attr_words": True},
    "overview": {"model_source": PACKAGED},
    "patching": {"pat_clean": "The dogs in the garden [MASK] barking.", "pat_corrupt": "The dog in the garden [MASK] "
                 "barking.", "pat_kinds": ["resid"]},
    "query_key": {"qk_layer": 5, "qk_head": 3, "qk_text": "The cat sat on the mat.\nDogs bark at night."},
    "corpus_search": {"cs_layer": 2, "cs_segments": 20, "cs_k": 5},
    "compare": {"cmp_special": True, "cmp_text": "The bank raised its rates.\nWe sat on the river bank."},
    "findings": {"find_segments": 10},
    "evolution": {"evo_layer": 2, "evo_words": True, "evo_text": "the cats sat on unbelievably small mats ."},
    "projector": {"proj_corpus": "yours", "proj_colour": "label", "proj_layer": 2},
    "features": {"feat_text": "Paris is the capital of France."},
    "next_sentence": {"nsp_b": "The striker scored twice in the second half.", "nsp_head": "head 3", "nsp_words": True},
    # the changed state reads a run's set (random, 32 latents a block: a graph in about a second, where the shipped
    # transcoders' graph of the top fills takes 10-25 s on 2 cores) with no contrast and another threshold
    "circuits": {"cir_set": f"run {TRANSCODER_RUN}", "cir_threshold": 0.5, "cir_contrast": ""},
}

# pages whose code is checked by another test below, or not yet
ELSEWHERE = {"tour": "computes nothing: test_the_tour_says_it_computes_nothing",
             "train": "a command line: test_the_train_snippet_starts_the_same_run"}

# views inside a page (record name -> page, the state that shows the view, one changed state)
VIEWS: dict[str, tuple[str, dict[str, object], dict[str, object]]] = {
    "att_whatif": ("attention", {"att_whatif": True, "att_text": "The keys to the cabinet are on the table.",
                                 "att_whatif_b": "The keys to the cabinet are on the table."},
                   {"att_whatif_b": "The key to the cabinets is on the table."}),
    "nsp_whatif": ("next_sentence", {"nsp_whatif": True}, {"nsp_whatif_b": "The striker scored twice."}),
    "masking_lens": ("masking", {"msk_panel": "Layer by layer: the logit lens"},
                     {"msk_text": "Paris is the [MASK] of France.", "msk_rate": 0.3}),
}

# The snippets run as a user runs them: a fresh interpreter in the repository root, with no network (every socket
# connection raises) and no browser (plotly's show() does nothing); each snippet in its own namespace, and one that
# raises gives its traceback instead of a result. Like the app (st.cache_resource), the process loads each model
# once: ``sources.load`` is memoised (a snippet never changes the model it loads; ~1.5 s a load on 2 busy cores).
RUNNER = r"""
import pickle, socket, sys, traceback
def _offline(*args, **kwargs):
    raise OSError("the snippet test runs offline")
socket.socket.connect = _offline
socket.create_connection = _offline
import plotly.basedatatypes
plotly.basedatatypes.BaseFigure.show = lambda self, *a, **k: None
import functools
from bertcore import sources
sources.load = functools.lru_cache(maxsize=4)(sources.load)  # one load per model, as the app's cache_resource
snippets = pickle.load(open(sys.argv[1], "rb"))
out = {}
for name, code in snippets.items():
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(code, name + ".py", "exec"), namespace)
        fig = namespace.get("fig")
        out[name] = ("result", namespace["result"], None if fig is None else fig.to_json())
    except BaseException:
        out[name] = ("error", traceback.format_exc(), None)
pickle.dump(out, open(sys.argv[2], "wb"))
"""


def run_snippets(snippets: dict[str, str], folder) -> dict[str, tuple[str, object, str | None]]:
    """Each snippet's ``("result", result, fig as Plotly JSON or None)`` or ``("error", traceback, None)``, from one
    fresh offline Python process."""
    src, dst = folder / "snippets.pkl", folder / "results.pkl"
    src.write_bytes(pickle.dumps(snippets))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(src), str(dst)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return pickle.loads(dst.read_bytes())


def assert_same(got, want, where: str = "result") -> None:
    """``got`` (the snippet's) equals ``want`` (the page's): same structure (dataclasses field by field), numbers
    to 1e-6."""
    if dataclasses.is_dataclass(want):
        assert type(got).__name__ == type(want).__name__, (where, got, want)
        for f in dataclasses.fields(want):
            assert_same(getattr(got, f.name), getattr(want, f.name), f"{where}.{f.name}")
    elif isinstance(want, (list, tuple)) and any(isinstance(w, (str, dict, list, tuple)) or w is None
                                                 or dataclasses.is_dataclass(w) for w in want):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (where, got, want)
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif want is None or isinstance(want, str):
        assert got == want, (where, got, want)
    else:
        g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        assert g.shape == w.shape, (where, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6, err_msg=where)


def page_states(name: str) -> dict[str, object]:
    """What page ``name`` recorded in its default state and in :data:`STATES`' changed state (AppTest), or the
    error it raised; a view of :data:`VIEWS` on its page, opened, then changed."""
    file, opened, changed_state = VIEWS.get(name, (name, {}, STATES.get(name)))
    try:
        at = page(file, **opened)
        assert_clean(at)
        default, default_charts = at.session_state[RECORD_KEY][name], chart_specs(at)
        for key, value in changed_state.items():
            at.session_state[key] = value
        at.run()
        assert_clean(at)
        changed = at.session_state[RECORD_KEY][name]
        shown = [c.value.strip() for c in at.code]
    except Exception as exc:  # reported by that page's test, not by every page's
        return {"error": repr(exc)}
    return {"default": default, "changed": changed, "shown": shown,
            "charts": {"default": default_charts, "changed": chart_specs(at)}}


def json_difference(got, want, where: str = "fig") -> str | None:
    """Where two Plotly JSON trees differ (None when they are the same): keys, strings and structure exactly,
    numbers (lists or plotly's typed arrays) to 1e-6."""
    if isinstance(want, dict) and "bdata" in want or isinstance(got, dict) and "bdata" in got:
        try:
            g, w = array(got), array(want)
        except (TypeError, ValueError):
            return f"{where}: {str(got)[:80]} against {str(want)[:80]}"
        if g.shape != w.shape or not np.allclose(g, w, rtol=0, atol=1e-6, equal_nan=True):
            return f"{where}: arrays differ"
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            return f"{where}: keys {keys} against {sorted(want)}"
        return next((d for k in want if (d := json_difference(got[k], want[k], f"{where}.{k}"))), None)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: {len(got) if isinstance(got, list) else got!r} items against {len(want)}"
        if want and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in want + got):
            close = np.allclose(np.asarray(got, float), np.asarray(want, float), rtol=0, atol=1e-6, equal_nan=True)
            return None if close else f"{where}: numbers differ"
        return next((d for i, (g, w) in enumerate(zip(got, want)) if (d := json_difference(g, w, f"{where}[{i}]"))),
                    None)
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return None if abs(got - want) <= 1e-6 else f"{where}: {got!r} against {want!r}"
    return None if got == want else f"{where}: {str(got)[:80]!r} against {str(want)[:80]!r}"


def figure_difference(fig_json: str | None, page_charts: list[dict]) -> str | None:
    """None when the snippet's ``fig`` is one of the page's charts (JSON equal, see :func:`json_difference`), else
    why not (against each chart of the page)."""
    if not page_charts:
        return None if fig_json is None else "the snippet draws a figure the page does not"
    if fig_json is None:
        return f"the page draws {len(page_charts)} chart(s), the snippet sets no fig"
    fig = json.loads(fig_json)
    fig.get("layout", {}).pop("template", None)  # the look: Streamlit draws every chart in its own theme
    found = [json_difference(fig, {**chart, "layout": {k: v for k, v in chart.get("layout", {}).items()
                                                       if k != "template"}}) for chart in page_charts]
    return None if None in found else "; ".join(f"chart {i}: {d}" for i, d in enumerate(found))


@pytest.fixture(scope="module")
def ran(request, tmp_path_factory):
    """The two states of every page whose test is selected (``-k attention`` runs one page), and every snippet's
    result from ONE fresh offline process (importing torch and transformers is most of a snippet's time on 2
    cores)."""
    selected = [item.callspec.params["name"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_the_snippet_reproduces_the_page"]
    root = tmp_path_factory.mktemp("runs")
    fake_run(root, EVOLUTION_RUN)  # a run with three tiny checkpoints for the Evolution page
    torch.manual_seed(0)  # and a random TopK SAE on layer 2 of the shipped model's width for the Features page
    sae_io.save(TopKSAE(384, 64, 8), root / EVOLUTION_RUN / "sae" / "layer-2", layer=2)
    for block, tc in random_transcoders(load(PACKAGED).config, d_sae=32).items():  # a set for the Circuits page
        transcoder.save(tc, root / TRANSCODER_RUN / "sae" / f"layer-{block + 1}", block)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERT_EXPLORER_RUNS", str(root))
        pages = {name: page_states(name) for name in selected}
    snippets = {f"{name}.{state}": rec[state].code for name, rec in pages.items() if "error" not in rec
                for state in ("default", "changed")}
    return pages, run_snippets(snippets, tmp_path_factory.mktemp("as_code"))


# pages whose snippet draws another chart than the page shows (the figure test fails for them until they draw alike)
DRAWS_OTHER: dict[str, str] = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=DRAWS_OTHER[n], strict=True))
                                  if n in DRAWS_OTHER else n for n in [*STATES, *VIEWS]])
def test_the_snippet_reproduces_the_page(name, ran):
    pages, results = ran
    rec = pages[name]
    assert "error" not in rec, rec.get("error")
    assert rec["changed"].code != rec["default"].code  # the changed inputs are in the code
    assert rec["changed"].code.strip() in rec["shown"]  # the expander shows what is run here
    for state in ("default", "changed"):
        kind, got, fig = results[f"{name}.{state}"]
        assert kind == "result", got
        assert_same(got, rec[state].result, f"{name}.{state}")
        assert (d := figure_difference(fig, rec["charts"][state])) is None, f"{name}.{state}: {d}"


def test_the_tour_says_it_computes_nothing():
    at = page("tour")
    assert_clean(at)
    assert at.session_state[RECORD_KEY]["tour"].code is None
    assert any("computes nothing" in i.value for i in at.info)


def test_the_train_snippet_starts_the_same_run(runs_root, monkeypatch):
    """The Train form's code: its command line parses (bertcore.training.cli's own parser) into the TrainConfig that its
    Python call passes to runs.launch, for the default recipe and for a custom pretraining."""
    from bertcore import runs
    from bertcore.training import cli as cli
    from bertcore.runs.config import TrainConfig
    from explorer.as_code.training import CLI_PREFIX

    at = page("train")
    for state in ({}, {"train_recipe": "custom"}):
        for key, value in state.items():
            at.session_state[key] = value
        at.run()
        assert_clean(at)
        rec = at.session_state[RECORD_KEY]["train"]
        line = next(s for s in rec.code.splitlines() if s.startswith(CLI_PREFIX + "python -m bertcore.training"))
        argv = shlex.split(line[len(CLI_PREFIX):])
        assert argv == rec.result["argv"]
        launched = {}
        monkeypatch.setattr(runs, "launch", lambda task, args, device: launched.update(task=task, args=args,
                                                                                       device=device) or "runs/x")
        exec(compile(rec.code, "train.py", "exec"), {"__name__": "__main__"})  # the Python call, launch recorded
        ns = cli.parse_args(argv[3:])
        assert ns.device == launched["device"]
        want = TrainConfig.create(launched["task"], **launched["args"], device=launched["device"])
        assert cli.to_config(ns).to_dict() == want.to_dict()


def test_every_page_has_its_code():
    """A page added without "Show the code" (or without a state here) fails."""
    folder = ROOT / "explorer" / "app_pages"
    pages = {f.stem for f in folder.glob("*.py")} - {"__init__"}
    assert pages - set(STATES) - set(ELSEWHERE) == set()
    panels = ROOT / "explorer" / "panels"

    def code_of(p: str) -> str:  # the page and its panels module
        return (folder / f"{p}.py").read_text() + ((panels / f"{p}.py").read_text() if (panels / f"{p}.py").is_file()
                                                    else "")

    assert [p for p in sorted(pages - {"train"}) if "as_code." not in code_of(p)] == []
    assert "as_code.run_expander" in (ROOT / "explorer" / "train" / "form.py").read_text()
