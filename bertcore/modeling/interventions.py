"""Interventions as an argument of one forward pass: edit activations and record them, without hooks.

A cached model is shared by every session of the app, each in its own thread, so nothing may be attached to the
model object: a forward hook registered by one thread runs on every other thread's forward pass while it is there
(PyTorch keeps hooks on the module, not on the call). Instead, an analysis builds an :class:`Interventions` and
passes it to that one call, ``model(**inputs, interventions=iv)``, the way ``head_mask`` is passed; the model
calls it at each *site* and the object keeps what it was asked to record. Another thread's call, without it, takes
the plain path. This is TransformerLens's ``run_with_hooks`` made thread-safe: the edits travel with the call.

Every activation has one name, TransformerLens's, and blocks are numbered from 0 as Hugging Face's
``encoder.layer[i]`` (``blocks.3`` is ``encoder.layer.3``). B batch, T tokens, H hidden, E embedding width (H but
for ELECTRA), I intermediate, n heads, d head size. The sites, in the order a forward pass reaches them:

======================================  ================  ==========================================================
site                                    shape             what it is (HF module)
======================================  ================  ==========================================================
``embed.hook_embed``                    (B, T, E)         word embeddings (``embeddings.word_embeddings``)
``embed.hook_token_type_embed``         (B, T, E)         segment embeddings; families with segments only
``embed.hook_pos_embed``                (B or 1, T, E)    learned positions; not in a rotary model
``embed.ln.hook_scale``                 (B, T, 1)         ``sqrt(var + eps)`` of the centred embedding sum
``embed.ln.hook_normalized``            (B, T, E)         ``(x - mean) / scale``, before the weight and bias
``embed.ln.hook_out``                   (B, T, E)         ``embeddings.LayerNorm``'s output (weight and bias applied)
``hook_full_embed``                     (B, T, E)         the embeddings' output (ELECTRA: before the projection)
``blocks.{i}.hook_resid_pre``           (B, T, H)         the block's input, ``hidden_states[i]``
``blocks.{i}.attn.hook_q|k|v``          (B, T, n, d)      ``query`` / ``key`` / ``value``, before ``1/sqrt(d)``
``blocks.{i}.attn.hook_rot_q|rot_k``    (B, T, n, d)      queries and keys after the rotation; rotary models only
``blocks.{i}.attn.hook_attn_scores``    (B, n, T, T)      ``q k^T / sqrt(d)`` plus the additive padding mask
``blocks.{i}.attn.hook_pattern``        (B, n, T, T)      softmax of the scores (before dropout and ``head_mask``)
``blocks.{i}.attn.hook_z``              (B, T, n, d)      each head's context vectors, input of ``attention.output``
``blocks.{i}.hook_attn_out``            (B, T, H)         ``attention.output.dense``, before dropout and residual
``blocks.{i}.hook_resid_mid``           (B, T, H)         ``hook_resid_pre + hook_attn_out``
``blocks.{i}.mlp.hook_pre``             (B, T, I)         ``intermediate.dense`` (GeGLU: the activated half)
``blocks.{i}.mlp.hook_pre_linear``      (B, T, I)         GeGLU's linear half; gated models only
``blocks.{i}.mlp.hook_post``            (B, T, I)         after the activation (GeGLU: times the linear half)
``blocks.{i}.hook_mlp_out``             (B, T, H)         ``output.dense``, before dropout and residual
``blocks.{i}.hook_resid_post``          (B, T, H)         the feed-forward's input plus ``hook_mlp_out``
``blocks.{i}.ln1.hook_scale``           (B, T, 1)         ``attention.output.LayerNorm``: ``sqrt(var + eps)``
``blocks.{i}.ln1.hook_normalized``      (B, T, H)         ``attention.output.LayerNorm``: ``(x - mean) / scale``
``blocks.{i}.ln1.hook_out``             (B, T, H)         ``attention.output.LayerNorm``'s output
``blocks.{i}.ln2.hook_scale|normalized|out``              the same for ``output.LayerNorm``
``blocks.{i}.hook_normalized_resid_post``  (B, T, H)      the block's output, ``hidden_states[i + 1]``; post-LN only
``ln_final.hook_scale|normalized|out``                    the closing LayerNorm of a pre-LN stack; pre-LN only
``mlm_head.hook_pre``                   (B, T, H)         ``cls.predictions.transform.dense``
``mlm_head.hook_post``                  (B, T, H)         after ``transform_act_fn``
``mlm_head.ln.hook_scale|normalized|out``                 ``cls.predictions.transform.LayerNorm``
======================================  ================  ==========================================================

Each LayerNorm has three sites, as TransformerLens's ``LayerNorm`` (``components/layer_norm.py``) and its
``TransformerBridge`` name them: ``hook_scale`` is ``sqrt(mean((x - mean)^2) + eps)``, ``hook_normalized`` is
``(x - mean) / scale`` (before the weight and bias), and ``hook_out`` is the module's output (``hook_normalized * w
+ b``, what flows on). TransformerLens's ``HookedEncoder`` has no ``hook_out``; it names a ``BertBlock``'s output
``hook_normalized_resid_post`` and the embeddings' output ``hook_full_embed``, and so does bertcore.

The LayerNorms are named by the sub-layer they belong to, as HF's modules are: ``ln1`` is the attention
sub-layer's (``attention.output.LayerNorm``), ``ln2`` the feed-forward's (``output.LayerNorm``). What each
normalises depends on where the family puts it:

- post-LN (BERT, RoBERTa, DistilBERT, ELECTRA; TransformerLens's ``BertBlock``): ``ln1`` normalises
  ``hook_resid_mid`` and feeds the feed-forward block; ``ln2`` normalises ``hook_resid_post``, and its
  output is the block's output, ``hook_normalized_resid_post``, ``hidden_states[i + 1]``;
- pre-LN (``pre_layer_norm``, ModernBERT; TransformerLens's GPT-2 blocks): ``ln1`` normalises ``hook_resid_pre``
  and feeds attention, ``ln2`` normalises ``hook_resid_mid`` and feeds the feed-forward block; ``hook_resid_post``
  is the block's output, and ``ln_final`` closes the stack. ModernBERT's block 0 has no ``ln1`` (the embedding norm
  is it).

:func:`hidden_state_site` names the site that equals ``hidden_states[k]`` in any family. At each site the edit (if
any) is applied first, then the result is recorded (if asked), so a recording shows what flows on. An edit at a
``hook_scale`` site replaces the scale the LayerNorm divides by (freezing it makes the LayerNorm linear). Everything
runs in the caller's thread on the caller's tensors. A site that a family does not have raises with its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager

import torch

Edit = Callable[[torch.Tensor], torch.Tensor]

EMBED_SITES: tuple[str, ...] = ("embed.hook_embed", "embed.hook_token_type_embed", "embed.hook_pos_embed",
                                "embed.ln.hook_scale", "embed.ln.hook_normalized", "embed.ln.hook_out",
                                "hook_full_embed")
BLOCK_SITES: tuple[str, ...] = (
    "hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k",
    "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z", "hook_attn_out", "hook_resid_mid",
    "ln1.hook_scale", "ln1.hook_normalized", "ln1.hook_out", "mlp.hook_pre", "mlp.hook_pre_linear", "mlp.hook_post",
    "hook_mlp_out", "hook_resid_post", "ln2.hook_scale", "ln2.hook_normalized", "ln2.hook_out",
    "hook_normalized_resid_post")
FINAL_SITES: tuple[str, ...] = ("ln_final.hook_scale", "ln_final.hook_normalized", "ln_final.hook_out")
MLM_HEAD_SITES: tuple[str, ...] = ("mlm_head.hook_pre", "mlm_head.hook_post", "mlm_head.ln.hook_scale",
                                   "mlm_head.ln.hook_normalized", "mlm_head.ln.hook_out")
# sites whose tensors the model holds as (B, n, T, d) and TransformerLens shows as (B, T, n, d)
HEAD_MAJOR: frozenset[str] = frozenset({"attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q",
                                        "attn.hook_rot_k", "attn.hook_z"})
_BLOCK = re.compile(r"blocks\.(\d+)\.(.+)")
# TransformerLens's short names (utils.get_act_name) -> the block site
SHORT_NAMES: dict[str, str] = {
    "resid_pre": "hook_resid_pre", "resid_mid": "hook_resid_mid", "resid_post": "hook_resid_post",
    "q": "attn.hook_q", "k": "attn.hook_k", "v": "attn.hook_v", "rot_q": "attn.hook_rot_q",
    "rot_k": "attn.hook_rot_k", "attn_scores": "attn.hook_attn_scores", "pattern": "attn.hook_pattern",
    "z": "attn.hook_z", "attn_out": "hook_attn_out", "mlp_out": "hook_mlp_out", "pre": "mlp.hook_pre",
    "pre_linear": "mlp.hook_pre_linear", "post": "mlp.hook_post"}


def act_name(name: str, layer: int | None = None, ln: str | None = None) -> str:
    """The full site name, as TransformerLens's ``utils.get_act_name``: ``act_name("pattern", 3)`` is
    ``"blocks.3.attn.hook_pattern"``, ``act_name("scale", 2, "ln1")`` ``"blocks.2.ln1.hook_scale"``;
    ``act_name("attn.hook_z", 0)`` ``"blocks.0.attn.hook_z"``; a full name comes back as it is.

    Raises:
        ValueError: an unknown name, or a block site without a layer (or a negative one).
    """
    if layer is None:
        parse_site(name)
        return name
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 0:
        raise ValueError(f"blocks are numbered from 0 (HF's encoder.layer[i]); got {layer!r}")
    suffix = f"{ln}.hook_{name}" if ln is not None else SHORT_NAMES.get(name, name)
    full = f"blocks.{layer}.{suffix}"
    parse_site(full)
    return full


def parse_site(name: str) -> tuple[int | None, str]:
    """``"blocks.3.attn.hook_z"`` -> ``(3, "attn.hook_z")``; a site outside the blocks -> ``(None, name)``.

    Raises:
        ValueError: a name that is no site (the message lists the known ones).
    """
    if not isinstance(name, str):
        raise ValueError(f"an intervention site is a name such as 'blocks.0.attn.hook_pattern'; got {name!r}")
    if name in EMBED_SITES or name in FINAL_SITES or name in MLM_HEAD_SITES:
        return None, name
    match = _BLOCK.fullmatch(name)
    if match is None or match.group(2) not in BLOCK_SITES:
        raise ValueError(f"{name!r} is not an intervention site; the sites are {', '.join(EMBED_SITES)}, "
                         f"blocks.<i>.<{'|'.join(BLOCK_SITES)}>, {', '.join(FINAL_SITES)}, "
                         f"{', '.join(MLM_HEAD_SITES)} (bertcore.modeling.interventions)")
    return int(match.group(1)), match.group(2)


def missing_reason(config, name: str) -> str | None:
    """Why a model of ``config`` (:class:`bertcore.modeling.config.BertConfig`) has no site ``name``, or None
    when it has it (the MLM head's sites are checked by the head, not here)."""
    layer, site = parse_site(name)
    n = config.num_hidden_layers
    if layer is not None and layer >= n:
        return f"the model has {n} blocks, numbered 0..{n - 1}"
    rotary = config.position_embedding_type == "rotary"
    if site == "embed.hook_pos_embed" and rotary:
        return "a rotary model has no position embeddings (its positions rotate queries and keys)"
    if site == "embed.hook_token_type_embed" and not config.type_vocab_size:
        return "this family has no segment embeddings"
    if site in ("attn.hook_rot_q", "attn.hook_rot_k") and not rotary:
        return "only a rotary model rotates its queries and keys"
    if site.startswith("ln_final.") and not config.pre_layer_norm:
        return "only a pre-LN stack has a final LayerNorm"
    if site == "hook_normalized_resid_post" and config.pre_layer_norm:
        return "only a post-LN block normalises its output; a pre-LN block's output is hook_resid_post"
    if site == "mlp.hook_pre_linear" and not config.gated_ffn:
        return "only a gated (GeGLU) feed-forward block has a linear half"
    if site.startswith("ln1.") and layer == 0 and not config.first_attention_norm:
        return "block 0 of this family has no attention LayerNorm (the embedding norm is it)"
    return None


def site_names(config) -> list[str]:
    """Every site a model of ``config`` has, in the order a forward pass reaches them: the embeddings', each
    block's, a pre-LN stack's final LayerNorm and the MLM head's (recorded only when the model has an MLM head)."""
    names = [*EMBED_SITES]
    names += [f"blocks.{i}.{s}" for i in range(config.num_hidden_layers) for s in BLOCK_SITES]
    names = [n for n in [*names, *FINAL_SITES] if missing_reason(config, n) is None]
    return names + list(MLM_HEAD_SITES)


def layer_norm_scale_sites(config) -> list[str]:
    """Every LayerNorm scale site (``hook_scale``) a model of ``config`` has: the embedding norm's, each block's
    ``ln1`` and ``ln2`` (ModernBERT's block 0 has no ``ln1``), a pre-LN stack's ``ln_final``, and the MLM head's
    ``mlm_head.ln.hook_scale`` (written through the head's own tap). Writing them all from a clean run makes every
    LayerNorm of the model linear in its input, as the local replacement model of
    :mod:`bertcore.circuits.attribution` holds them."""
    names = ["embed.ln.hook_scale"] + [f"blocks.{i}.{ln}.hook_scale" for i in range(config.num_hidden_layers)
                                       for ln in ("ln1", "ln2")] + ["ln_final.hook_scale", "mlm_head.ln.hook_scale"]
    return [n for n in names if missing_reason(config, n) is None]


def hidden_state_site(config, index: int) -> str:
    """The site equal to ``hidden_states[index]`` (HF's numbering: 0 = the embedding output, k = block k-1's
    output) for a model of ``config``: ``blocks.0.hook_resid_pre``, then each block's output
    (post-LN ``blocks.{k-1}.hook_normalized_resid_post``; pre-LN ``blocks.{k-1}.hook_resid_post``, the last one
    ``ln_final.hook_out``).

    Raises:
        ValueError: ``index`` outside ``0..num_hidden_layers``.
    """
    n = config.num_hidden_layers
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= n:
        raise ValueError(f"hidden_states has {n + 1} entries, numbered 0..{n}; got {index!r}")
    if index == 0:
        return "blocks.0.hook_resid_pre"
    if not config.pre_layer_norm:
        return f"blocks.{index - 1}.hook_normalized_resid_post"
    return "ln_final.hook_out" if index == n else f"blocks.{index - 1}.hook_resid_post"


def block_output_site(config, layer: int) -> str:
    """The site of block ``layer``'s output as the next block reads it (the residual stream after the block;
    before the final LayerNorm of a pre-LN stack): post-LN ``blocks.{layer}.hook_normalized_resid_post``, pre-LN
    ``blocks.{layer}.hook_resid_post``.

    Raises:
        ValueError: ``layer`` outside ``0..num_hidden_layers - 1``.
    """
    n = config.num_hidden_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"the model has {n} blocks, numbered 0..{n - 1}; got {layer!r}")
    return f"blocks.{layer}.hook_resid_post" if config.pre_layer_norm else f"blocks.{layer}.hook_normalized_resid_post"


