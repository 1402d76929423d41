"""BERT hyper-parameters as one typed dataclass with Hugging Face field names.

Mirrors ``transformers.BertConfig`` (``models/bert/configuration_bert.py``) so an HF
``config.json`` reads straight in and a config we write is read by ``transformers``.
Source for the sizes: Devlin et al. 2019, section 3 (BERT-base / BERT-large) and
Turc et al. 2019 ("Well-Read Students Learn Better", the BERT miniatures).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish")
#: the ``model_type`` of every architecture bertcore builds (:mod:`bertcore.modeling.families` reads and writes the
#: others)
FAMILIES = ("bert", "roberta", "distilbert", "electra", "modernbert")
POSITION_TYPES = ("absolute", "rotary")


class ConfigError(ValueError):
    """A configuration that cannot describe a working BERT (the message says which field)."""


def read_json_object(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a ``config.json``): the one reader of config files.

    Raises:
        ConfigError: unreadable, not JSON, or not an object (the message names the file).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} is not a JSON object")
    return data


@dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder (HF ``BertConfig`` field names and defaults).

    Attributes:
        vocab_size: WordPiece vocabulary size (rows of ``word_embeddings``).
        hidden_size: width H of every hidden state.
        num_hidden_layers: number L of encoder layers.
        num_attention_heads: heads per layer; must divide ``hidden_size``.
        intermediate_size: width of the feed-forward inner layer (4H in the paper).
        hidden_act: feed-forward activation (``"gelu"`` is the exact erf GELU, as HF).
        hidden_dropout_prob / attention_probs_dropout_prob: dropout rates in [0, 1).
        max_position_embeddings: number of learned positions (maximum sequence length).
        type_vocab_size: number of segment ids (2: sentence A / sentence B).
        initializer_range: std of the normal init of weights.
        layer_norm_eps: epsilon of every LayerNorm.
        pad_token_id: id of [PAD] (its word embedding row starts at zero).
        num_labels: classes of ``BertForSequenceClassification``.
        classifier_dropout: dropout before the classifier (None: hidden_dropout_prob).
        pre_layer_norm: our extension (not in HF's BertConfig): LayerNorm before each sub-layer
            (pre-LN, Xiong et al. 2020) instead of BERT's post-LN. Post-LN models are saved as
            ``transformers`` BERT; pre-LN ones as ``transformers``' RobertaPreLayerNorm, the same function
            (:mod:`bertcore.modeling.hf_format`).

    The fields below (our extension) make one configuration of the same modules per model family
    (:mod:`bertcore.modeling.families` reads each family's ``config.json`` into them); their defaults are classic BERT:
        family: the ``model_type`` the checkpoint is read from and written as (one of :data:`FAMILIES`).
        embedding_size: ELECTRA's embedding width E (None: ``hidden_size``); E != H adds ``embeddings_project``.
        position_embedding_type: ``"absolute"`` (a learned table) or ``"rotary"`` (RoPE in every attention
            layer, no table; Su et al. 2021).
        padding_aware_positions: RoBERTa (fairseq ``make_positions``): positions start at ``pad_token_id + 1``
            and a [PAD] token reads row ``pad_token_id``.
        rope_theta / local_rope_theta: RoPE bases of global and of local (sliding-window) layers.
        local_attention: width of ModernBERT's sliding window (a token sees keys within ``local_attention // 2``);
            0: every layer global. global_attn_every_n_layers: layer i is global when ``i % n == 0``.
        attention_bias / mlp_bias / norm_bias / head_bias: biases of q/k/v/o, of the feed-forward, of every
            LayerNorm, of the head's and pooler's ``dense`` (ModernBERT has none).
        gated_ffn: GeGLU (Shazeer 2020): the up-projection gives 2I values, ``act(first half) * second half``.
        first_attention_norm: False: layer 0 has no attention LayerNorm (ModernBERT: the embedding norm is it).
        head_act: the MLM head's activation (None: ``hidden_act``; RoBERTa's and ELECTRA's heads use GELU).
        pooler_act / pooler_norm / classifier_pooling: the sentence head before ``classifier``: BERT's pooler is
            ``tanh(dense(h[CLS]))``; DistilBERT's uses ReLU, ELECTRA's GELU, ModernBERT's GELU then a LayerNorm,
            over [CLS] or the ``"mean"`` of the tokens.
        base_pooler: whether the bare encoder (``BertModel``) of this family has a pooler.

    Raises:
        ConfigError: from ``__post_init__`` when a field is out of range.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    num_labels: int = 2
    classifier_dropout: float | None = None
    pre_layer_norm: bool = False
    id2label: dict[int, str] | None = field(default=None)
    family: str = "bert"
    embedding_size: int | None = None
    position_embedding_type: str = "absolute"
    padding_aware_positions: bool = False
    rope_theta: float = 10000.0
    local_rope_theta: float = 10000.0
    local_attention: int = 0
    global_attn_every_n_layers: int = 1
    attention_bias: bool = True
    mlp_bias: bool = True
    norm_bias: bool = True
    head_bias: bool = True
    gated_ffn: bool = False
    first_attention_norm: bool = True
    head_act: str | None = None
    pooler_act: str = "tanh"
    pooler_norm: bool = False
    classifier_pooling: str = "cls"
    base_pooler: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "num_labels", "global_attn_every_n_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.type_vocab_size, int) or isinstance(self.type_vocab_size, bool) \
                or self.type_vocab_size < (1 if self.family == "bert" else 0):
            raise ConfigError(f"type_vocab_size must be a positive integer (0: no segments, for the families "
                              f"without them), got {self.type_vocab_size!r}")
        self._check_family()
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}); head size would not be an integer")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout < 1.0:
            raise ConfigError(f"classifier_dropout must be in [0, 1) or None, got {self.classifier_dropout!r}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not supported; use one of {SUPPORTED_ACTIVATIONS}")
        if self.layer_norm_eps <= 0:
            raise ConfigError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id {self.pad_token_id} is outside the vocabulary (size {self.vocab_size})")
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}

    def _check_family(self) -> None:
        """The family fields' checks (see the class docstring)."""
        if self.family not in FAMILIES:
            raise ConfigError(f"family {self.family!r} is not supported; supported: {', '.join(FAMILIES)}")
        if self.position_embedding_type not in POSITION_TYPES:
            raise ConfigError(f"position_embedding_type {self.position_embedding_type!r} is not supported; use one "
                              f"of {POSITION_TYPES}")
        if self.position_embedding_type == "rotary" and self.head_size % 2:
            raise ConfigError(f"rotary positions rotate pairs of dimensions: the head size ({self.head_size}) "
                              "must be even")
        if self.embedding_size is not None and (not isinstance(self.embedding_size, int) or self.embedding_size < 1):
            raise ConfigError(f"embedding_size must be a positive integer or None, got {self.embedding_size!r}")
        for name in ("head_act", "pooler_act"):
            value = getattr(self, name)
            if value is not None and value not in (*SUPPORTED_ACTIVATIONS, "tanh"):
                raise ConfigError(f"{name} {value!r} is not supported; use one of {SUPPORTED_ACTIVATIONS} or tanh")
        if self.classifier_pooling not in ("cls", "mean"):
            raise ConfigError(f"classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}")
        if self.padding_aware_positions and self.max_position_embeddings <= self.pad_token_id + 1:
            raise ConfigError(f"max_position_embeddings {self.max_position_embeddings} leaves no position after "
                              f"the padding offset {self.pad_token_id + 1}")
        if self.local_attention < 0 or self.rope_theta <= 0 or self.local_rope_theta <= 0:
            raise ConfigError("local_attention must be >= 0 and the RoPE bases > 0")

    @property
    def max_sequence_length(self) -> int:
        """The longest input in tokens: the position table's rows, less RoBERTa's ``pad_token_id + 1`` offset."""
        offset = self.pad_token_id + 1 if self.padding_aware_positions else 0
        return self.max_position_embeddings - offset

    @property
    def embedding_width(self) -> int:
        """Width of the embedding tables: ``embedding_size`` (ELECTRA) or ``hidden_size``."""
        return self.embedding_size or self.hidden_size

    def is_global_layer(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) attends to every token (ModernBERT: every n-th layer; else all)."""
        return self.local_attention == 0 or index % self.global_attn_every_n_layers == 0

    @property
    def head_size(self) -> int:
        """Width of one attention head, ``hidden_size // num_attention_heads``."""
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes: Any) -> "BertConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    # ----------------------------------------------------------------- (de)serialisation
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BertConfig":
        """Build from a plain BERT (``model_type: bert``) dict; unknown keys (``architectures``, ...) are ignored.
        A checkpoint folder's ``config.json`` may be in another format (a pre-LN run's is RobertaPreLayerNorm):
        read it with :func:`bertcore.modeling.hf_format.config_from_dict` or
        :func:`bertcore.modeling.hf_format.read_config_file`.

        Raises:
            ConfigError: if ``model_type`` names another architecture, or a field is invalid,
                or ``position_embedding_type`` is not ``"absolute"``.
        """
        return cls.from_bert_dict(data)

    @classmethod
    def from_bert_dict(cls, data: dict[str, Any]) -> "BertConfig":
        """Build from a ``model_type: bert`` dict (our ``pre_layer_norm`` flag included); see :meth:`from_dict`."""
        model_type = data.get("model_type", "bert")
        if model_type != "bert":
            raise ConfigError(f"this is a {model_type!r} config; BERT Explorer loads the model types "
                              f"{', '.join(FAMILIES)} (and 'roberta-prelayernorm' for its own pre-LayerNorm runs)")
        pet = data.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise ConfigError(f"position_embedding_type {pet!r} is not supported (only 'absolute', as in BERT)")
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        if "id2label" in kwargs and kwargs["id2label"] is not None:
            kwargs["id2label"] = {int(k): v for k, v in kwargs["id2label"].items()}
            kwargs.setdefault("num_labels", len(kwargs["id2label"]))
            kwargs["num_labels"] = len(kwargs["id2label"])
        try:
            return cls(**kwargs)
        except TypeError as exc:  # wrong types in a hand-written json
            raise ConfigError(str(exc)) from exc

    @classmethod
    def from_json_file(cls, path: str | Path) -> "BertConfig":
        """Read an HF ``config.json``.

        Raises:
            ConfigError: unreadable JSON or invalid fields (message names the file).
        """
        return cls.from_dict(read_json_object(path))

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (our own field names, JSON-serialisable); the family fields only where they
        differ from classic BERT's defaults (a BERT config's dict is the same as before they existed)."""
        data = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in FAMILY_FIELDS and data[f.name] == f.default:
                del data[f.name]
        return data

    def to_hf_dict(self) -> dict[str, Any]:
        """A dict that ``transformers.BertConfig.from_dict`` reads (``config.json``)."""
        data = {k: v for k, v in self.to_dict().items() if k not in ("pre_layer_norm", "id2label", "num_labels")}
        data.update(model_type="bert", position_embedding_type="absolute")
        if self.id2label is not None:
            data["id2label"] = {str(k): v for k, v in self.id2label.items()}
            data["label2id"] = {v: k for k, v in self.id2label.items()}
        elif self.num_labels != 2:
            data["id2label"] = {str(i): f"LABEL_{i}" for i in range(self.num_labels)}
            data["label2id"] = {f"LABEL_{i}": i for i in range(self.num_labels)}
        if self.pre_layer_norm:
            # HF's BertConfig ignores it; checkpoints use bertcore.modeling.hf_format instead
            data["pre_layer_norm"] = True
        return data

    def save_json(self, path: str | Path) -> None:
        """Write ``config.json`` of a post-LN model (plain BERT, as transformers reads it).

        Raises:
            ConfigError: a pre-LN config: transformers' BERT would read it as post-LN and compute another model;
                :func:`bertcore.modeling.checkpoint.save_pretrained` writes pre-LN models in a format it reads right.
        """
        if self.pre_layer_norm:
            raise ConfigError("a pre-LayerNorm config.json is written by save_pretrained "
                              "(bertcore.modeling.hf_format): as plain BERT, transformers would load it as a "
                              "different (post-LN) model")
        data = self.to_hf_dict()
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


#: the fields that configure a model family (:class:`BertConfig`'s docstring); BERT's defaults are not written
FAMILY_FIELDS = frozenset(f.name for f in dataclasses.fields(BertConfig)
                          if f.name not in {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "intermediate_size", "hidden_act", "hidden_dropout_prob",
                                            "attention_probs_dropout_prob", "max_position_embeddings",
                                            "type_vocab_size", "initializer_range", "layer_norm_eps",
                                            "pad_token_id", "num_labels", "classifier_dropout", "pre_layer_norm",
                                            "id2label"})


# Named presets. nano is sized for a CPU pretraining run (a live mini-training in the app);
# tiny/mini/small/medium are Turc et al.'s miniatures; base/large are Devlin et al.'s.
PRESETS: dict[str, BertConfig] = {
    "nano": BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024),
    "tiny": BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "mini": BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "small": BertConfig(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
    "medium": BertConfig(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, intermediate_size=2048),
    "base": BertConfig(),
    "large": BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}


def preset(name: str, **changes: Any) -> BertConfig:
    """A copy of a named preset, optionally with fields changed.

    Raises:
        ConfigError: unknown name (the message lists the presets).
    """
    try:
        base = PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}") from None
    return base.replace(**changes)
