"""Steering features in the real model, and what the attribution graph predicts the steering does (Ameisen et al.
2025, "Circuit tracing", section 5, "validating with interventions"; circuit-tracer's
``ReplacementModel.feature_intervention``).

**In the real model** (:func:`steer`). A node is a transcoder feature ``(block, position, latent)``; a supernode a
list of them. Steering by a factor ``f`` (-1: the feature's contribution turned negative; 2: doubled; 0: removed;
1: nothing) adds, for each feature, ``(f - 1) a W_dec[latent]`` (in the model's units, ``W_dec / c_out``) to block
``block``'s feed-forward output ``blocks.{block}.hook_mlp_out`` at ``position``, where ``a`` is the transcoder's
activation on the clean run's feed-forward input there. Everything downstream recomputes: the real feed-forward
blocks (not the transcoders), the LayerNorms, the MLM head; the attention patterns are recomputed too, or, with
``freeze_attention`` (the default, as circuit-tracer's ``feature_intervention``), written at every
``blocks.{l}.attn.hook_pattern`` from the clean run. With ``freeze_layer_norms`` every LayerNorm's scale is written
from the clean run too (each LayerNorm then linear, as in the graph): what then separates the steered run from the
graph's prediction is the real feed-forward blocks against the transcoders, and the head's GELU. It runs as two
forward calls with :class:`~bertcore.modeling.interventions.Interventions` (no hook, nothing set on the model): safe
beside other threads using the same model. circuit-tracer sets a feature to a value in the steered run itself; the
two agree when every steered feature sits in one block (nothing steered upstream of another), as the check's
supernodes do.

**In the graph** (:func:`predicted_change`). The graph's prediction is the change of the target in the linear
local replacement model (:mod:`bertcore.circuits.attribution`: attention, LayerNorm scales and the head's GELU
frozen; errors fixed) when the steered features' activations change by ``(f - 1) a`` and every other active
feature's activation follows its pre-activation (slope 1, its gate held open: the JumpReLU linearised at the
input). The adjacency's column of a feature is its direct effect per doubling (``a`` times the effect of one unit),
so the per-unit matrix is ``B = A diag(1 / a)`` on feature columns and the total effect of a unit of feature ``j``
on target ``t`` is ``[B + B^2 + ...]_{t, j}``: circuit-tracer's influence series (``compute_influence``) on the
signed, unnormalised adjacency. The prediction is ``sum_j (f - 1) a_j [B + B^2 + ...]_{t, j}``; the series ends
after at most ``L + 1`` terms (the graph is acyclic by block). In the frozen replacement model the prediction is
exact (``tests/circuits/test_steer.py``); in the real model it is a first-order guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..modeling.interventions import Interventions, eval_mode, layer_norm_scale_sites
from ..readouts.fill_mask import mlm_head_of
from ..sae.transcoder import Transcoder, sites
from .attribution import CircuitError, Graph, Target, contrast_ids, one_mask, targets_at

TOP_K = 5

Node = tuple[int, int, int]  #: ``(block, position, latent)``, all from 0


@dataclass(frozen=True)
class Steering:
    """One steering of a node or supernode in the real model.

    Attributes:
        nodes: the steered features ``(block, position, latent)``; activations: their clean activations (the
            transcoder's, on the clean run's feed-forward input), float, the transcoder's units.
        factor: the factor each activation was scaled by; freeze_attention, freeze_layer_norms: whether the
            attention patterns, and the LayerNorms' scales, were the clean run's.
        target: the target's label (a token, or ``"are - is"``); before, after: its value (the [MASK]'s logit of the
            token minus the mean logit over the vocabulary, or the contrast's logit difference; nats of logit) in
            the clean and the steered run.
        top_before, top_after: the ``top_k`` fills at the [MASK], ``(token, probability)``.
        predicted: the graph's predicted change of the target (:func:`predicted_change`), or None without a graph.
    """

    nodes: tuple[Node, ...]
    activations: tuple[float, ...]
    factor: float
    freeze_attention: bool
    freeze_layer_norms: bool
    target: str
    before: float
    after: float
    top_before: tuple[tuple[str, float], ...]
    top_after: tuple[tuple[str, float], ...]
    predicted: float | None = None

    @property
    def change(self) -> float:
        """``after - before``: the target's actual change."""
        return self.after - self.before


def _nodes(nodes) -> list[Node]:
    """``nodes`` as a list of int triples (a single triple is one node).

    Raises:
        CircuitError: an empty list or an entry that is not three integers.
    """
    if isinstance(nodes, tuple) and len(nodes) == 3 and all(isinstance(v, int) for v in nodes):
        nodes = [nodes]
    out = []
    for node in nodes:
        if not (isinstance(node, Sequence) and len(node) == 3
                and all(isinstance(v, int) and not isinstance(v, bool) for v in node)):
            raise CircuitError(f"a node is (block, position, latent), three integers counted from 0; got {node!r}")
        out.append((int(node[0]), int(node[1]), int(node[2])))
    if not out:
        raise CircuitError("no node to steer: give one (block, position, latent) or a list of them")
    return out


