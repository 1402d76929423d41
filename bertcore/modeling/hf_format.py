"""How a checkpoint folder is laid out so that ``transformers`` loads exactly the model bertcore has, or refuses.

Three formats, picked by :func:`format_for` from the model's config:

- ``"bert"``: post-LN BERT, plain ``transformers`` BERT (``model_type: bert``); every Bert and Auto class loads it.
- ``"roberta-prelayernorm"``: a pre-LN model (Xiong et al. 2020) whose feed-forward activation is ``gelu``. It is
  the same function as ``transformers``' ``RobertaPreLayerNorm`` (``models/roberta_prelayernorm``), weight for
  weight: LayerNorm before attention (``attention.LayerNorm``) and before the feed-forward block
  (``intermediate.LayerNorm``), residual adds without a LayerNorm, one final LayerNorm after the last layer
  (``roberta_prelayernorm.LayerNorm``), an embedding LayerNorm as ours, token-type embeddings as ours, the pooler
  as ours, and an MLM head ``dense -> GELU(erf) -> LayerNorm -> decoder`` tied to the word embeddings, as ours
  when ``hidden_act == "gelu"``. RoBERTa numbers positions from ``pad_token_id + 1`` (a [PAD] token gets
  position ``pad_token_id``): the position table is written with ``pad_token_id + 1`` extra rows in front, so
  ``max_position_embeddings`` grows by that much and a token at position i reads the same vector as ours.
  Consequences, all documented in the card: logits at [PAD] positions differ (they read another position vector;
  attention never looks at them, so no other token changes); a literal [PAD] token inside unpadded text would shift
  the later positions in ``transformers``; ``output_hidden_states[-1]`` is before the final LayerNorm in
  ``transformers`` (``last_hidden_state`` is after it, as ours). The NSP head (``cls.seq_relationship``) has no
  ``RobertaPreLayerNorm`` class: it is kept in the project's own file :data:`NSP_FILE`. A fine-tuned classifier
  maps exactly onto ``RobertaPreLayerNormForSequenceClassification`` (``dense`` + tanh on the first token, then
  ``out_proj``, is our pooler then classifier).
  ``config.json`` also carries :data:`GUARD_KEY`, a nested ``model_type: bert`` dict that transformers'
  ``BertConfig`` picks up when a Bert class is asked to load the folder, and that fails its validation with a
  message naming the reason and the loading line: a Bert class raises instead of loading a different model.
- ``"bertcore"``: a pre-LN model with another activation: no ``transformers`` class computes it (RoBERTa's MLM head
  is always erf GELU). ``config.json`` has ``model_type: bert`` with a message where ``hidden_size`` belongs, so
  every ``transformers`` class refuses it with that message; the real config is under :data:`OWN_KEY`.

Older pre-LN checkpoints (``model_type: bert`` with ``pre_layer_norm: true``; :data:`LEGACY_PRELN`) load here
unchanged; ``transformers`` loads them silently wrong (it drops the final LayerNorm and ignores the flag), so the
app offers to rewrite them (:func:`reexport_checkpoint`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from . import families
from .config import BertConfig, ConfigError, read_json_object

BERT = "bert"
PRELN = "roberta-prelayernorm"
BERTCORE_ONLY = "bertcore"
LEGACY_PRELN = "legacy-pre-ln"
#: the project's own file for the NSP head of a pre-LN checkpoint (``cls.seq_relationship.weight`` / ``.bias``)
NSP_FILE = "nsp_head.safetensors"
#: config key of the nested dict that makes transformers' Bert classes refuse a RobertaPreLayerNorm folder
GUARD_KEY = "bert_explorer_guard"
#: config key of the true config of a folder no transformers class can load
OWN_KEY = "bertcore_config"
PREFIX = "roberta_prelayernorm."

#: ``transformers`` class names per bertcore head and format (what ``architectures`` says, what the card loads)
HF_CLASSES = {
    BERT: {"base": "BertModel", "mlm": "BertForMaskedLM", "pretraining": "BertForPreTraining",
           "classification": "BertForSequenceClassification"},
    PRELN: {"base": "RobertaPreLayerNormModel", "mlm": "RobertaPreLayerNormForMaskedLM",
            "pretraining": "RobertaPreLayerNormForMaskedLM",
            "classification": "RobertaPreLayerNormForSequenceClassification"},
}
AUTO_CLASSES = {"base": "AutoModel", "mlm": "AutoModelForMaskedLM", "pretraining": "AutoModelForPreTraining",
                "classification": "AutoModelForSequenceClassification"}
OUR_CLASSES = {"BertModel": "base", "BertForMaskedLM": "mlm", "BertForPreTraining": "pretraining",
               "BertForSequenceClassification": "classification", "ElectraForPreTraining": "rtd"}


def format_for(config: BertConfig) -> str:
    """The format a model with this config is saved in: :data:`BERT`, :data:`PRELN` or :data:`BERTCORE_ONLY`;
    another family's own (its ``model_type``, :mod:`bertcore.modeling.families`)."""
    if config.classifier_pooling == "mean" and config.family != "modernbert":
        return BERTCORE_ONLY  # only ModernBertForSequenceClassification has a mean-pooled head
    if config.family != BERT:
        return config.family
    if not config.pre_layer_norm:
        return BERT
    return PRELN if config.hidden_act == "gelu" else BERTCORE_ONLY


