"""One numbering in every public function of bertcore: a parameter that names a block (layer) of the encoder takes
``0..L-1``, a head ``0..heads-1``, a documented hidden_states index ``0..L`` (0 = embeddings); one past the last (and
-1) raises ``ValueError`` naming the range.

The test walks bertcore's public functions (and the public methods and constructors of its classes; not
``bertcore.modeling``, ``training``, ``train``, ``data``, ``runs``) for parameters named :data:`PARAMS`. Every one
found must have an entry in :data:`TABLE`: the calls that check it (at the last valid index, expecting success;
one past it and at -1, expecting ``ValueError``) or an :class:`Exempt` with the reason it is not an index. A new
function with such a parameter and no entry fails :func:`test_every_public_layer_or_head_parameter_has_an_entry`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import bertcore

from .conftest import save_tiny_bert

PARAMS = ("layer", "head", "start_layer", "layers", "heads")
SKIP = ("bertcore.modeling", "bertcore.training", "bertcore.training.cli", "bertcore.data", "bertcore.runs",
        "bertcore.sae.__main__")

BLOCK, HEAD, HIDDEN = "block (0..L-1)", "head (0..heads-1)", "hidden_states index (0..L)"


@dataclass(frozen=True)
class Check:
    """``call(ctx, value)`` calls the function with ``param`` = ``value`` (everything else valid)."""

    param: str
    kind: str
    call: Callable
    negative: bool = True  #: -1 must raise too (False: negative indices are documented, Python-style)
    names_range: bool = True  #: the message names the last valid index


@dataclass(frozen=True)
class Exempt:
    """A parameter of such a name that is not a layer or head index."""

    param: str
    reason: str


def _skipped(name: str) -> bool:
    return any(name == s or name.startswith(s + ".") for s in SKIP)


def public_callables() -> dict[str, Callable]:
    """``"module:qualname" -> callable`` of every public function, public method and constructor (a class's own
    ``__init__``; a dataclass's generated one holds results, not arguments) defined in bertcore's modules."""
    found = {}
    for info in pkgutil.walk_packages(bertcore.__path__, "bertcore."):
        if _skipped(info.name):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                found[f"{info.name}:{name}"] = obj
            elif inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    member = getattr(member, "__func__", member)  # staticmethod / classmethod
                    if not inspect.isfunction(member):
                        continue
                    if attr == "__init__" and not is_dataclass(obj):
                        found[f"{info.name}:{name}"] = member
                    elif not attr.startswith("_"):
                        found[f"{info.name}:{name}.{attr}"] = member
    return found


def indexed_params(fn: Callable) -> set[str]:
    return {p for p in inspect.signature(fn).parameters if p in PARAMS}


# ----------------------------------------------------------------------------- the inputs
@dataclass
class Ctx:
    lm: object  # a LoadedModel: a tiny BertForPreTraining (2 blocks, 4 heads, hidden 32) with the packaged vocab
    tmp: Path

    def __post_init__(self) -> None:
        from bertcore.tokenization.tokenizer import encode

        self.model, self.encoder, self.tok = self.lm.model, self.lm.encoder, self.lm.tokenizer
        self.L, self.H = self.lm.config.num_hidden_layers, self.lm.config.num_attention_heads
        self.enc = encode(self.tok, "the cat sat on the mat.")
        self.inputs = self.enc.tensors()
        with torch.no_grad():
            out = self.encoder(**self.inputs, output_hidden_states=True)
        self.hidden = torch.stack([h[0] for h in out.hidden_states]).numpy()  # (L+1, T, H)

    def sae(self):
        from bertcore.sae.model import TopKSAE

        return TopKSAE(self.lm.config.hidden_size, 64, 4, seed=0)

    def state(self, layer: int) -> np.ndarray:
        """A block's input, ``hidden_states[layer]`` (any one for an out-of-range block: the block is checked)."""
        return self.hidden[layer if 0 <= layer < self.L else 0]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    from bertcore.loading import sources
    from bertcore.modeling.heads import BertForPreTraining

    tmp = tmp_path_factory.mktemp("numbering")
    folder = save_tiny_bert(tmp / "mlm", BertForPreTraining)
    return Ctx(sources.load(sources.ModelSource("local", str(folder), "tiny")), tmp)


def _recording(c: Ctx) -> dict:
    """Every site :func:`bertcore.readouts.forward_pass.trace` records, on the context's sentence."""
    from bertcore.readouts.forward_pass import step_sites
    from bertcore.modeling.interventions import Interventions

    iv = Interventions(record=step_sites(c.lm.config))
    with torch.no_grad():
        c.model(**c.inputs, interventions=iv)
    return iv.recorded


def _replacement(c: Ctx):
    """The local replacement model of the context's sentence, with random transcoders (built once)."""
    if not hasattr(c, "_rm"):
        from bertcore.circuits.replacement import Replacement
        from bertcore.sae.transcoder import Transcoder

        h = c.lm.config.hidden_size
        tcs = {layer: Transcoder(h, h, 16, 2, seed=layer).eval() for layer in range(c.L)}
        c._rm = Replacement(c.model, tcs, c.inputs)
    return c._rm


def _init_from(c: Ctx, layer: int):
    """:func:`bertcore.sae.start.start_from` on a folder holding an SAE of the last block only."""
    from bertcore.sae import io as sae_io
    from bertcore.sae.config import SAETrainConfig
    from bertcore.sae.start import start_from

    folder = c.tmp / "init"
    if not (folder / sae_io.folder_name(c.L - 1)).is_dir():
        sae_io.save(c.sae(), folder / sae_io.folder_name(c.L - 1), c.L - 1, num_layers=c.L)
    return start_from(folder, layer, c.lm.config.hidden_size, SAETrainConfig(d_sae=64, k=4))


def _labelled(c: Ctx):
    from bertcore.sae import features
    from bertcore.tokenization.spacy_pipeline import SyntaxUnavailable

    try:
        return features.labelled_text(c.tok, ["The cat sat on the mat.", "A dog ran to the door."])
    except SyntaxUnavailable as exc:
        pytest.skip(f"spaCy is not installed: {exc}")


def _points(c: Ctx):
    from bertcore.analysis.representations import projector as P

    return P.collect(c.encoder, c.tok, ["the cat sat on the mat.", "a dog ran to the door.", "birds sing."])


def _spliced(c: Ctx):
    from bertcore.sae.metrics import Spliced

    blocks = range(c.L)
    return Spliced(4.0, {b: 0.1 for b in blocks}, {b: 2.0 for b in blocks}, {b: 1.0 for b in blocks}, 10)


def _imp(path: str):
    return importlib.import_module(path)


A = "bertcore.analysis."
FP = "bertcore.readouts.forward_pass:"
KIND = "the model's head kind ('base', 'mlm', 'pretraining', 'classification', ...), not an index"
KEY = "only hashed into a cache key or file name; the index is checked where it is used"

#: every public function with a parameter of :data:`PARAMS`, one entry each
TABLE: dict[str, list[Check | Exempt]] = {
    # --- attention
    A + "attention.ablation:make_head_mask": [
        Check("heads", BLOCK, lambda c, v: _imp(A + "attention.ablation").make_head_mask(c.L, c.H, heads=[(v, 0)])),
        Check("heads", HEAD, lambda c, v: _imp(A + "attention.ablation").make_head_mask(c.L, c.H, heads=[(0, v)])),
        Check("layers", BLOCK, lambda c, v: _imp(A + "attention.ablation").make_head_mask(c.L, c.H, layers=[v]))],
    A + "attention.ablation:readout": [Exempt("head", KIND)],
    A + "attention.decompose:LayerMath": [Exempt("layer", "the BertLayer module whose weights it copies")],
    A + "attention.decompose:layer_decomposition": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.decompose").layer_decomposition(
            c.model, c.inputs, v, "attention"))],
    A + "attention.decompose:record_block": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.decompose").record_block(
            c.model, torch.tensor(c.state(v)), v, ["attn.hook_v"]))],
    A + "attention.decompx:hidden_decomposition": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.decompx").hidden_decomposition(c.model, c.inputs, v),
              negative=False)],  # -1 (the default) is the last block, as documented
    A + "attention.flows:value_norms": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.flows").value_norms(c.model, c.state(v), v))],
    A + "attention.neurons:neuron_view": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.neurons").neuron_view(c.encoder, c.state(v), v, 0, 1)),
        Check("head", HEAD, lambda c, v: _imp(A + "attention.neurons").neuron_view(c.encoder, c.state(0), 0, v, 1))],
    A + "attention.query_key:query_keys": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "attention.query_key").query_keys(
            c.encoder, c.tok, ["the cat sat."], v, 0)),
        Check("head", HEAD, lambda c, v: _imp(A + "attention.query_key").query_keys(
            c.encoder, c.tok, ["the cat sat."], 0, v))],
    # --- causal
    A + "causal.patching:site_name": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "causal.patching").site_name(c.model, "resid", v)),
        Check("layer", BLOCK, lambda c, v: _imp(A + "causal.patching").site_name(c.model, "attn", v))],
    A + "causal.patching:patch": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "causal.patching").patch(c.model, "resid", v, torch.zeros(1))),
        Check("layer", BLOCK, lambda c, v: _imp(A + "causal.patching").patch(c.model, "mlp", v, torch.zeros(1))),
        Check("head", HEAD, lambda c, v: _imp(A + "causal.patching").patch(c.model, "head", 0, torch.zeros(1),
                                                                             head=v))],
    # --- representations
    A + "representations.corpus_search:build_index": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "representations.corpus_search").build_index(
            c.encoder, c.tok, ["the cat sat on the mat."], v))],
    A + "representations.corpus_search:index_path": [Exempt("layer", KEY)],
    A + "representations.logit_lens:TunedLens.translate": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "representations.logit_lens").TunedLens(c.L, 32).translate(
            v, torch.zeros(32)))],
    A + "representations.projector:collect": [
        Check("layers", HIDDEN, lambda c, v: _imp(A + "representations.projector").collect(
            c.encoder, c.tok, ["the cat sat on the mat."], layers=[v]))],
    A + "representations.projector:project": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "representations.projector").project(_points(c), v))],
    A + "representations.projector:cache_key": [Exempt("layer", KEY)],
    A + "representations.syntax:predicted_word": [
        Check("layer", BLOCK, lambda c, v: _imp(A + "representations.syntax").predicted_word(
            np.random.default_rng(0).random((c.L, c.H, 3, 3)), [0, 1, 2], v, 0, 0)),
        Check("head", HEAD, lambda c, v: _imp(A + "representations.syntax").predicted_word(
            np.random.default_rng(0).random((c.L, c.H, 3, 3)), [0, 1, 2], 0, v, 0))],
    # --- the app's views
    A + "projector_view:view": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "projector_view").view(
            c.lm, "own", 12, v, colour="word",
            texts=_imp(A + "projector_view").own_corpus("the cat sat.\na dog ran.")))],
    A + "shipped:corpus_search": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "shipped").corpus_search(c.lm, "the cat sat.", 1, v, 3, 2))],
    A + "shipped:projector": [Check("layer", HIDDEN, lambda c, v: _imp(A + "shipped").projector(c.lm, layer=v))],
    A + "shipped:corpus_neighbours": [
        Check("layer", HIDDEN, lambda c, v: _imp(A + "shipped").corpus_neighbours(
            c.lm, ["the cat sat.", "a dog ran."], "the cat sat.", 1, v, 3))],
    # --- the forward pass, step by step
    FP + "layer_steps": [Check("layer", BLOCK, lambda c, v: _imp(FP[:-1]).layer_steps(_recording(c), v, c.lm.config))],
    FP + "trace": [
        Check("layer", BLOCK, lambda c, v: _imp(FP[:-1]).trace(c.model, c.inputs["input_ids"], 1, v, 0)),
        Check("head", HEAD, lambda c, v: _imp(FP[:-1]).trace(c.model, c.inputs["input_ids"], 1, 0, v))],
    # --- head kinds, not indices
    "bertcore.readouts.anatomy:build_on_meta": [Exempt("head", KIND)],
    "bertcore.readouts.anatomy:count_from_shapes": [Exempt("head", KIND)],
    "bertcore.readouts.anatomy:named_tensor_count": [Exempt("head", KIND)],
    "bertcore.readouts.anatomy:transformers_count": [Exempt("head", KIND)],
    "bertcore.loading.hf_export:usage_note": [Exempt("head", KIND)],
    "bertcore.loading.sources:load": [Exempt("head", KIND)],
    # --- sparse autoencoders: an SAE's layer is the block whose output it reads
    "bertcore.sae.explore:text_features": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").text_features(
            c.model, c.tok, c.sae(), v, "the cat sat."))],
    "bertcore.sae.explore:search": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").search(c.model, c.tok, c.sae(), v, "cat"))],
    "bertcore.sae.explore:steered_fill_mask": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").steered_fill_mask(
            c.model, c.tok, "the cat [MASK] on the mat.", v, lambda h: h))],
    "bertcore.sae.explore:activations": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").activations(c.model, c.inputs, c.sae(), v))],
    "bertcore.sae.explore:logit_effect": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").logit_effect(
            c.model, c.tok, c.sae(), v, 0, c.hidden[-1].mean(0), 1.0))],
    "bertcore.sae.explore:context_activations": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").context_activations(
            c.model, c.tok, c.sae(), v, [np.array(c.enc.input_ids)], 0))],
    "bertcore.sae.features:collect": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.features").collect(
            c.model, c.tok, c.sae(), v, _labelled(c), n_random=8))],
    "bertcore.sae.io:label": [Exempt("layer", "names a block for files and people (block + 1), no model at hand")],
    "bertcore.sae.io:folder_name": [Exempt("layer", "names a block's folder (layer-<block + 1>), no model at hand")],
    "bertcore.sae.io:site": [Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.io").site(c.lm.config, v))],
    "bertcore.sae.io:hook_name": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.io").hook_name(v, num_layers=c.L))],
    "bertcore.sae.io:save": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.io").save(c.sae(), c.tmp / "saved", v, num_layers=c.L))],
    "bertcore.sae.metrics:Spliced.share_of_zero": [Check("layer", BLOCK, lambda c, v: _spliced(c).share_of_zero(v))],
    "bertcore.sae.report:feature_params": [Exempt("layer", KEY)],
    "bertcore.sae.report:stored_index": [Exempt("layer", KEY)],
    "bertcore.sae.report:label_texts": [Exempt("layer", KEY)],
    "bertcore.sae.report:stored_index_and_params": [Exempt("layer", KEY)],
    "bertcore.sae.explore:logit_effects": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.explore").logit_effects(
            c.model, c.sae(), v, [0], c.hidden[-1].mean(0), [1.0]))],
    "bertcore.sae.labels:feature_labels": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.labels").feature_labels(
            c.model, c.tok, c.sae(), v, _imp("bertcore.sae.features").collect(
                c.model, c.tok, c.sae(), 0, _labelled(c), n_random=8)))],
    "bertcore.sae.labels:score": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.labels").score(
            c.model, c.tok, c.sae(), v, [], _labelled(c), np.ones(64)))],
    "bertcore.circuits.export:cantor": [
        Exempt("layer", "a node's block as the viewer's Cantor pair encodes it in the file, no model at hand")],
    "bertcore.sae.stream:hidden_states": [
        Check("layers", BLOCK, lambda c, v: _imp("bertcore.sae.stream").hidden_states(c.model, c.inputs, [v]))],
    "bertcore.sae.stream:ActivationStream": [
        Check("layers", BLOCK, lambda c, v: _imp("bertcore.sae.stream").ActivationStream(
            c.model, c.tok, [np.array(c.enc.input_ids)], [v]))],
    "bertcore.circuits.replacement:Replacement.pre_activations": [
        Check("layer", BLOCK, lambda c, v: _replacement(c).pre_activations(_replacement(c).run(1)[0], v, [0], [0]))],
    "bertcore.sae.stream:feed_forward_pairs": [
        Check("layers", BLOCK, lambda c, v: _imp("bertcore.sae.stream").feed_forward_pairs(c.model, c.inputs, [v]))],
    "bertcore.sae.transcoder:sites": [
        Check("layer", BLOCK, lambda c, v: _imp("bertcore.sae.transcoder").sites(c.lm.config, v))],
    "bertcore.sae.transcoder:hook_names": [Exempt("layer", "names block l's modules for the file; no model at hand "
                                                           "(sites() checks the block against the model)")],
    "bertcore.sae.transcoder:save": [Exempt("layer", "writes the block's names (hook_names); no model at hand")],
    "bertcore.sae.start:check_layers": [
        Check("layers", BLOCK, lambda c, v: _imp("bertcore.sae.start").check_layers([v], c.L))],
    "bertcore.sae.start:start_from": [  # one past the last block has no folder: the error names the folder
        Check("layer", BLOCK, _init_from, names_range=False)],
}