def _factor(factor) -> float:
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor):
        raise CircuitError(f"the steering factor must be a finite number (e.g. -1.0 or 2.0); got {factor!r}")
    return float(factor)


def check_nodes(nodes, transcoders: dict[int, Transcoder], length: int) -> list[Node]:
    """The nodes, checked against the transcoders and an input of ``length`` tokens.

    Raises:
        CircuitError: a node that is not three integers, a block without a transcoder, a position outside
            ``0..length - 1``, a latent outside ``0..d_sae - 1``.
    """
    out = _nodes(nodes)
    for block, position, latent in out:
        if block not in transcoders:
            raise CircuitError(f"block {block} has no transcoder (blocks with one: {sorted(transcoders)}); "
                               f"node {(block, position, latent)}")
        if not 0 <= position < length:
            raise CircuitError(f"position {position} is outside the input's {length} tokens (0..{length - 1}, "
                               f"[CLS] and [SEP] included); node {(block, position, latent)}")
        d_sae = transcoders[block].d_sae
        if not 0 <= latent < d_sae:
            raise CircuitError(f"latent {latent} is outside block {block}'s transcoder, which has {d_sae} "
                               f"(0..{d_sae - 1}); node {(block, position, latent)}")
    return out


# ----------------------------------------------------------------------------- the graph's prediction
def total_effects(graph: Graph, target: int = 0, max_terms: int = 1000) -> torch.Tensor:
    """``(n_f,)`` float64: each feature node's total effect on logit target ``target`` (index into
    ``graph.targets``) through the graph, per doubling of its activation (module docstring: the row
    ``[A + B A + B^2 A + ...]_t`` on feature columns, ``B = A diag(1 / a)``). Direct effect plus every path
    through other features; errors and embeddings are no intermediates (nothing feeds them).

    Raises:
        CircuitError: ``target`` outside the graph's targets.
        RuntimeError: the series does not end (a cycle: not a graph from :func:`~.attribution.build`).
    """
    if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < len(graph.targets):
        raise CircuitError(f"target must be one of the graph's {len(graph.targets)} logit targets "
                           f"(0..{len(graph.targets) - 1}); got {target!r}")
    nf = graph.layout.features
    feature_block = graph.edges[:nf, :nf]  # (n_f, n_f) [target feature, source feature]
    term = graph.edges[nf + target, :nf].clone()  # paths of length 1: the direct effects (the logits' rows follow)
    total = term.clone()
    for _ in range(max_terms):
        if not bool(term.any()):
            return total
        term = (term / graph.activations) @ feature_block  # one more feature on the path
        total += term
    raise RuntimeError(f"the path series did not end after {max_terms} terms: the graph has a cycle")


def predicted_change(graph: Graph, nodes, factor: float, target: int = 0) -> float:
    """The graph's predicted change of target ``target`` when every feature of ``nodes`` is scaled by ``factor``:
    ``sum (factor - 1) x total effect per doubling`` (:func:`total_effects`). A feature that is not in the graph
    (inactive on the input) has activation 0: it contributes nothing, as steering it in the real model does.

    Raises:
        CircuitError: a node that is not three integers, a non-finite factor, a bad target.
    """
    factor = _factor(factor)
    effects = total_effects(graph, target)
    index = {tuple(f): i for i, f in enumerate(graph.features.tolist())}
    return float(sum((factor - 1.0) * float(effects[index[n]]) for n in _nodes(nodes) if n in index))


# ----------------------------------------------------------------------------- the real model
def _top(logits: torch.Tensor, tokenizer, k: int) -> tuple[tuple[str, float], ...]:
    probs = logits.double().softmax(-1)
    p, i = probs.topk(k)
    return tuple(zip(tokenizer.convert_ids_to_tokens(i.tolist()), (round(float(v), 6) for v in p)))