def why_not_transformers(config: BertConfig) -> str | None:
    """Why no ``transformers`` class computes this model (None when one does)."""
    if format_for(config) != BERTCORE_ONLY:
        return None
    if config.classifier_pooling == "mean":
        return ("a classifier on the mean of the token vectors (classifier_pooling 'mean'): transformers' "
                f"{config.family} classes read the [CLS] vector only, so they would compute other logits")
    return (f"a pre-LayerNorm BERT with hidden_act {config.hidden_act!r}: transformers' only pre-LayerNorm "
            "BERT-family model (RobertaPreLayerNorm) always uses GELU in its MLM head, and its Bert classes are "
            "post-LayerNorm")


def bertcore_line(head: str, path: str = "path/to/this/folder") -> str:
    """The one line that loads a checkpoint with bertcore (``head`` as
    :data:`bertcore.loading.sources.HEAD_CLASSES`)."""
    cls = {v: k for k, v in OUR_CLASSES.items()}.get(head, "BertForPreTraining")
    return f'from bertcore.modeling.heads import {cls}; model = {cls}.from_pretrained("{path}")'.replace(
        "from bertcore.modeling.heads import BertModel", "from bertcore.modeling.model import BertModel").replace(
        "from bertcore.modeling.heads import Electra", "from bertcore.modeling.electra import Electra")


def _guard_message(head: str) -> str:
    auto = "AutoModelForSequenceClassification" if head == "classification" else "AutoModelForMaskedLM"
    return ("NOT A BERT CHECKPOINT: this is a pre-LayerNorm BERT written by BERT Explorer in transformers' "
            "RobertaPreLayerNorm format (model_type roberta-prelayernorm). transformers' Bert classes are "
            "post-LayerNorm and would compute a different model, so they refuse it. Load it with "
            f"transformers.{auto}.from_pretrained(folder) (or AutoModel), or with bertcore: "
            + bertcore_line(head, "folder"))


def family_guard(family: str, head: str) -> dict[str, Any]:
    """The :data:`GUARD_KEY` dict of a folder of another family (:mod:`bertcore.modeling.families`) written by
    bertcore: its ``transformers`` class computes the model; a Bert class asked to load it would build a randomly
    initialised BERT (the names do not match) and so refuses, with this message."""
    name = families.HF_CLASSES[family].get(head, families.HF_CLASSES[family]["base"])
    message = (f"NOT A BERT CHECKPOINT: this is a {family} model written by BERT Explorer in transformers' own "
               f"format (model_type {family}). transformers' Bert classes would build a different, randomly "
               f"initialised model from it, so they refuse it. Load it with transformers.{name}.from_pretrained"
               f"(folder) (or the Auto class), or with bertcore: " + bertcore_line(head, "folder"))
    return {"model_type": "bert", "hidden_size": message, "written_by": "BERT Explorer"}


def _refusal_message(config: BertConfig, head: str) -> str:
    return (f"NOT LOADABLE BY TRANSFORMERS: this BERT Explorer checkpoint is {why_not_transformers(config)}; "
            "transformers refuses it rather than load a different model. Load it with bertcore: "
            + bertcore_line(head, "folder"))


