"""Attribution graphs for a [MASK] prediction (Ameisen et al. 2025, "Circuit tracing", section 3; circuit-tracer's
``attribution``), for an encoder that reads both directions.

The *local replacement model* of one input (:mod:`bertcore.circuits.replacement`): every attention pattern, every
LayerNorm's scale (the embedding LayerNorm's and the MLM head's included) and the MLM head's GELU (as the slope
``gelu(u) / u`` at its operating point) are frozen at the real forward pass's values; each block's feed-forward
output is replaced by its transcoder's prediction, with the feature activations frozen, plus an *error* that holds
exactly what the transcoder misses. The model is then linear from the embeddings to a logit, and on this input it
computes exactly what the real model does. Nodes:

- a feature ``(block, position, latent)`` active on the input: it writes ``a W_dec[latent]`` into that block's
  ``hook_mlp_out`` at that position, and its own pre-activation is a target;
- an error ``(block, position)``: what the transcoder misses there;
- an embedding per position: the word, position and segment embeddings summed (the embedding LayerNorm mixes them);
- logit targets at the [MASK]: the most probable fills up to 0.95 cumulative probability (at most 10), each logit
  demeaned over the vocabulary as circuit-tracer does; or the logit difference of a contrast pair.

An edge's weight is the source's direct effect on the target: the gradient of the target in the frozen model at the
place the source writes, dotted with what it writes (other features held fixed). One forward pass of the frozen
model on ``batch`` copies of the input, then one backward pass per ``batch`` targets of one block (copy r carries
target r; a feature's pass stops below its block), as circuit-tracer's ``attribute`` reuses one forward pass. Any
position may feed any other, in both directions; the graph is acyclic by block. Everything runs on a private float64
copy of the model (the shared model is only read). With ``max_feature_nodes``, the features of largest influence
only, chosen as circuit-tracer's ``attribute`` chooses them (:func:`build`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..device import device_of
from ..readouts.fill_mask import mask_token_positions
from ..sae.transcoder import Transcoder
from ..tokenization.tokenizer import encode
from .graph import Layout, compute_influence
from .replacement import CircuitError, Replacement

CUMULATIVE = 0.95
MAX_TARGETS = 10


@dataclass
class Target:
    """A logit target: ``token_ids`` (one, or a contrast pair ``(a, b)``: logit a minus logit b), its label, its
    weight (the fill's probability; 1 for a contrast) and the vector over the vocabulary it reads (demeaned)."""

    token_ids: tuple[int, ...]
    label: str
    probability: float
    vector: torch.Tensor = field(repr=False)


@dataclass
class Graph:
    """The graph of one input, on the CPU (wherever the model computes).

    Attributes:
        tokens, input_ids: the input (``input_ids (T,)`` long); mask_position: the [MASK]'s position.
        features: ``(n_f, 3)`` long ``(block, position, latent)`` of the feature nodes (every active feature, or the
            ``max_feature_nodes`` kept), sorted.
        activations: ``(n_f,)`` float64, their activations.
        targets: the logit targets, in the order of the last ``len(targets)`` nodes.
        edges: ``(R, n)`` float64, the adjacency's target rows (:meth:`~.graph.Layout.rows`: the feature nodes, then
            the logits), ``[target, source]`` direct effects; nodes ``[features, errors (block-major, then
            position), embeddings (per position), logits]``. The rows of errors and embeddings are zero and not held.
        layout: the counts of each kind of node.
        constants: ``(R,)`` float64, what each target computes with every source at 0 (biases through the frozen
            model).
        values: ``(R,)`` float64, each target's value in the real forward (features: pre-activation; logits: the
            demeaned logit or the contrast's difference): its row's sum plus its constant plus ``dropped``.
        error_norms: ``(L, T)`` float64, the error vectors' norms.
        dropped: ``(R,)`` float64, what the active features the graph leaves out (``max_feature_nodes``) give each
            target; 0 for a whole graph.
        n_active: how many features are active on the input (``n_f`` for a whole graph).
    """

    tokens: list[str]
    input_ids: torch.Tensor
    mask_position: int
    features: torch.Tensor
    activations: torch.Tensor
    targets: list[Target]
    edges: torch.Tensor
    layout: Layout
    constants: torch.Tensor
    values: torch.Tensor
    error_norms: torch.Tensor
    dropped: torch.Tensor
    n_active: int

    @property
    def probabilities(self) -> torch.Tensor:
        return torch.tensor([t.probability for t in self.targets], dtype=torch.float64, device=self.edges.device)


# ----------------------------------------------------------------------------- the graph
def targets_at(logits: torch.Tensor, tokenizer, contrast: tuple[int, int] | None = None,
               cumulative: float = CUMULATIVE, max_targets: int = MAX_TARGETS) -> list[Target]:
    """The logit targets of ``logits (V,)`` at the [MASK] (module docstring)."""
    vocab = logits.shape[-1]
    if contrast is not None:
        a, b = contrast
        vector = torch.zeros(vocab, dtype=torch.float64, device=logits.device)
        vector[a], vector[b] = 1.0, -1.0
        label = f"{tokenizer.convert_ids_to_tokens(a)} - {tokenizer.convert_ids_to_tokens(b)}"
        return [Target((a, b), label, 1.0, vector)]
    probs = logits.double().softmax(-1)
    top_p, top_i = probs.sort(descending=True)
    n = min(max_targets, int((torch.cumsum(top_p, 0) < cumulative).sum()) + 1)
    out = []
    for p, i in zip(top_p[:n].tolist(), top_i[:n].tolist()):
        vector = torch.full((vocab,), -1.0 / vocab, dtype=torch.float64, device=logits.device)
        vector[i] += 1.0  # logit i minus the mean logit
        out.append(Target((i,), tokenizer.convert_ids_to_tokens(i), p, vector))
    return out


def contrast_ids(tokenizer, contrast: tuple[str, str] | None) -> tuple[int, int] | None:
    """The token ids of a contrast pair (``("are", "is")``), or None without one.

    Raises:
        CircuitError: a word that is not exactly one token for ``tokenizer``.
    """
    if contrast is None:
        return None
    ids = [tokenizer(w, add_special_tokens=False)["input_ids"] for w in contrast]
    for word, got in zip(contrast, ids):
        if len(got) != 1:
            raise CircuitError(f"the contrast word {word!r} is {len(got)} tokens for this tokenizer "
                               f"({tokenizer.convert_ids_to_tokens(got)}); pick a word that is one token")
    return ids[0][0], ids[1][0]


def one_mask(tokenizer, text: str, max_length: int | None = None, device: torch.device | str | None = None):
    """``(encoding, inputs, position)``: ``text`` encoded (:func:`bertcore.tokenization.tokenizer.encode`), its
    tensors (``input_ids`` etc., ``(1, T)`` long, on ``device``: the model's) and the position of its one [MASK].

    Raises:
        CircuitError: no [MASK] or more than one; the tokenizer's errors for bad text.
    """
    enc = encode(tokenizer, text, max_length=max_length)
    inputs = enc.tensors(device)
    positions = mask_token_positions(tokenizer, inputs["input_ids"])
    if len(positions) != 1:
        raise CircuitError(f"write exactly one [MASK] where the model should guess a word; the text has "
                           f"{len(positions)}")
    return enc, inputs, positions[0]


def active_features(rm: Replacement) -> tuple[torch.Tensor, torch.Tensor]:
    """``(features (n_f, 3) long (block, position, latent), activations (n_f,) float64)``: every active feature of the
    input, block-major, then position, then latent (``nonzero``'s row-major order), on the model's device."""
    device = rm.embedding.device
    if not rm.n:
        return torch.zeros(0, 3, dtype=torch.long, device=device), torch.zeros(0, dtype=torch.float64, device=device)
    feats = torch.cat([torch.cat([torch.full((len(p), 1), layer, device=device), p], 1) for layer in range(rm.n)
                       for p in [rm.codes[layer].nonzero()]])
    acts = torch.cat([rm.codes[layer][rm.codes[layer] != 0] for layer in range(rm.n)])
    return feats, acts


class _Rows:
    """Computes target rows of the graph over every source of the input (the module docstring's backward passes): one
    forward pass of the frozen model on ``batch`` copies, kept, then one backward pass per chunk of at most ``batch``
    targets of one kind and block."""

    def __init__(self, rm: Replacement, feats: torch.Tensor, acts: torch.Tensor, targets: list[Target], m: int,
                 layout: Layout, batch: int) -> None:
        self.rm, self.feats, self.targets, self.layout = rm, feats, targets, layout
        device, t = rm.embedding.device, layout.embeddings
        # the sources' vectors: per block and position, (position, columns, a W_dec / c_out of each (k, H)); a
        # chunk's feature columns are one product per place, (targets, H) x (H, features there)
        self.writers: dict[int, list] = {}
        for layer in range(rm.n):
            tc, here = rm.tcs[layer], (feats[:, 0] == layer).nonzero().flatten()
            self.writers[layer] = []
            for p in feats[here, 1].unique().tolist():
                cols = here[feats[here, 1] == p]
                self.writers[layer].append((p, cols, (tc.W_dec[feats[cols, 2]] / tc.out_scale) * acts[cols, None]))
        self.deltas = {"embed": torch.zeros(batch, t, rm.embedding.shape[-1], dtype=torch.float64, device=device,
                                            requires_grad=True)}
        self.deltas.update({layer: torch.zeros(batch, t, rm.cfg.hidden_size, dtype=torch.float64, device=device,
                                               requires_grad=True) for layer in range(rm.n)})
        self.wrt = [self.deltas["embed"]] + [self.deltas[k] for k in range(rm.n)]
        self.ffn_inputs, self.logits = rm.run(batch, self.deltas, positions=[m])  # logits (batch, 1, V)

    def chunk(self, kind: str, idx: torch.Tensor, last: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows (k, n) float64, values (k,) float64)`` on the model's device: the direct effects on ``k`` targets
        (``kind`` "feature": indices into the active features, all of one block; "logit": indices into the targets)
        from every source, and the targets' values. ``last``: free the kept forward pass after it."""
        rm, lay, device = self.rm, self.layout, self.rm.embedding.device
        k, t = len(idx), lay.embeddings
        copies = torch.arange(k, device=device)
        if kind == "feature":
            layer = int(self.feats[idx[0], 0])
            tc = rm.tcs[layer]
            ps, fs = self.feats[idx, 1], self.feats[idx, 2]
            x = self.ffn_inputs[layer][copies, ps] * tc.in_scale  # (k, H)
            total = (x * tc.W_enc.T[fs]).sum(-1) + tc.b_enc[fs]  # (k,) the pre-activations
        else:
            total = torch.stack([self.logits[r, 0] @ self.targets[j].vector for r, j in enumerate(idx.tolist())])
        grads = torch.autograd.grad(total.sum(), self.wrt, retain_graph=not last, allow_unused=True)  # None: no path
        out = torch.zeros(k, lay.size, dtype=torch.float64, device=device)
        if grads[0] is not None:
            out[:, lay.part("embeddings")] = (grads[0][:k] * rm.embedding).sum(-1)
        errors = lay.part("errors").start
        for source in range(rm.n):
            g = grads[1 + source]
            if g is None:
                continue
            g = g[:k]  # (k, T, H)
            out[:, errors + source * t:errors + (source + 1) * t] = (g * rm.errors[source]).sum(-1)
            for p, cols, vectors in self.writers[source]:
                out[:, cols] = g[:, p] @ vectors.T  # (k, features at p)
        if last:
            self.ffn_inputs = self.logits = None
        return out, total.detach()


def build(model: torch.nn.Module, tokenizer, text: str, transcoders: dict[int, Transcoder],
          contrast: tuple[str, str] | None = None, batch: int = 32, max_length: int | None = None,
          progress=None, max_feature_nodes: int | None = None, update_interval: int = 4) -> Graph:
    """The attribution graph of ``text``'s one [MASK] (module docstring).

    With ``max_feature_nodes`` below the number of active features, the graph keeps that many, chosen as
    circuit-tracer's ``attribute`` does: the logit rows first, then, ``update_interval`` chunks at a time, the
    not yet computed features of largest influence on the logits through the rows computed so far
    (:func:`~.graph.compute_influence` on them). The rows are kept on the CPU, so the device holds the model, one
    forward pass on ``batch`` copies and one chunk's gradients: ``(max_feature_nodes + logits) x (active features +
    (L + 1) T)`` float64 values on the CPU, ``batch x (T x H x (L + 1) + heads x T x T x L)`` on the device.
    The features left out are in :attr:`Graph.dropped`.

    Args:
        model: a bertcore model with an MLM head (only read); tokenizer: its tokenizer.
        transcoders: ``{block: Transcoder}`` for every block (:mod:`bertcore.sae.transcoder`).
        contrast: two words, each one token (``("are", "is")``): the target is their logit difference.
        batch: targets per backward pass; progress: ``callable(done, total)``.
        max_feature_nodes: the most feature nodes to keep (None: every active feature, the whole graph);
        update_interval: chunks computed between two rankings.
    Raises:
        CircuitError: no [MASK] or more than one, a contrast word that is not one token, missing or misfitting
            transcoders, a ``batch``, ``max_feature_nodes`` or ``update_interval`` that is not a positive integer
            (``max_feature_nodes`` may be 0); bertcore.readouts.fill_mask.FillMaskError: no MLM head; the
            tokenizer's errors for bad text.
    """
    for name, value, least in (("batch", batch, 1), ("update_interval", update_interval, 1),
                               ("max_feature_nodes", 0 if max_feature_nodes is None else max_feature_nodes, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise CircuitError(f"{name} must be an integer of at least {least}; got {value!r}")
    device = device_of(model)
    enc, inputs, m = one_mask(tokenizer, text, max_length, device)
    pair = contrast_ids(tokenizer, contrast)
    rm = Replacement(model, transcoders, inputs)
    targets = targets_at(rm.logits[m], tokenizer, pair)
    feats, acts = active_features(rm)
    n_f, n_t, t = len(feats), len(targets), inputs["input_ids"].shape[1]
    full = Layout(n_f, rm.n * t, t, n_t)
    keep = n_f if max_feature_nodes is None else min(max_feature_nodes, n_f)
    rows_of = _Rows(rm, feats, acts, targets, m, full, min(batch, max(keep, n_t, 1)))
    host = torch.device("cpu")  # the graph's rows live in the host's memory, wherever the model computes
    work = torch.zeros(keep + n_t, full.size, dtype=torch.float64, device=host)  # the rows computed, on the CPU
    node_of = torch.zeros(keep + n_t, dtype=torch.long, device=host)  # each row's node in ``full``
    values = torch.zeros(keep + n_t, dtype=torch.float64, device=host)
    done, total = 0, keep + n_t
    weights = torch.zeros(full.size, dtype=torch.float64, device=host)
    weights[full.part("logits")] = torch.tensor([x.probability for x in targets], dtype=torch.float64, device=host)

    def compute(kind: str, idx: torch.Tensor, nodes: torch.Tensor) -> None:
        nonlocal done
        rows, value = rows_of.chunk(kind, idx.to(device), last=done + len(idx) == total)
        work[done:done + len(idx)], values[done:done + len(idx)], node_of[done:done + len(idx)] = \
            rows.cpu(), value.cpu(), nodes
        done += len(idx)
        if progress is not None:
            progress(done, total)

    for j in range(0, n_t, batch):
        idx = torch.arange(j, min(j + batch, n_t), device=host)
        compute("logit", idx, full.part("logits").start + idx)
    visited = torch.zeros(n_f, dtype=torch.bool, device=host)
    feat_blocks = feats[:, 0].to(host)  # each feature's block, read where the ranking runs
    while int(visited.sum()) < keep:
        if keep == n_f:  # the whole graph: every feature, block by block
            pending = torch.arange(n_f, device=host)
        else:
            influence = compute_influence(work[:done], weights, node_of[:done])[:n_f]
            ranked = torch.argsort(influence, descending=True, stable=True)
            pending = ranked[~visited[ranked]][:min(update_interval * batch, keep - int(visited.sum()))]
        blocks = feat_blocks[pending]
        for layer in blocks.unique().tolist():  # a chunk holds features of one block: its pass stops below it
            here = pending[blocks == layer]
            for i in range(0, len(here), batch):
                compute("feature", here[i:i + batch], here[i:i + batch])
        visited[pending] = True
    # the kept graph: its features in their order (block, position, latent), then the logits
    selected = visited.nonzero().flatten()
    order = torch.argsort(node_of)
    columns = torch.cat([selected, torch.arange(n_f, full.size, device=host)])
    edges = work[order[:, None], columns[None, :]]
    dropped = (work[:, :n_f] @ (~visited).double())[order]  # what the features left out give each target
    layout = Layout(len(selected), rm.n * t, t, n_t)
    constants = _constants(rm, feats, targets, m, full)[node_of[order].to(device)].cpu()
    error_norms = torch.stack([rm.errors[layer].norm(dim=-1) for layer in range(rm.n)]).cpu()
    return Graph(enc.tokens, inputs["input_ids"][0].cpu(), m, feats[selected.to(device)].cpu(),
                 acts[selected.to(device)].detach().cpu(), targets, edges, layout, constants, values[order],
                 error_norms, dropped, n_f)


@torch.no_grad()
def _constants(rm: Replacement, feats: torch.Tensor, targets: list[Target], m: int, layout: Layout) -> torch.Tensor:
    """Each target's value with every source at 0 (the frozen model's biases alone)."""
    ffn_inputs, logits = rm.run(1, parts={"embed": False, "features": False, "errors": False}, positions=[m])
    out = torch.zeros(layout.size, dtype=torch.float64, device=rm.embedding.device)
    for layer in range(rm.n):
        here = (feats[:, 0] == layer).nonzero().flatten()
        if len(here):
            tc = rm.tcs[layer]
            x = ffn_inputs[layer][0, feats[here, 1]] * tc.in_scale  # (k, H)
            out[here] = (x * tc.W_enc.T[feats[here, 2]]).sum(-1) + tc.b_enc[feats[here, 2]]
    for j, target in enumerate(targets):
        out[layout.part("logits").start + j] = logits[0, 0] @ target.vector
    return out