@torch.no_grad()
def steer(model: torch.nn.Module, tokenizer, text: str, transcoders: dict[int, Transcoder], nodes, factor: float,
          *, graph: Graph | None = None, target: int = 0, contrast: tuple[str, str] | None = None,
          freeze_attention: bool = True, freeze_layer_norms: bool = False, top_k: int = TOP_K,
          max_length: int | None = None) -> Steering:
    """Steer ``nodes`` by ``factor`` in the real model on ``text``'s one [MASK] (module docstring).

    Args:
        model: a bertcore model with an MLM head (only read; eval mode, as a shared model is); tokenizer: its own.
        text: one sentence with exactly one [MASK].
        transcoders: ``{block: Transcoder}`` (at least the steered blocks'; :mod:`bertcore.sae.transcoder`).
        nodes: one ``(block, position, latent)`` or a list of them (a supernode), all counted from 0.
        factor: what each feature's activation becomes, as a multiple of its clean value (-1.0, 0.0, 2.0, ...).
        graph: the attribution graph of ``text`` (:func:`~.attribution.build`): the target is its
            ``targets[target]`` and :attr:`Steering.predicted` its prediction. Without a graph the target is the
            ``contrast`` pair's logit difference, or the clean run's top fill (demeaned logit).
        freeze_attention: the attention patterns of the clean run in the steered run (True), or recomputed.
        freeze_layer_norms: every LayerNorm's scale (each block's ``ln1`` and ``ln2``, the MLM head's; the sites of
            :func:`~bertcore.modeling.interventions.layer_norm_scale_sites`) written from the clean run too, as the
            graph holds them (False: recomputed, as circuit-tracer's ``feature_intervention`` does).
        top_k: how many fills to report before and after.
    Returns:
        :class:`Steering`.
    Raises:
        CircuitError: no [MASK] or more than one; a node that is not three integers, a block without a
            transcoder, a position outside the input, a latent outside the transcoder; a non-finite factor; a
            transcoder of another width; a contrast word that is not one token; a graph of another text; a bad
            ``target`` or ``top_k``.
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    factor = _factor(factor)
    encoder, head = mlm_head_of(model)
    cfg = encoder.config
    param = next(model.parameters())
    _, inputs, m = one_mask(tokenizer, text, max_length, param.device)
    length = inputs["input_ids"].shape[1]
    if graph is not None and graph.input_ids.tolist() != inputs["input_ids"][0].tolist():
        raise CircuitError("the graph was built from another text (its tokens differ from this text's)")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise CircuitError(f"top_k must be a positive integer; got {top_k!r}")
    steered = check_nodes(nodes, transcoders, length)
    for block in {b for b, _, _ in steered}:
        tc = transcoders[block]
        if tc.d_in != cfg.hidden_size or tc.d_out != cfg.hidden_size:
            raise CircuitError(f"the transcoder of block {block} reads {tc.d_in} and writes {tc.d_out} values; "
                               f"this model's hidden size is {cfg.hidden_size}: it was trained on another model")
    predicted = None if graph is None else predicted_change(graph, steered, factor, target)
    blocks = sorted({b for b, _, _ in steered})
    frozen = [f"blocks.{i}.attn.hook_pattern" for i in range(cfg.num_hidden_layers)] if freeze_attention else []
    frozen += layer_norm_scale_sites(cfg) if freeze_layer_norms else []
    with eval_mode(model):
        clean = Interventions(record=[sites(cfg, b)[0] for b in blocks] + frozen)
        hidden = encoder(**inputs, interventions=clean).last_hidden_state  # (1, T, H)
        logits_before = head(hidden[0, m], clean.tap()).double().cpu()  # (V,)
        delta = {b: torch.zeros_like(hidden) for b in blocks}  # (1, T, H) added to each block's hook_mlp_out
        activations = []
        for block, position, latent in steered:
            tc = transcoders[block]
            x = clean.recorded[sites(cfg, block)[0]][0, position].to(tc.W_enc.device, tc.W_enc.dtype)  # (H,)
            a = float(tc.encode(x)[latent])
            activations.append(a)
            direction = (tc.W_dec[latent] / tc.out_scale).to(hidden.device, hidden.dtype)  # (H,) model units
            delta[block][0, position] += (factor - 1.0) * a * direction
        edits = {f"blocks.{b}.hook_mlp_out": (lambda y, d=delta[b]: y + d) for b in blocks}
        edits.update({name: (lambda x, v=clean.recorded[name]: v.expand_as(x).clone()) for name in frozen})
        steered_run = Interventions(edits)
        hidden = encoder(**inputs, interventions=steered_run).last_hidden_state
        logits_after = head(hidden[0, m], steered_run.tap()).double().cpu()  # (V,)
    if graph is not None:
        goal: Target = graph.targets[target]  # checked by predicted_change
    else:
        goal = targets_at(logits_before, tokenizer, contrast_ids(tokenizer, contrast))[0]
    vector = goal.vector.to(logits_before.device)  # the graph's target vector is where the graph was built
    return Steering(tuple(steered), tuple(activations), factor, freeze_attention, freeze_layer_norms, goal.label,
                    float(logits_before @ vector), float(logits_after @ vector),
                    _top(logits_before, tokenizer, top_k), _top(logits_after, tokenizer, top_k), predicted)