# ----------------------------------------------------------------------------- config.json
def config_dict(config: BertConfig, head: str, class_name: str) -> dict[str, Any]:
    """``config.json`` of a model of bertcore class ``class_name`` (``head`` its kind) in its format."""
    fmt = format_for(config)
    if fmt == BERT:
        data = config.to_hf_dict()
        data["architectures"] = [class_name]
        return data
    if fmt == BERTCORE_ONLY:
        return {"model_type": "bert", "hidden_size": _refusal_message(config, head), "architectures": [class_name],
                OWN_KEY: config.to_dict() | {"id2label": None if config.id2label is None else
                                              {str(k): v for k, v in config.id2label.items()}}}
    data = config.to_hf_dict()
    data.pop("pre_layer_norm", None)
    data.pop("position_embedding_type", None)
    offset = config.pad_token_id + 1
    data.update(model_type=PRELN, max_position_embeddings=config.max_position_embeddings + offset,
                architectures=[HF_CLASSES[PRELN][head]], tie_word_embeddings=True, bos_token_id=None,
                eos_token_id=None)
    data[GUARD_KEY] = {"model_type": "bert", "hidden_size": _guard_message(head), "written_by": "BERT Explorer",
                       "position_offset": offset, "nsp_head_file": NSP_FILE if head == "pretraining" else None,
                       "bertcore_class": class_name}
    return data


def read_format(data: dict[str, Any]) -> str:
    """The format of a ``config.json`` dict (:data:`LEGACY_PRELN` for an older pre-LN ``bert`` config)."""
    if isinstance(data.get(OWN_KEY), dict):
        return BERTCORE_ONLY
    model_type = data.get("model_type", "bert")
    if model_type in families.OTHER_FAMILIES:
        return model_type
    if model_type == PRELN:
        return PRELN
    if model_type == "bert" and data.get("pre_layer_norm"):
        return LEGACY_PRELN
    return BERT


def folder_format(folder: str | Path) -> str | None:
    """The format of a checkpoint folder's ``config.json``; None when it cannot be read."""
    try:
        data = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return read_format(data) if isinstance(data, dict) else None


def config_from_dict(data: dict[str, Any]) -> BertConfig:
    """A :class:`BertConfig` from a ``config.json`` dict in any of the formats.

    Raises:
        ConfigError: an unknown ``model_type``, a RobertaPreLayerNorm config this model cannot represent, bad fields.
    """
    fmt = read_format(data)
    if fmt == BERTCORE_ONLY:
        return BertConfig.from_bert_dict({**data[OWN_KEY], "model_type": "bert"})
    if fmt in families.OTHER_FAMILIES:
        return families.config_from_hf(data)
    if fmt != PRELN:
        return BertConfig.from_bert_dict(data)
    pad = data.get("pad_token_id")
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ConfigError("a roberta-prelayernorm config needs an integer pad_token_id (positions start after it)")
    act = data.get("hidden_act", "gelu")
    if act != "gelu":
        raise ConfigError(f"this roberta-prelayernorm config has hidden_act {act!r}; its MLM head uses GELU, so "
                          "bertcore (whose head uses hidden_act) cannot represent it exactly")
    if data.get("tie_word_embeddings") is False:
        raise ConfigError("this roberta-prelayernorm config does not tie the MLM decoder to the word embeddings; "
                          "bertcore's MLM head is tied")
    offset = pad + 1
    mpe = data.get("max_position_embeddings", 512)
    if not isinstance(mpe, int) or mpe <= offset:
        raise ConfigError(f"max_position_embeddings {mpe!r} leaves no position after the padding offset {offset}")
    fields = {k: v for k, v in data.items() if k not in ("model_type", GUARD_KEY)}
    fields.update(model_type="bert", pre_layer_norm=True, max_position_embeddings=mpe - offset)
    return BertConfig.from_bert_dict(fields)


def position_offset(data: dict[str, Any]) -> int:
    """Rows in front of the position table in this format (``pad_token_id + 1`` for RobertaPreLayerNorm, else 0)."""
    return int(data["pad_token_id"]) + 1 if read_format(data) == PRELN else 0


