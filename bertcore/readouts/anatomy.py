"""Model anatomy: every named parameter with its shape and count, grouped the way BERT is built
(embeddings, encoder layers, pooler, heads), and the parameter counts of the presets.

Names and counts are those of ``transformers`` (``models/bert/modeling_bert.py``): for the same
config, ``BertModel`` base has 199 named tensors and 109,482,240 parameters, large 335,141,888.
Tied tensors (the MLM decoder shares the word-embedding matrix, Press & Wolf 2017 / BERT's
``cls.predictions.decoder``) are counted once, as ``model.num_parameters()`` does.
Preset counts come from the shapes (a formula); tests check them against models built on the
``meta`` device (no memory allocated) and against transformers' own classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

from ..modeling.config import PRESETS, BertConfig

HEADS = ("base", "mlm", "pretraining", "classification")
_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.(.*)$")
_PARTS = {
    "attention.self.": "self-attention Q, K, V",
    "attention.output.dense.": "attention output projection",
    "attention.output.LayerNorm.": "attention LayerNorm",
    "intermediate.": "feed-forward in (H -> I)",
    "output.dense.": "feed-forward out (I -> H)",
    "output.LayerNorm.": "feed-forward LayerNorm",
}


@dataclass
class ParamRow:
    """One named parameter.

    Attributes:
        name: HF-style name, e.g. ``encoder.layer.0.attention.self.query.weight``.
        shape: its shape.
        count: number of elements.
        group: ``embeddings``, ``encoder layer N``, ``pooler``, ``MLM head``, ``NSP head``,
            ``classifier`` or ``other``.
        part: finer part inside the group (e.g. ``self-attention Q, K, V``).
    """

    name: str
    shape: tuple[int, ...]
    count: int
    group: str
    part: str


def group_of(name: str) -> tuple[str, str]:
    """``(group, part)`` of a parameter name (with or without the ``bert.`` prefix)."""
    m = _LAYER.search(name)
    if m:
        rest = m.group(2)
        part = next((label for prefix, label in _PARTS.items() if rest.startswith(prefix)), rest)
        return f"encoder layer {int(m.group(1))}", part
    bare = name.removeprefix("bert.")
    if bare.startswith("embeddings."):
        piece = bare.split(".")[1]
        return "embeddings", {"word_embeddings": "token (WordPiece)", "position_embeddings": "position",
                              "token_type_embeddings": "segment", "LayerNorm": "LayerNorm"}.get(piece, piece)
    if bare.startswith("embeddings_project."):
        return "embeddings", "projection (E -> H)"
    if bare.startswith("encoder.LayerNorm."):
        return "final LayerNorm", "after the last layer (pre-LN)"
    if bare.startswith("pooler."):
        return "pooler", "dense (H -> H) + tanh on [CLS]"
    if bare.startswith("cls.predictions."):
        return "MLM head", "transform (dense, GELU, LayerNorm)" if ".transform." in bare else "decoder bias"
    if bare.startswith("cls.seq_relationship."):
        return "NSP head", "2 logits from the pooled [CLS]"
    if bare.startswith("classifier."):
        return "classifier", "linear on the pooled [CLS]"
    return "other", bare


def parameter_table(model: nn.Module) -> list[ParamRow]:
    """Every distinct named parameter of ``model`` in definition order (tied tensors once).

    Works on models built on the ``meta`` device (only shapes are read).
    """
    rows = []
    for name, p in model.named_parameters():
        group, part = group_of(name)
        rows.append(ParamRow(name, tuple(p.shape), p.numel(), group, part))
    return rows


def tied_parameters(model: nn.Module) -> list[tuple[str, str]]:
    """``(alias, owner)`` for every parameter that is the same tensor as an earlier one
    (e.g. ``cls.predictions.decoder.weight`` -> ``bert.embeddings.word_embeddings.weight``)."""
    first: dict[int, str] = {}
    tied = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            tied.append((name, first[id(p)]))
        else:
            first[id(p)] = name
    return tied


def group_totals(rows: list[ParamRow]) -> dict[str, int]:
    """Parameter count per group, in the order groups first appear."""
    totals: dict[str, int] = {}
    for r in rows:
        totals[r.group] = totals.get(r.group, 0) + r.count
    return totals


def build_on_meta(config: BertConfig, head: str = "base") -> nn.Module:
    """A bertcore model of ``config`` with the given head, on the ``meta`` device (shapes only,
    no memory: bert-large costs nothing).

    Raises:
        ValueError: unknown head (one of :data:`HEADS`).
    """
    from ..modeling.heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
    from ..modeling.model import BertModel

    classes = {"base": BertModel, "mlm": BertForMaskedLM, "pretraining": BertForPreTraining,
               "classification": BertForSequenceClassification}
    if head not in classes:
        raise ValueError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
    with torch.device("meta"):
        return classes[head](config)


def count_from_shapes(config: BertConfig, head: str = "base") -> int:
    """Parameter count from the config alone (the formula, no model built).

    With H hidden, I intermediate, V vocab, P positions, S segments, L layers:
    embeddings ``(V + P + S) H + 2H``; each layer ``4(H^2 + H)`` (Q, K, V, attention output)
    ``+ 2H`` (LayerNorm) ``+ (HI + I) + (IH + H)`` (feed-forward) ``+ 2H`` (LayerNorm);
    pooler ``H^2 + H``; MLM head ``H^2 + H + 2H + V`` (transform + LayerNorm + decoder bias; the
    decoder weight is the tied word-embedding matrix); NSP ``2H + 2``; classifier ``HC + C``.
    BertForMaskedLM has no pooler (as HF).

    Raises:
        ValueError: unknown head.
    """
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    emb = (v + config.max_position_embeddings + config.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    pooler = h * h + h
    mlm = h * h + h + 2 * h + v
    total = emb + config.num_hidden_layers * layer
    if head == "base":
        return total + pooler
    if head == "mlm":
        return total + mlm
    if head == "pretraining":
        return total + pooler + mlm + 2 * h + 2
    return total + pooler + h * config.num_labels + config.num_labels


@dataclass
class PresetCount:
    """Size of one preset: name, L, H, heads, I, and parameter counts with each head."""

    name: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    base: int
    pretraining: int
    named_tensors: int


def named_tensor_count(config: BertConfig, head: str = "base") -> int:
    """Number of distinct named parameter tensors (HF ``named_parameters()``): embeddings 5,
    16 per layer, pooler 2, MLM head 5 (bias, transform dense 2, LayerNorm 2), NSP 2, classifier 2.

    Raises:
        ValueError: unknown head.
    """
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
    n = 5 + 16 * config.num_hidden_layers
    return n + {"base": 2, "mlm": 5, "pretraining": 2 + 5 + 2, "classification": 2 + 2}[head]


def preset_counts(presets: dict[str, BertConfig] | None = None) -> list[PresetCount]:
    """Parameter counts of every preset (default :data:`~bertcore.modeling.config.PRESETS`), from the shapes
    (:func:`count_from_shapes`; tests check them against models built on ``meta`` and transformers)."""
    return [PresetCount(name, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size,
                        count_from_shapes(cfg, "base"), count_from_shapes(cfg, "pretraining"),
                        named_tensor_count(cfg, "base"))
            for name, cfg in (presets or PRESETS).items()]


@dataclass
class PoolerSteps:
    """What the pooler does to one sequence (BERT section 3, HF ``BertPooler``).

    Attributes:
        cls_vector: ``(H,)`` the last layer's output at [CLS] (position 0).
        dense: ``(H,)`` ``W cls_vector + b`` before the activation.
        pooled: ``(H,)`` ``tanh(dense)``, the ``pooler_output`` that NSP and classifiers read.
        matches_model: the pooled vector equals the model's own ``pooler_output``.
    """

    cls_vector: torch.Tensor
    dense: torch.Tensor
    pooled: torch.Tensor
    matches_model: bool


@torch.no_grad()
def pooler_steps(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None) -> PoolerSteps | None:
    """Run the encoder on ``input_ids (1, T)`` and take the pooler apart.

    Returns:
        :class:`PoolerSteps`, or None when the model has no pooler (``BertForMaskedLM``).
    Raises:
        bertcore.modeling.embeddings.InputError: ids the model cannot embed.
    """
    encoder = model.base_model
    if getattr(encoder, "pooler", None) is None:
        return None
    out = encoder(input_ids, attention_mask, token_type_ids)
    cls_vec = out.last_hidden_state[0, 0]  # (H,)
    dense = encoder.pooler.dense(cls_vec)  # (H,)
    pooled = torch.tanh(dense)  # (H,)
    return PoolerSteps(cls_vec, dense, pooled, bool(torch.allclose(pooled, out.pooler_output[0], atol=1e-6)))


@dataclass
class EmbeddingBreakdown:
    """The embedding layer taken apart for one sequence (BERT section 3.2, figure 2; HF ``BertEmbeddings``).

    Every tensor is ``(T, H)`` float unless said otherwise.

    Attributes:
        word / position / segment: the three looked-up vectors of each token.
        total: ``word + position + segment`` (from :meth:`BertEmbeddings.parts`, HF's order of addition).
        normalised: ``(total - mean) / sqrt(var + eps)`` per token, before LayerNorm's gain and bias.
        output: ``normalised * gamma + beta``: what the first encoder layer receives (eval mode: no dropout).
        model_output: the model's own embedding output (``hidden_states[0]``), for the check.
        norms: ``{name: (T,)}`` L2 norm per token of each of the above.
        max_abs_diff: ``{check: float}``: ``layernorm`` (LayerNorm written out vs the module's),
            ``model`` (the recomposed output vs the model's own ``hidden_states[0]``).
    """

    word: torch.Tensor
    position: torch.Tensor
    segment: torch.Tensor
    total: torch.Tensor
    normalised: torch.Tensor
    output: torch.Tensor
    model_output: torch.Tensor
    norms: dict[str, torch.Tensor]
    max_abs_diff: dict[str, float]

    def matches(self, atol: float = 1e-5) -> bool:
        """True when every recomposition equals the model's tensors within ``atol``."""
        return all(d <= atol for d in self.max_abs_diff.values())


@torch.no_grad()
def embedding_breakdown(model: nn.Module, input_ids: torch.Tensor,
                        token_type_ids: torch.Tensor | None = None) -> EmbeddingBreakdown:
    """Recompose the embedding output from its parts and check it against the model.

    Args:
        model: a bertcore model (any head class) in eval mode.
        input_ids: ``(1, T)`` long.
        token_type_ids: ``(1, T)`` long segment ids (None: all 0).
    Returns:
        :class:`EmbeddingBreakdown` for the single sequence.
    Raises:
        bertcore.modeling.embeddings.InputError: ids out of range or longer than the model's positions.
    """
    encoder = model.base_model
    emb = encoder.embeddings
    emb.check_inputs(input_ids, token_type_ids)
    parts = emb.parts(input_ids, token_type_ids)  # each (1, T, H)
    word, position, segment, total = parts.word[0], parts.position[0], parts.token_type[0], parts.total[0]  # (T, H)
    mean = total.mean(-1, keepdim=True)  # (T, 1)
    var = total.var(-1, unbiased=False, keepdim=True)  # (T, 1)
    normalised = (total - mean) / torch.sqrt(var + emb.LayerNorm.eps)  # (T, H)
    output = normalised * emb.LayerNorm.weight  # (T, H)
    if emb.LayerNorm.bias is not None:  # ModernBERT's norms have no bias
        output = output + emb.LayerNorm.bias
    if hasattr(encoder, "embeddings_project"):  # ELECTRA: the E-wide embedding module's output (projected later)
        model_output = emb(input_ids, token_type_ids)[0]
    else:
        model_output = encoder(input_ids, token_type_ids=token_type_ids, output_hidden_states=True).hidden_states[0][0]
    named = {"token": word, "position": position, "segment": segment, "sum": total,
             "normalised": normalised, "output": output}
    diffs = {"layernorm": float((output - emb.LayerNorm(total)).abs().max()),
             "model": float((output - model_output).abs().max())}
    return EmbeddingBreakdown(word, position, segment, total, normalised, output, model_output,
                              {k: v.norm(dim=-1) for k, v in named.items()}, diffs)


def transformers_count(config: BertConfig, head: str = "base") -> tuple[int, int]:
    """``(parameters, named tensors)`` of the ``transformers`` class for the same config and head
    (``BertModel``, ``BertForMaskedLM``, ``BertForPreTraining``, ``BertForSequenceClassification``),
    built on the ``meta`` device: the independent reference for :func:`preset_counts`.

    Raises:
        ValueError: unknown head, or a pre-LN config (transformers has no such BERT).
    """
    import transformers

    names = {"base": "BertModel", "mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining",
             "classification": "BertForSequenceClassification"}
    if head not in names:
        raise ValueError(f"unknown head {head!r}; choose one of {', '.join(HEADS)}")
    if config.pre_layer_norm:
        raise ValueError("transformers' BERT is post-LayerNorm; a pre_layer_norm config has no counterpart there "
                         "(its checkpoints are saved as RobertaPreLayerNorm: bertcore.modeling.hf_format)")
    hf_config = transformers.BertConfig(**config.to_hf_dict(), num_labels=config.num_labels)
    with torch.device("meta"):
        model = getattr(transformers, names[head])(hf_config)
    params = list(model.named_parameters())
    return sum(p.numel() for _, p in params), len(params)


# ----------------------------------------------------------------------------- two architectures side by side
#: each family's published base size, as its ``config.json`` says (bert-base-uncased, roberta-base,
#: distilbert-base-uncased, google/electra-base-discriminator, answerdotai/ModernBERT-base)
BASE_CONFIGS: dict[str, dict] = {
    "BERT-base": {"model_type": "bert"},
    "RoBERTa-base": {"model_type": "roberta", "vocab_size": 50265, "max_position_embeddings": 514,
                     "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5},
    "DistilBERT-base": {"model_type": "distilbert", "vocab_size": 30522, "n_layers": 6},
    "ELECTRA-base": {"model_type": "electra", "vocab_size": 30522, "embedding_size": 768, "hidden_size": 768,
                     "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "ModernBERT-base": {"model_type": "modernbert"},
}


def base_config(name: str) -> BertConfig:
    """The :class:`BertConfig` of one of :data:`BASE_CONFIGS`. Raises ValueError for another name."""
    from ..modeling.families import config_from_hf

    if name not in BASE_CONFIGS:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(BASE_CONFIGS)}")
    data = BASE_CONFIGS[name]
    return BertConfig() if data["model_type"] == "bert" else config_from_hf(data)


def block_parts(config: BertConfig) -> dict[tuple[str, str], tuple[list[tuple[int, ...]], int]]:
    """``{(block, part): (shapes, parameters)}`` of the bare encoder: the embeddings, one encoder layer (the
    second: ModernBERT's first has no attention LayerNorm), the final LayerNorm and the pooler, if any.
    Built on the ``meta`` device (no memory)."""
    layer = 1 if config.num_hidden_layers > 1 else 0
    out: dict[tuple[str, str], tuple[list[tuple[int, ...]], int]] = {}
    for row in parameter_table(build_on_meta(config, "base")):
        block = row.group
        if block.startswith("encoder layer"):
            if block != f"encoder layer {layer}":
                continue
            block = "one encoder layer"
        shapes, count = out.get((block, row.part), ([], 0))
        out[(block, row.part)] = (shapes + [row.shape], count + row.count)
    return out


def compare_architectures(a: BertConfig, b: BertConfig) -> list[dict]:
    """Two architectures part by part: ``block``, ``part``, ``shapes_a`` / ``shapes_b`` (``"-"`` where the part
    does not exist), ``params_a`` / ``params_b`` and ``difference`` (b - a), embeddings first."""
    pa, pb = block_parts(a), block_parts(b)
    keys = list(pa) + [k for k in pb if k not in pa]

    def shapes(parts, key) -> str:
        if key not in parts:
            return "-"
        return ", ".join(" × ".join(map(str, s)) for s in parts[key][0])

    return [{"block": k[0], "part": k[1], "shapes_a": shapes(pa, k), "shapes_b": shapes(pb, k),
             "params_a": pa.get(k, ([], 0))[1], "params_b": pb.get(k, ([], 0))[1],
             "difference": pb.get(k, ([], 0))[1] - pa.get(k, ([], 0))[1]} for k in keys]