def test_every_public_layer_or_head_parameter_has_an_entry():
    """A public function with a parameter named like a layer or head needs an entry here, for each such parameter
    (so that a new one cannot slip through unchecked); an entry for a function that no longer exists is stale."""
    found = {name: indexed_params(fn) for name, fn in public_callables().items()}
    found = {name: params for name, params in found.items() if params}
    missing = [f"{name} ({', '.join(sorted(params))})" for name, params in sorted(found.items())
               if name not in TABLE]
    assert not missing, "no entry in tests/test_numbering.py TABLE for: " + "; ".join(missing)
    for name, entries in TABLE.items():
        assert name in found, f"TABLE entry {name} names no public function with such a parameter"
        covered = {e.param for e in entries}
        assert covered == found[name], f"{name}: checked {sorted(covered)}, has {sorted(found[name])}"


CASES = [pytest.param(name, i, id=f"{name.split('.')[-1]}-{e.param}-{e.kind.split()[0]}")
         for name, entries in TABLE.items() for i, e in enumerate(entries) if isinstance(e, Check)]


def last_valid(c: Ctx, kind: str) -> int:
    return {BLOCK: c.L - 1, HEAD: c.H - 1, HIDDEN: c.L}[kind]


@pytest.mark.parametrize("name, i", CASES)
def test_the_last_index_works_and_one_past_it_is_a_value_error(ctx, name, i):
    check = TABLE[name][i]
    last = last_valid(ctx, check.kind)
    check.call(ctx, last)  # the last valid index: no error
    bad = [last + 1] + ([-1] if check.negative else [])
    for value in bad:
        with pytest.raises(ValueError) as info:
            check.call(ctx, value)
        if check.names_range:
            assert str(last) in str(info.value), f"{name}({check.param}={value}): {info.value}"