# ----------------------------------------------------------------------------- weights
_LAYER_LN_OUT = [(re.compile(r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\."),
                  r"encoder.layer.\1.attention.LayerNorm."),
                 (re.compile(r"^encoder\.layer\.(\d+)\.output\.LayerNorm\."),
                  r"encoder.layer.\1.intermediate.LayerNorm.")]
_HEAD_OUT = {"cls.predictions.transform.dense.": "lm_head.dense.",
             "cls.predictions.transform.LayerNorm.": "lm_head.layer_norm.",
             "cls.predictions.bias": "lm_head.bias"}


def to_preln_state(state: dict[str, torch.Tensor], config: BertConfig,
                   head: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Our state dict (tied aliases already dropped) -> ``(model.safetensors tensors, NSP-file tensors)`` in
    RobertaPreLayerNorm names; the position table gets ``pad_token_id + 1`` zero rows in front."""
    main: dict[str, torch.Tensor] = {}
    nsp: dict[str, torch.Tensor] = {}
    offset = config.pad_token_id + 1
    for key, tensor in state.items():
        k = key[5:] if key.startswith("bert.") else key
        if k.startswith("cls.seq_relationship."):
            nsp[k] = tensor
            continue
        if k.startswith("cls.predictions.decoder."):
            continue  # tied to the word embeddings / lm_head.bias
        if k.startswith("classifier."):
            main["classifier.out_proj." + k[len("classifier."):]] = tensor
            continue
        if k.startswith("cls."):
            for ours, theirs in _HEAD_OUT.items():
                if k.startswith(ours):
                    main[theirs + k[len(ours):]] = tensor
                    break
            else:
                raise ValueError(f"no RobertaPreLayerNorm name for {key}")
            continue
        if k == "embeddings.position_embeddings.weight":
            tensor = torch.cat([tensor.new_zeros(offset, tensor.size(1)), tensor])
        elif k.startswith("encoder.LayerNorm."):
            k = "LayerNorm." + k[len("encoder.LayerNorm."):]
        else:
            for pattern, repl in _LAYER_LN_OUT:
                k = pattern.sub(repl, k)
        if k.startswith("pooler.") and head == "classification":
            main["classifier.dense." + k[len("pooler.dense."):]] = tensor.clone()  # two files entries, two tensors
        main[PREFIX + k] = tensor
    return main, nsp


_LAYER_LN_IN = [(re.compile(r"^encoder\.layer\.(\d+)\.attention\.LayerNorm\."),
                 r"encoder.layer.\1.attention.output.LayerNorm."),
                (re.compile(r"^encoder\.layer\.(\d+)\.intermediate\.LayerNorm\."),
                 r"encoder.layer.\1.output.LayerNorm.")]
_HEAD_IN = {v: k for k, v in _HEAD_OUT.items()}


def from_preln_state(state: dict[str, torch.Tensor], offset: int) -> dict[str, torch.Tensor]:
    """RobertaPreLayerNorm names (with or without the ``roberta_prelayernorm.`` prefix, as transformers writes them
    from a head class or from ``RobertaPreLayerNormModel``) -> ours (backbone keys without ``bert.``, which
    :func:`bertcore.modeling.checkpoint.match_state_dict` adds); the ``offset`` front rows of the position table are
    dropped.

    Raises:
        ValueError: an MLM decoder that is not tied to the word embeddings (bertcore's is).
    """
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        k = key[len(PREFIX):] if key.startswith(PREFIX) else key
        if k.startswith("lm_head.decoder."):
            continue  # checked below
        if k.startswith("lm_head."):
            for theirs, ours in _HEAD_IN.items():
                if k.startswith(theirs):
                    out[ours + k[len(theirs):]] = tensor
                    break
            else:
                out[k] = tensor  # reported as unexpected by the loader
            continue
        if k.startswith("classifier.out_proj."):
            out["classifier." + k[len("classifier.out_proj."):]] = tensor
            continue
        if k.startswith("classifier.dense."):
            out.setdefault("pooler.dense." + k[len("classifier.dense."):], tensor)
            continue
        if k == "embeddings.position_embeddings.weight":
            tensor = tensor[offset:]
        elif k.startswith("LayerNorm."):
            k = "encoder." + k
        else:
            for pattern, repl in _LAYER_LN_IN:
                k = pattern.sub(repl, k)
        if k.startswith("pooler."):
            out[k] = tensor  # a real pooler wins over classifier.dense
            continue
        out[k] = tensor
    words = out.get("embeddings.word_embeddings.weight")
    decoder = state.get("lm_head.decoder.weight")
    if decoder is not None and words is not None and not torch.equal(decoder, words):
        raise ValueError("the MLM decoder (lm_head.decoder.weight) is not tied to the word embeddings; "
                         "bertcore's MLM head is tied")
    return out


def read_config_file(path: str | Path) -> BertConfig:
    """A :class:`BertConfig` from a ``config.json`` file in any of the formats (:func:`config_from_dict`).

    Raises:
        ConfigError: unreadable JSON, not an object, or invalid fields (the message names the file).
    """
    data = read_json_object(path)
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
