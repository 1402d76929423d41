"""Two sessions, one model: no analysis may change what another thread computes (docs/CONTRACTS.md, "What a page
may do to a cached model").

Streamlit runs each browser session's script in its own thread and every session shares the models of
``st.cache_resource``. Each test runs one analysis in a loop in thread A while thread B runs plain fill-mask and
attention forwards on the *same model object*, and compares both with their single-threaded results (to 1e-5 of each
array's largest value), with B's sentence of the same length as A's input, where leaked activations fit and change
numbers silently (the views, which run these analyses, are checked beside a sentence of another length, where they
raise, in test_views.py). Before the analyses took their interventions as an argument of the forward pass, A's hooks ran
inside B's forwards: B raised (another length) or got A's activations (the same length), and A read B's.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from bertcore import encode
from bertcore.analysis.attention import activations, ablation, decompose, decompx, flows, mixing, neurons, query_key
from bertcore.analysis.attention.value_zeroing import every_layer
from bertcore.analysis.causal import attribution, faithfulness, patching
from bertcore.analysis.grammar import scoring
from bertcore.analysis.representations import corpus_search, edits, logit_lens, projector, whatif
from bertcore.readouts.forward_pass import trace

CLEAN = "The keys to the cabinet [MASK] on the table."
CORRUPT = "The key to the cabinet [MASK] on the table."
SAME_LENGTH = "A dog in the garden [MASK] at the cat."  # as many tokens as CLEAN
OTHER_LENGTH = "Paris is the [MASK] of France, and the river through it is the Seine."
MIN_SECONDS = 0.5  # thread B keeps running at least this long, and at least as long as A


@pytest.fixture(scope="module")
def mlm():
    """The shipped MiniLM-MLM, one object for both threads, as ``st.cache_resource`` shares it."""
    from bertcore.loading import sources

    return sources.load(sources.PACKAGED_MLM)


def _plain(model, tokenizer, text: str) -> list[np.ndarray]:
    """What a plain page computes: the MLM logits (the Masking page) and every attention (the Attention page)."""
    inputs = encode(tokenizer, text).tensors()
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    return [out.prediction_logits.numpy().copy(), *(a.numpy().copy() for a in out.attentions)]


def _as_arrays(value) -> list[np.ndarray]:
    """Every number an analysis returned, flattened into a list of arrays (dataclasses, dicts, tuples, tensors)."""
    if isinstance(value, torch.Tensor):
        return [value.detach().double().numpy().copy()]
    if isinstance(value, np.ndarray):
        return [value.astype(np.float64) if value.dtype.kind in "fiub" else value]
    if isinstance(value, (int, float, np.floating, np.integer)):
        return [np.asarray(value, dtype=np.float64)]
    if isinstance(value, dict):
        return [a for k in sorted(value, key=repr) for a in _as_arrays(value[k])]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _as_arrays(v)]
    if hasattr(value, "__dataclass_fields__"):
        return [a for name in value.__dataclass_fields__ for a in _as_arrays(getattr(value, name))]
    return []


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} arrays instead of {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"array {i}: shape {g.shape} instead of {w.shape}"
        # float32 to 1e-5 of the array's largest value: two threads computing at once may split a reduction over
        # torch's threads otherwise (5.7e-6 seen on the neuron view's keys, of largest value 3.7); a leaked
        # activation is off by far more
        if g.dtype.kind == "f":
            scale = max(1.0, float(np.nanmax(np.abs(w)))) if w.size and not np.isnan(w).all() else 1.0
            if not np.allclose(g, w, rtol=0, atol=1e-5 * scale, equal_nan=True):
                return f"array {i}: max |diff| {np.nanmax(np.abs(g - w)):.3g} (largest value {scale:.3g})"
        if g.dtype.kind != "f" and not np.array_equal(g, w):
            return f"array {i} differs"
    return None


def _state(model) -> tuple:
    """What a session may not change on a shared model: its mode, hooks, flags and gradients."""
    return (model.training, [m.training for m in model.modules()],
            [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()],
            [p.requires_grad for p in model.parameters()], [p.grad is None for p in model.parameters()])


def run_beside_plain_forwards(model, tokenizer, analysis, other_text: str, min_rounds: int = 3,
                              min_seconds: float = MIN_SECONDS) -> None:
    """Thread A: ``analysis()`` in a loop (at least ``min_rounds`` times and ``min_seconds``); thread B: plain
    forwards on ``other_text``; both checked against their single-threaded results. Fails with every difference and
    exception seen."""
    state = _state(model)
    want_a = _as_arrays(analysis())
    want_b = _plain(model, tokenizer, other_text)
    assert want_a, "the analysis returned no numbers to compare"
    problems: list[str] = []
    a_done = threading.Event()
    start = threading.Barrier(2)
    rounds = {"a": 0, "b": 0}

    def thread_a():
        start.wait()
        t0 = time.perf_counter()
        try:
            while rounds["a"] < min_rounds or time.perf_counter() - t0 < min_seconds:
                try:
                    if err := _close(_as_arrays(analysis()), want_a):
                        problems.append(f"analysis, round {rounds['a']}: {err}")
                except Exception as exc:  # noqa: BLE001 - every failure is reported
                    problems.append(f"analysis, round {rounds['a']}: {type(exc).__name__}: {exc}")
                rounds["a"] += 1
        finally:
            a_done.set()

    def thread_b():
        start.wait()
        while not a_done.is_set() or rounds["b"] < min_rounds:
            try:
                if err := _close(_plain(model, tokenizer, other_text), want_b):
                    problems.append(f"plain forward, round {rounds['b']}: {err}")
                if _state(model) != state:  # seen from the other session while the analysis runs
                    problems.append(f"plain forward, round {rounds['b']}: the model's mode, hooks, flags or "
                                    "gradients changed")
            except Exception as exc:  # noqa: BLE001
                problems.append(f"plain forward, round {rounds['b']}: {type(exc).__name__}: {exc}")
            rounds["b"] += 1

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, f"{len(problems)} problems in {rounds}: " + "; ".join(problems[:5])
    assert _state(model) == state, "the analysis changed the shared model's mode, hooks, flags or gradients"


def _analyses(mlm):
    """name -> a function of no argument that runs one analysis on the shared model and returns its numbers."""
    model, tok = mlm.model, mlm.tokenizer
    clean, corrupt = encode(tok, CLEAN), encode(tok, CORRUPT)
    mask = clean.tokens.index("[MASK]")
    are, is_ = tok.convert_tokens_to_ids(["are", "is"])
    metric = patching.logit_diff(mask, are, is_)
    cache = patching.record(model, clean.tensors())[1]
    head_mask = ablation.make_head_mask(model.config.num_hidden_layers, model.config.num_attention_heads, [(0, 1)])
    encodings = [encode(tok, s).tensors() for s in (CLEAN, SAME_LENGTH, OTHER_LENGTH)]
    index_texts = ["The cat sat on the mat.", "Dogs bark at night in the old town."]
    from bertcore.sae import explore as sae_explore
    from bertcore.sae.model import TopKSAE

    sae = TopKSAE(model.config.hidden_size, 256, 8, seed=0)  # the Features page's reads and steering edits
    hidden = activations.run(model.base_model, tok, CLEAN).hidden_states  # the Attention page's cached forward

    return {
        "patching.record": lambda: patching.record(model, clean.tensors())[1],
        "patching.patch": lambda: patching.measure(model, corrupt.tensors(), metric,
                                                   patching.patch(model, "mlp", 2, cache[("mlp", 2)])),
        "patching.scan": lambda: patching.scan(model, clean.tensors(), corrupt.tensors(), metric,
                                               kinds=("resid", "head")).effects,
        "query_key": lambda: query_key.query_keys(model, tok, [CLEAN, OTHER_LENGTH], 2, 3),
        "ablation": lambda: ablation.readout(model, mlm.head, tok, clean, head_mask),
        "logit_lens": lambda: logit_lens.logit_lens(model, clean.tensors()["input_ids"]).top_probs,
        "tuned_lens": lambda: logit_lens.train_tuned_lens(model, encodings, steps=2, positions_per_step=16)
        .state_dict(),
        "attribution": lambda: attribution.explain_fill_mask(model, tok, CLEAN, n_steps=4).scores,
        "forward_pass": lambda: trace(model, clean.tensors()["input_ids"], mask, 2, 1),
        "grammar_scoring": lambda: scoring.pseudo_log_likelihood(model, tok, "The keys are on the table."),
        "corpus_search": lambda: corpus_search.build_index(model.base_model, tok, index_texts, 3),
        "whatif": lambda: whatif.compare(model, tok, CLEAN, CORRUPT),
        "projector.collect": lambda: projector.collect(model.base_model, tok, index_texts + [CLEAN], "token",
                                                       batch_size=2).vectors,
        "value_zeroing.every_layer": lambda: every_layer(model, clean.tensors(), mask, are),
        "faithfulness": lambda: faithfulness.measure(model, clean.tensors(), mask, are, tok.mask_token_id,
                                                     tok.pad_token_id, np.array(clean.special_tokens_mask, bool),
                                                     ig_steps=4).correlations,
        "edits.model": lambda: np.frombuffer("|".join(e.label for e in edits.model_edits(model, tok, CLEAN, 1))
                                             .encode(), dtype=np.uint8),  # the words and their rounded shares
        "sae.text_features": lambda: sae_explore.text_features(model, tok, sae, 2, CLEAN).z,
        "sae.steered_fill_mask": lambda: np.array([p.probs for p in sae_explore.steered_fill_mask(
            model, tok, CLEAN, 2, sae_explore.steering_edit(sae, 5, "add", 8.0)).steered]),
        "neurons.neuron_view": lambda: neurons.neuron_view(model.base_model, hidden[2], 2, 3, mask),
        "flows.value_norms": lambda: flows.value_norms(model, hidden[2], 2),
        "mixing.alti": lambda: mixing.mixing(model, clean.tensors(), "alti"),
        "mixing.value_zeroing": lambda: mixing.mixing(model, clean.tensors(), "value_zeroing"),
        "decompx.fill_mask": lambda: decompx.fill_mask(model, clean.tensors(), mask, [are, is_]).contributions,
        "decompose.layer_decomposition": lambda: decompose.layer_decomposition(model, clean.tensors(), 2, "layer"),
    }


ANALYSES = ["patching.record", "patching.patch", "patching.scan", "query_key", "ablation", "logit_lens",
            "tuned_lens", "attribution", "forward_pass", "grammar_scoring", "corpus_search", "whatif", "edits.model",
            "value_zeroing.every_layer", "faithfulness", "projector.collect", "sae.text_features",
            "sae.steered_fill_mask", "neurons.neuron_view", "flows.value_norms", "mixing.alti", "mixing.value_zeroing",
            "decompx.fill_mask", "decompose.layer_decomposition"]


@pytest.mark.parametrize("name", ANALYSES)
def test_an_analysis_beside_plain_forwards_on_one_model(mlm, name):
    assert len(encode(mlm.tokenizer, SAME_LENGTH)) == len(encode(mlm.tokenizer, CLEAN))
    run_beside_plain_forwards(mlm.model, mlm.tokenizer, _analyses(mlm)[name], SAME_LENGTH)


def test_the_suite_covers_every_analysis(mlm):
    assert sorted(_analyses(mlm)) == sorted(ANALYSES)


def test_the_check_sees_a_hook_left_on_the_shared_model(mlm):
    """The harness itself: an analysis that hooks the shared model (as patching did) is caught."""
    model, tok = mlm.model, mlm.tokenizer
    layer = model.base_model.encoder.layer[1].output.dense

    def hooked():
        handle = layer.register_forward_hook(lambda m, a, out: out * 0.5)
        try:
            with torch.no_grad():
                time.sleep(0.01)  # a slow analysis: the other thread's forwards pass through the hook
                return model(**encode(tok, CLEAN).tensors()).prediction_logits
        finally:
            handle.remove()

    with pytest.raises(AssertionError, match="problems"):
        run_beside_plain_forwards(model, tok, hooked, OTHER_LENGTH, min_rounds=20)
