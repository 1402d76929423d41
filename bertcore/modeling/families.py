"""Every BERT a user has: RoBERTa, DistilBERT, ELECTRA and ModernBERT as configurations of BERT's modules.

bertcore builds one model (:class:`bertcore.modeling.model.BertModel` and its heads). A family is two things:
(1) a :class:`bertcore.modeling.config.BertConfig` whose family fields say what differs (read from the family's
``config.json`` by :func:`config_from_hf`), and (2) a weight-name map between the family's ``transformers``
names and ours (:data:`RENAMES`). Nothing else is copied. What differs, family by family:

=============  ==========================================================================================
RoBERTa        Liu et al. 2019: positions numbered after the padding id (``padding_aware_positions``), one
               segment, no NSP head, an MLM head with GELU (``head_act``), byte-level BPE. Names as BERT's
               but ``lm_head`` and ``classifier.dense`` / ``out_proj``.
DistilBERT     Sanh et al. 2019: no segments (``type_vocab_size=0``), no pooler (its classifier's
               ``pre_classifier`` is our pooler with ReLU), its own names (``q_lin``, ``sa_layer_norm``, ...).
ELECTRA        Clark et al. 2020: embeddings of width E projected to H (``embeddings_project``), the
               discriminator's replaced-token head (:class:`bertcore.modeling.electra.ElectraForPreTraining`) and the
               generator's MLM head (``dense H -> E``, GELU, LayerNorm, decoder tied to the E-wide embeddings).
ModernBERT     Warner et al. 2024: pre-LN without biases and without layer 0's attention norm, GeGLU
               (``gated_ffn``; ``Wi`` is one H -> 2I matrix), rotary positions with a 160k base on global layers
               and 10k on local ones, sliding-window attention (128 tokens) except every third layer, a final norm,
               an MLM head ``dense + GELU + norm + decoder``; ``Wqkv`` is split into our query / key / value.
=============  ==========================================================================================

DeBERTa-v3 (He et al. 2021) is not included: its disentangled attention adds two relative-position score terms
(content-to-position and position-to-content, from a shared bucketed relative table) inside every layer, and its
ELECTRA-style embedding sharing and enhanced mask decoder (absolute positions fed only before the head) are new
modules, not settings of these. It would be a second attention, not a configuration of this one.

Unpadding (ModernBERT's efficiency trick) is not done: it gives the same numbers.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .config import FAMILIES, BertConfig, ConfigError

#: the families read and written here (BERT itself is :mod:`bertcore.modeling.hf_format`'s)
OTHER_FAMILIES = tuple(f for f in FAMILIES if f != "bert")
#: tokenizer model per family (ModernBERT's and RoBERTa's are byte-level BPE)
TOKENIZER_MODEL = {"bert": "WordPiece", "roberta": "BPE", "distilbert": "WordPiece", "electra": "WordPiece",
                   "modernbert": "BPE"}
#: the ``transformers`` weight prefix of each family's encoder inside a head class
PREFIX = {"roberta": "roberta.", "distilbert": "distilbert.", "electra": "electra.", "modernbert": "model."}
#: ``transformers`` class per family and bertcore head (:data:`bertcore.loading.sources.HEAD_CLASSES` keys)
HF_CLASSES = {
    "roberta": {"base": "RobertaModel", "mlm": "RobertaForMaskedLM",
                "classification": "RobertaForSequenceClassification"},
    "distilbert": {"base": "DistilBertModel", "mlm": "DistilBertForMaskedLM",
                   "classification": "DistilBertForSequenceClassification"},
    "electra": {"base": "ElectraModel", "mlm": "ElectraForMaskedLM", "rtd": "ElectraForPreTraining",
                "classification": "ElectraForSequenceClassification"},
    "modernbert": {"base": "ModernBertModel", "mlm": "ModernBertForMaskedLM",
                   "classification": "ModernBertForSequenceClassification"},
}

# (theirs, ours) name prefixes; ``{i}`` is a layer number. Encoder names are without any prefix.
_DISTIL_LAYER = [("attention.q_lin.", "attention.self.query."), ("attention.k_lin.", "attention.self.key."),
                 ("attention.v_lin.", "attention.self.value."), ("attention.out_lin.", "attention.output.dense."),
                 ("sa_layer_norm.", "attention.output.LayerNorm."), ("ffn.lin1.", "intermediate.dense."),
                 ("ffn.lin2.", "output.dense."), ("output_layer_norm.", "output.LayerNorm.")]
_MODERN_LAYER = [("attn_norm.", "attention.output.LayerNorm."), ("attn.Wo.", "attention.output.dense."),
                 ("mlp_norm.", "output.LayerNorm."), ("mlp.Wi.", "intermediate.dense."), ("mlp.Wo.", "output.dense.")]
RENAMES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "roberta": {
        "encoder": [],
        "mlm": [("lm_head.dense.", "cls.predictions.transform.dense."),
                ("lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."),
                ("lm_head.bias", "cls.predictions.bias")],
        "classification": [("classifier.dense.", "pooler.dense."), ("classifier.out_proj.", "classifier.")],
    },
    "distilbert": {
        "encoder": [(f"transformer.layer.{{i}}.{a}", f"encoder.layer.{{i}}.{b}") for a, b in _DISTIL_LAYER],
        "mlm": [("vocab_transform.", "cls.predictions.transform.dense."),
                ("vocab_layer_norm.", "cls.predictions.transform.LayerNorm."),
                ("vocab_projector.bias", "cls.predictions.bias")],
        "classification": [("pre_classifier.", "pooler.dense.")],
    },
    "electra": {
        "encoder": [],
        "mlm": [("generator_predictions.dense.", "cls.predictions.transform.dense."),
                ("generator_predictions.LayerNorm.", "cls.predictions.transform.LayerNorm."),
                ("generator_lm_head.bias", "cls.predictions.bias")],
        "classification": [("classifier.dense.", "pooler.dense."), ("classifier.out_proj.", "classifier.")],
        "rtd": [],
    },
    "modernbert": {
        "encoder": [("embeddings.tok_embeddings.", "embeddings.word_embeddings."),
                    ("embeddings.norm.", "embeddings.LayerNorm."), ("final_norm.", "encoder.LayerNorm.")]
                   + [(f"layers.{{i}}.{a}", f"encoder.layer.{{i}}.{b}") for a, b in _MODERN_LAYER],
        "mlm": [("head.dense.", "cls.predictions.transform.dense."),
                ("head.norm.", "cls.predictions.transform.LayerNorm."), ("decoder.bias", "cls.predictions.bias")],
        "classification": [("head.dense.", "pooler.dense."), ("head.norm.", "pooler.LayerNorm.")],
    },
}
#: their MLM decoder weight, tied to the word embeddings (not stored by us; checked when a file has it)
TIED_DECODER = {"roberta": ("lm_head.decoder.weight", "lm_head.decoder.bias"),
                "distilbert": ("vocab_projector.weight",), "electra": ("generator_lm_head.weight",),
                "modernbert": ("decoder.weight",)}
_FUSED_QKV = re.compile(r"^layers\.(\d+)\.attn\.Wqkv\.(weight|bias)$")
_OUR_QKV = re.compile(r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias)$")


def _pattern(prefix: str) -> re.Pattern:
    return re.compile("^" + re.escape(prefix).replace(r"\{i\}", r"(\d+)"))


def _rename(key: str, table: list[tuple[str, str]], reverse: bool = False) -> str | None:
    """``key`` with the first matching prefix of ``table`` replaced (theirs -> ours; ``reverse``: ours -> theirs),
    or None when none matches."""
    for theirs, ours in table:
        src, dst = (ours, theirs) if reverse else (theirs, ours)
        m = _pattern(src).match(key)
        if m:
            return dst.replace("{i}", m.group(1)) + key[m.end():] if "{i}" in src else dst + key[len(src):]
    return None


def detect_head(family: str, keys: list[str]) -> str:
    """The bertcore head that fits a family checkpoint's weight names (theirs): ``classification`` (a
    ``classifier``), ``rtd`` (ELECTRA's discriminator), ``mlm`` or ``base``."""
    if any(k.startswith("classifier.") for k in keys):
        return "classification"
    if family == "electra" and any(k.startswith("discriminator_predictions.") for k in keys):
        return "rtd"
    mlm = [theirs for theirs, _ in RENAMES[family]["mlm"]] + list(TIED_DECODER[family])
    return "mlm" if any(k.startswith(p) for k in keys for p in mlm) else "base"


def state_from_hf(family: str, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A family checkpoint's tensors (theirs) -> ours: encoder keys without ``bert.`` (the loader adds it),
    head keys as our head classes name them. ModernBERT's fused ``Wqkv (3H, H)`` becomes query / key / value.

    Raises:
        ValueError: an MLM decoder that is not tied to the word embeddings (ours is).
    """
    prefix, head = PREFIX[family], detect_head(family, list(state))
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if key in TIED_DECODER[family]:
            continue
        inner = key[len(prefix):] if key.startswith(prefix) else None
        if inner is None:
            ours = _rename(key, RENAMES[family].get(head, []))
            if ours is not None:
                out[ours] = tensor
                continue
            inner = key  # a bare encoder's file, or a head key that keeps its name (classifier, discriminator)
        fused = _FUSED_QKV.match(inner)
        if fused:
            for name, part in zip(("query", "key", "value"), tensor.chunk(3, dim=0)):
                out[f"encoder.layer.{fused.group(1)}.attention.self.{name}.{fused.group(2)}"] = part
            continue
        out[_rename(inner, RENAMES[family]["encoder"]) or inner] = tensor
    words = out.get("embeddings.word_embeddings.weight")
    decoder = state.get(TIED_DECODER[family][0])
    if decoder is not None and words is not None and not torch.equal(decoder, words):
        raise ValueError(f"the MLM decoder ({TIED_DECODER[family][0]}) is not tied to the word embeddings; "
                         "bertcore's MLM head is tied")
    return out


def hf_name(family: str, key: str, head: str) -> str:
    """The ``transformers`` name of one of our weights (``bert.``-prefixed in a head class) in the family's class
    for ``head``; ModernBERT's query / key / value all map to their fused ``layers.N.attn.Wqkv``."""
    prefix = PREFIX[family] if head != "base" else ""
    inner = key[len("bert."):] if key.startswith("bert.") else (key if head == "base" else None)
    if inner is None or (inner.startswith("pooler.") and head == "classification"):  # a head's weight
        name = inner or key
        return _rename(name, RENAMES[family].get(head, []), reverse=True) or name
    qkv = _OUR_QKV.match(inner) if family == "modernbert" else None
    if qkv:
        return f"{prefix}layers.{qkv.group(1)}.attn.Wqkv.{qkv.group(3)}"
    return prefix + (_rename(inner, RENAMES[family]["encoder"], reverse=True) or inner)


def state_to_hf(family: str, state: dict[str, torch.Tensor], head: str) -> dict[str, torch.Tensor]:
    """Our state dict (tied aliases dropped; head classes' keys start with ``bert.``) -> the family's names for
    ``transformers``' class of ``head`` (:data:`HF_CLASSES`, by :func:`hf_name`); query / key / value are fused
    into ModernBERT's ``Wqkv`` (in that order, as its ``view(..., 3, heads, d)`` reads them)."""
    out: dict[str, torch.Tensor] = {}
    fused: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        name = hf_name(family, key, head)
        qkv = _OUR_QKV.match(key.removeprefix("bert.")) if name.endswith(("Wqkv.weight", "Wqkv.bias")) else None
        if qkv:
            fused.setdefault(name, {})[qkv.group(2)] = tensor
        else:
            out[name] = tensor
    for name, parts in fused.items():
        out[name] = torch.cat([parts["query"], parts["key"], parts["value"]])
    return out


# ----------------------------------------------------------------------------- config.json
def _get(data: dict[str, Any], name: str, default: Any) -> Any:
    value = data.get(name, default)
    return default if value is None else value


def _bert_like(data: dict[str, Any]) -> dict[str, Any]:
    """The fields RoBERTa's and ELECTRA's configs share with BERT's, by the same names."""
    names = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
             "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
             "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id", "classifier_dropout")
    pet = data.get("position_embedding_type", "absolute")
    if pet not in (None, "absolute"):
        raise ConfigError(f"position_embedding_type {pet!r} is not supported (only 'absolute')")
    return {k: data[k] for k in names if data.get(k) is not None}


def config_from_hf(data: dict[str, Any]) -> BertConfig:
    """A family's ``config.json`` dict -> our :class:`BertConfig` (``family`` = its ``model_type``).

    Raises:
        ConfigError: a ``model_type`` not in :data:`OTHER_FAMILIES`, or a setting bertcore does not build (the
            message names it): untied MLM decoder, ModernBERT without the decoder bias or with a layer pattern
            other than "global every n-th", a RoPE type other than the default.
    """
    family = data.get("model_type")
    if family not in OTHER_FAMILIES:
        raise ConfigError(f"model_type {family!r} is not supported; supported: {', '.join(FAMILIES)}")
    if data.get("tie_word_embeddings") is False:
        raise ConfigError(f"this {family} config does not tie the MLM decoder to the word embeddings; bertcore's "
                          "MLM head is tied")
    labels = data.get("id2label")
    common: dict[str, Any] = {"family": family, "base_pooler": family == "roberta"}
    if isinstance(labels, dict) and labels:
        common.update(id2label={int(k): v for k, v in labels.items()}, num_labels=len(labels))
    if family == "roberta":
        fields = _bert_like(data) | {"padding_aware_positions": True, "head_act": "gelu"}
    elif family == "electra":
        fields = _bert_like(data) | {"embedding_size": _get(data, "embedding_size", 128), "head_act": "gelu",
                                     "pooler_act": "gelu"}
    elif family == "distilbert":
        fields = {"vocab_size": _get(data, "vocab_size", 30522), "hidden_size": _get(data, "dim", 768),
                  "num_hidden_layers": _get(data, "n_layers", 6), "num_attention_heads": _get(data, "n_heads", 12),
                  "intermediate_size": _get(data, "hidden_dim", 3072), "hidden_act": _get(data, "activation", "gelu"),
                  "hidden_dropout_prob": _get(data, "dropout", 0.1),
                  "attention_probs_dropout_prob": _get(data, "attention_dropout", 0.1),
                  "max_position_embeddings": _get(data, "max_position_embeddings", 512), "type_vocab_size": 0,
                  "initializer_range": _get(data, "initializer_range", 0.02), "layer_norm_eps": 1e-12,
                  "pad_token_id": _get(data, "pad_token_id", 0),
                  "classifier_dropout": _get(data, "seq_classif_dropout", 0.2), "pooler_act": "relu"}
    else:
        fields = _modernbert_fields(data)
    try:
        return BertConfig(**(fields | common))
    except TypeError as exc:
        raise ConfigError(str(exc)) from exc


def _modernbert_fields(data: dict[str, Any]) -> dict[str, Any]:
    layers = _get(data, "num_hidden_layers", 22)
    every = _get(data, "global_attn_every_n_layers", 3)
    types = data.get("layer_types")
    if types:
        globals_ = [i for i, t in enumerate(types) if t == "full_attention"]
        every = globals_[1] if len(globals_) > 1 else max(layers, 1)
        expected = ["full_attention" if i % every == 0 else "sliding_attention" for i in range(layers)]
        if list(types) != expected:
            raise ConfigError(f"layer_types {types} is not 'global every n-th layer'; bertcore builds only that "
                              "ModernBERT pattern")
    rope = data.get("rope_parameters") or {}
    theta = {}
    for kind, old, default in (("full_attention", "global_rope_theta", 160_000.0),
                               ("sliding_attention", "local_rope_theta", 10_000.0)):
        params = rope.get(kind) or {}
        if params.get("rope_type", "default") != "default":
            raise ConfigError(f"RoPE type {params['rope_type']!r} is not supported (only the default rotation)")
        theta[kind] = float(params.get("rope_theta", data.get(old, default)))
    if data.get("decoder_bias") is False:
        raise ConfigError("this ModernBERT has no decoder bias; bertcore's MLM head has one")
    act = _get(data, "classifier_activation", "gelu")
    return {"vocab_size": _get(data, "vocab_size", 50368), "hidden_size": _get(data, "hidden_size", 768),
            "num_hidden_layers": layers, "num_attention_heads": _get(data, "num_attention_heads", 12),
            "intermediate_size": _get(data, "intermediate_size", 1152),
            "hidden_act": _get(data, "hidden_activation", "gelu"),
            "hidden_dropout_prob": float(_get(data, "mlp_dropout", 0.0)),
            "attention_probs_dropout_prob": float(_get(data, "attention_dropout", 0.0)),
            "max_position_embeddings": _get(data, "max_position_embeddings", 8192), "type_vocab_size": 0,
            "initializer_range": _get(data, "initializer_range", 0.02), "layer_norm_eps": _get(data, "norm_eps", 1e-5),
            "pad_token_id": _get(data, "pad_token_id", 50283),
            "classifier_dropout": float(_get(data, "classifier_dropout", 0.0)), "pre_layer_norm": True,
            "position_embedding_type": "rotary", "rope_theta": theta["full_attention"],
            "local_rope_theta": theta["sliding_attention"], "local_attention": _get(data, "local_attention", 128),
            "global_attn_every_n_layers": every, "attention_bias": bool(data.get("attention_bias", False)),
            "mlp_bias": bool(data.get("mlp_bias", False)), "norm_bias": bool(data.get("norm_bias", False)),
            "head_bias": bool(data.get("classifier_bias", False)), "gated_ffn": True, "first_attention_norm": False,
            "head_act": act, "pooler_act": act, "pooler_norm": True,
            "classifier_pooling": _get(data, "classifier_pooling", "cls")}


def config_to_hf(config: BertConfig, head: str) -> dict[str, Any]:
    """Our config -> the family's ``config.json`` dict (with ``architectures`` for ``head``).

    Raises:
        ValueError: a head the family has no ``transformers`` class for (NSP for RoBERTa, ...).
    """
    family = config.family
    if head not in HF_CLASSES[family]:
        raise ValueError(f"{family} has no {head} head in transformers (it has {', '.join(HF_CLASSES[family])})")
    c = config
    data: dict[str, Any] = {"model_type": family, "architectures": [HF_CLASSES[family][head]],
                            "vocab_size": c.vocab_size, "pad_token_id": c.pad_token_id,
                            "initializer_range": c.initializer_range,
                            "max_position_embeddings": c.max_position_embeddings, "tie_word_embeddings": True}
    if family in ("roberta", "electra"):
        data |= {k: getattr(c, k) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "intermediate_size", "hidden_act", "hidden_dropout_prob",
                                            "attention_probs_dropout_prob", "type_vocab_size", "layer_norm_eps",
                                            "classifier_dropout")}
        data["position_embedding_type"] = "absolute"
        if family == "electra":
            data["embedding_size"] = c.embedding_width
    elif family == "distilbert":
        data |= {"dim": c.hidden_size, "n_layers": c.num_hidden_layers, "n_heads": c.num_attention_heads,
                 "hidden_dim": c.intermediate_size, "activation": c.hidden_act, "dropout": c.hidden_dropout_prob,
                 "attention_dropout": c.attention_probs_dropout_prob, "sinusoidal_pos_embds": False,
                 "seq_classif_dropout": c.classifier_dropout if c.classifier_dropout is not None else 0.2}
    else:
        data |= {"hidden_size": c.hidden_size, "num_hidden_layers": c.num_hidden_layers,
                 "num_attention_heads": c.num_attention_heads, "intermediate_size": c.intermediate_size,
                 "hidden_activation": c.hidden_act, "norm_eps": c.layer_norm_eps, "norm_bias": c.norm_bias,
                 "attention_bias": c.attention_bias, "mlp_bias": c.mlp_bias, "classifier_bias": c.head_bias,
                 "classifier_activation": c.pooler_act, "classifier_pooling": c.classifier_pooling,
                 "decoder_bias": True, "local_attention": c.local_attention or 2 * c.max_position_embeddings,
                 "attention_dropout": c.attention_probs_dropout_prob, "mlp_dropout": c.hidden_dropout_prob,
                 "embedding_dropout": c.hidden_dropout_prob, "classifier_dropout": c.classifier_dropout or 0.0,
                 "layer_types": ["full_attention" if c.is_global_layer(i) else "sliding_attention"
                                 for i in range(c.num_hidden_layers)],
                 "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": c.rope_theta},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": c.local_rope_theta}}}
        # ModernBertConfig's default special ids (answerdotai's vocabulary) fall outside a smaller one (a run's own
        # WordPiece): unset there, as transformers warns about them; the tokenizer files carry the real ones
        data |= {k: None for k, v in (("bos_token_id", 50281), ("cls_token_id", 50281), ("eos_token_id", 50282),
                                      ("sep_token_id", 50282)) if v >= c.vocab_size}
    if c.id2label is not None:
        data["id2label"] = {str(k): v for k, v in c.id2label.items()}
        data["label2id"] = {v: k for k, v in c.id2label.items()}
    elif c.num_labels != 2:
        data["id2label"] = {str(i): f"LABEL_{i}" for i in range(c.num_labels)}
        data["label2id"] = {f"LABEL_{i}": i for i in range(c.num_labels)}
    return data