class Interventions:
    """What to change and what to keep during one forward pass (see the module docstring for the sites).

    Args:
        edits: ``{site: fn}``; ``fn`` takes the activation and returns a tensor of the same shape that replaces it
            (it must not modify its argument in place).
        record: sites whose activation (after any edit) is kept, detached and cloned, in :attr:`recorded`.
    Attributes:
        recorded: ``{site: tensor}``, filled by the forward pass.
    Raises:
        ValueError: a name that is no site, or a negative block (sites beyond the model, or that its family does not
            have, raise in :meth:`check`).
    Use one object for one call in one thread; it is not meant to be shared.
    """

    def __init__(self, edits: Mapping[str, Edit] | None = None, record: Collection[str] = ()) -> None:
        self.edits: dict[str, Edit] = dict(edits or {})
        self.record: frozenset[str] = frozenset(record)
        self.recorded: dict[str, torch.Tensor] = {}
        self._blocks: dict[int, set[str]] = {}
        self._other: set[str] = set()
        for name in (*self.edits, *self.record):
            layer, site = parse_site(name)
            (self._other if layer is None else self._blocks.setdefault(layer, set())).add(site)

    def check(self, config) -> None:
        """Raise ``ValueError`` for a site a model of ``config`` does not have (the message says why)."""
        for name in (*self.edits, *self.record):
            if not name.startswith("mlm_head.") and (why := missing_reason(config, name)) is not None:
                raise ValueError(f"the site {name!r} does not exist: {why}")

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The model calls this at site ``name`` with the activation ``x``; returns what flows on."""
        edit = self.edits.get(name)
        if edit is not None:
            y = edit(x)
            if y.shape != x.shape:
                raise ValueError(f"the edit of {name!r} returned shape {tuple(y.shape)} for an activation "
                                 f"of shape {tuple(x.shape)}")
            x = y
        if name in self.record:
            self.recorded[name] = x.detach().clone(memory_format=torch.contiguous_format)
        return x

    def after(self, first: Mapping[str, Edit]) -> "Interventions":
        """This call's interventions with ``first[site]`` applied before its own edit at each site (how the model
        applies a head mask under the caller's edits); recordings land in this object's :attr:`recorded`."""
        edits = dict(self.edits)
        for name, f in first.items():
            g = edits.get(name)
            edits[name] = f if g is None else (lambda x, f=f, g=g: g(f(x)))
        combined = Interventions(edits, self.record)
        combined.recorded = self.recorded
        return combined

    def tap(self, layer: int | None = None) -> "Tap | None":
        """The sites of block ``layer`` (None: the sites outside the blocks) as a :class:`Tap`, or None when none of
        them is edited or recorded (the modules then take their plain path)."""
        sites = self._other if layer is None else self._blocks.get(layer)
        if not sites:
            return None
        return Tap(self, "" if layer is None else f"blocks.{layer}.", frozenset(sites))


class Tap:
    """The sites of one part of the model (a block, or the embeddings and heads), as the modules call them:
    ``tap(site, x) -> x`` with the site's short name (``"attn.hook_z"``) and the tensor in the model's layout
    (queries, keys, values and contexts ``(B, n, T, d)``, shown to the edit and the recording as ``(B, T, n, d)``).
    """

    def __init__(self, interventions: Interventions, prefix: str, sites: frozenset[str]) -> None:
        self.interventions, self.prefix, self.sites = interventions, prefix, sites

    def wants(self, site: str) -> bool:
        """Whether ``site`` is edited or recorded (a module computes a site it would otherwise skip only then)."""
        return site in self.sites

    def __call__(self, site: str, x: torch.Tensor) -> torch.Tensor:
        if site not in self.sites:
            return x
        if site in HEAD_MAJOR:
            return self.interventions(self.prefix + site, x.transpose(1, 2)).transpose(1, 2)
        return self.interventions(self.prefix + site, x)


def layer_norm(module: torch.nn.Module, x: torch.Tensor, tap: Tap | None, name: str) -> torch.Tensor:
    """``module(x)`` for a LayerNorm (or ``nn.Identity``) with its sites ``{name}.hook_scale``,
    ``{name}.hook_normalized`` and ``{name}.hook_out``: with no tap, or neither of the first two asked for, the module
    itself runs; else the normalisation is written out as TransformerLens's ``LayerNorm``
    (``components/layer_norm.py``): ``x - mean``, divided by the scale ``sqrt(mean(x^2) + eps)`` (``hook_scale``),
    that is ``hook_normalized``; times the weight, plus the bias, that is ``hook_out``."""
    if tap is None or isinstance(module, torch.nn.Identity):
        return module(x)
    if tap.wants(f"{name}.hook_scale") or tap.wants(f"{name}.hook_normalized"):
        centred = x - x.mean(-1, keepdim=True)  # (..., H)
        scale = tap(f"{name}.hook_scale", (centred.pow(2).mean(-1, keepdim=True) + module.eps).sqrt())  # (..., 1)
        out = tap(f"{name}.hook_normalized", centred / scale) * module.weight  # (..., H)
        if module.bias is not None:
            out = out + module.bias
    else:
        out = module(x)
    return tap(f"{name}.hook_out", out)


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run the block with ``model`` in eval mode (dropout off), changing nothing on a model already in eval.

    A model shared between sessions is loaded in eval mode and stays so: this leaves it untouched (no attribute
    of it is set, so another thread's forward pass cannot see a change). A model in training mode belongs to its
    caller (the training loop evaluating its own model): it is switched to eval for the block and back after.
    """
    was_training = model.training
    if was_training:
        model.eval()
    try:
        yield model
    finally:
        if was_training:
            model.train()
