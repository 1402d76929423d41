"""The model and tokenizer a run starts from, and the checks the Train page shows before a launch.

``init``: a preset (from scratch, random weights: BERT section 3 / Turc et al. 2019 sizes), the
packaged MiniLM, a run directory (its last checkpoint), a local HF folder, or a hub id. Heads the
checkpoint lacks (MLM, NSP, classifier) are initialised fresh (``load_report.missing``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..modeling.config import PRESETS, BertConfig, ConfigError
from ..modeling.hf_format import read_config_file
from ..runs import last_checkpoint
from ..runs.config import PROBE_AUTO, OptionError, TrainConfig


class TrainingError(RuntimeError):
    """A run that cannot start (bad options, model that does not load); the message is for people."""


def resolve_init(init: str):
    """``packaged`` | a run directory (its last checkpoint) | a local HF folder | a hub id ->
    :class:`bertcore.loading.sources.ModelSource`.

    Raises:
        TrainingError: a run without a complete checkpoint, or a path that is not a model folder.
    """
    from ..loading import sources

    if init in ("packaged", "default", ""):
        return sources.PACKAGED
    path = Path(init).expanduser()
    if path.is_dir():
        if (path / "checkpoints").is_dir():
            last = last_checkpoint(path)
            if last is None:
                raise TrainingError(f"run {path} has no complete checkpoint to start from")
            return sources.ModelSource("run", str(last))
        return sources.ModelSource("local", str(path))
    if path.exists() or init.startswith((".", "/", "~")):
        raise TrainingError(f"{init} is not a model folder")
    return sources.ModelSource("hub", init)


def load_tokenizer_for(spec: str | None, corpus: str = "bbc", vocab_size: int | None = None):
    """The WordPiece tokenizer of ``spec`` (:func:`bertcore.data.vocabularies.resolve_tokenizer`): ``packaged``,
    ``corpus`` / ``corpus:<N>`` (trained on ``corpus``, cached), or a folder, checked.

    Raises:
        TrainingError: no usable BERT WordPiece tokenizer there, or a corpus that cannot be read.
    """
    from ..loading import sources
    from ..data import DataError
    from ..data.vocabularies import TokenizerError, resolve_tokenizer

    try:
        return resolve_tokenizer(spec, corpus, vocab_size)
    except (TokenizerError, DataError, sources.SourceError, OSError) as exc:
        raise TrainingError(f"--tokenizer {spec}: {exc}") from exc


def tokenizer_problem(cfg: TrainConfig) -> str | None:
    """Why ``cfg.tokenizer`` cannot be used (a message for people), or None. Cheap: a corpus
    vocabulary is not trained here, only its size checked; a folder is loaded and checked."""
    from ..tokenization.tokenizer import TokenizerError, load_tokenizer
    from ..data.vocabularies import parse_tokenizer_spec

    if not cfg.scratch:
        return None
    try:
        kind, value = parse_tokenizer_spec(cfg.tokenizer, cfg.vocab_size)
        if kind == "folder":
            load_tokenizer(str(value))
    except TokenizerError as exc:
        return f"{exc}. Use 'packaged', 'corpus:<size>' or a folder holding a BERT WordPiece tokenizer."
    return None


def init_folder(cfg: TrainConfig) -> Path:
    """The folder of the model a continued run starts from."""
    from ..loading import sources

    return sources.resolve(resolve_init(cfg.init))


def data_tokenizer(cfg: TrainConfig):
    """The tokenizer the data is encoded with before the model exists (pretraining)."""
    if cfg.scratch:
        return load_tokenizer_for(cfg.tokenizer, cfg.corpus, cfg.vocab_size)
    return load_tokenizer_for(str(init_folder(cfg)))


#: What ``--architecture modernbert`` sets on a preset: ModernBERT's design (Warner et al. 2024, section 2.1; the
#: defaults of transformers' ``ModernBertConfig``): pre-LN without biases and without layer 0's attention norm (the
#: embedding norm serves), GeGLU, rotary positions with a 160k base on global layers and 10k on local ones, a global
#: layer every third (the others see a sliding window), a final norm, no segments, no pooler, the MLM head
#: ``dense + GELU + norm``, LayerNorm eps 1e-5. Initialisation stays BERT's normal(0, initializer_range).
MODERN_FIELDS: dict[str, Any] = {
    "family": "modernbert", "pre_layer_norm": True, "position_embedding_type": "rotary", "rope_theta": 160_000.0,
    "local_rope_theta": 10_000.0, "global_attn_every_n_layers": 3, "attention_bias": False, "mlp_bias": False,
    "norm_bias": False, "head_bias": False, "gated_ffn": True, "first_attention_norm": False, "head_act": "gelu",
    "pooler_act": "gelu", "pooler_norm": True, "classifier_pooling": "cls", "type_vocab_size": 0,
    "base_pooler": False, "hidden_act": "gelu", "layer_norm_eps": 1e-5}


def _count(cls, config: BertConfig) -> int:
    """Parameters of ``cls(config)``, built on the meta device (no memory, no time)."""
    import torch

    with torch.device("meta"):
        return cls(config).num_parameters()


def modern_config(base: BertConfig, window: int) -> BertConfig:
    """A ModernBERT-style config (:data:`MODERN_FIELDS`) with ``base``'s width, heads, vocabulary and padding id,
    twice its layers (ModernBERT is deeper and narrower than BERT at a similar size: base has 22 layers of 768 where
    BERT-base has 12), and the GeGLU width (a multiple of 8) that brings the MLM model's parameter count
    (:meth:`~bertcore.modeling.model.BertPreTrainedModel.num_parameters`) nearest to that of
    ``BertForPreTraining(base)``: the classic model with its position table, pooler and NSP head. ``window``: the local
    layers' sliding window in tokens (a token sees ``window // 2`` on each side; ModernBERT's is 128).

    Raises:
        bertcore.modeling.config.ConfigError: a window below 2, or a preset too small for any feed-forward width.
    """
    from ..modeling.heads import BertForMaskedLM, BertForPreTraining

    if window < 2:
        raise ConfigError(f"the local attention window must be at least 2 tokens, got {window}")
    modern = base.replace(**MODERN_FIELDS, num_hidden_layers=2 * base.num_hidden_layers, local_attention=window,
                          intermediate_size=8)
    target, at8 = _count(BertForPreTraining, base), _count(BertForMaskedLM, modern)
    per_unit = (_count(BertForMaskedLM, modern.replace(intermediate_size=16)) - at8) / 8  # params per unit of width
    width = 8 * round((8 + (target - at8) / per_unit) / 8)
    if width < 8:
        raise ConfigError(f"the {base.num_hidden_layers}-layer preset is too small for a ModernBERT-style model of "
                          "its parameter count (no feed-forward width is left)")
    return modern.replace(intermediate_size=width)


def modern_problems(opts: dict[str, Any]) -> list[str]:
    """Why options with ``architecture: modernbert`` cannot start (messages for people; [] when they can):
    ModernBERT is built from a preset here, has no NSP head and no position table."""
    if opts.get("architecture") != "modernbert":
        return []
    problems = []
    if opts.get("init") not in (None, "", "scratch"):
        problems.append("The ModernBERT-style design builds a new model from a preset; to continue a ModernBERT "
                        "checkpoint, choose it as the starting model (its config.json says what it is).")
    if opts.get("nsp", True):
        problems.append("A ModernBERT-style model has no next-sentence head (ModernBERT trains with MLM only): "
                        "turn NSP off (--no-nsp).")
    if opts.get("position_init", "normal") != "normal":
        problems.append("--position-init sets a learned position table; a ModernBERT-style model has none (its "
                        "positions are rotary).")
    return problems


def pretraining_class(cfg: TrainConfig):
    """The model class a pretraining run trains: :class:`~bertcore.modeling.heads.BertForPreTraining` (MLM + NSP
    heads) for BERT; :class:`~bertcore.modeling.heads.BertForMaskedLM` for a ModernBERT-style run and for a model of
    another family
    (their ``transformers`` classes have no NSP head), read from the starting model's ``config.json``."""
    from ..modeling.heads import BertForMaskedLM, BertForPreTraining

    if cfg.scratch:
        family = "modernbert" if cfg.architecture == "modernbert" else "bert"
    else:
        config = start_model_config(cfg.init, cfg.preset)
        family = config.family if config is not None else "bert"
    return BertForPreTraining if family == "bert" else BertForMaskedLM


def build_model(cfg: TrainConfig, labels: list[str] | None = None):
    """``(model, tokenizer, origin)`` of a new run, in train mode (before any resume).

    Pretraining builds :func:`pretraining_class` (a ModernBERT-style one from :func:`modern_config`); fine-tuning
    :class:`~bertcore.modeling.heads.BertForSequenceClassification` with ``len(labels)`` classes.

    Raises:
        TrainingError: a model that does not load, bad overrides, ``max_seq_len`` past its positions, or options a
            ModernBERT-style run cannot take (:func:`modern_problems`; NSP on a model without an NSP head).
    """
    from ..loading import sources
    from ..modeling.checkpoint import CheckpointError
    from ..modeling.config import preset
    from ..modeling.heads import BertForPreTraining, BertForSequenceClassification

    modern = cfg.pretrain and cfg.architecture == "modernbert"
    if modern and modern_problems(cfg.to_dict()):
        raise TrainingError(" ".join(modern_problems(cfg.to_dict())))
    cls = pretraining_class(cfg) if cfg.pretrain else BertForSequenceClassification
    if cfg.pretrain and cfg.nsp and cls is not BertForPreTraining:
        raise TrainingError("the starting model's family has no next-sentence head: turn NSP off (--no-nsp)")
    head_changes = {} if cfg.pretrain else {"num_labels": len(labels or []), "id2label": dict(enumerate(labels or []))}
    try:
        changes = {**cfg.overrides(), **head_changes}
        if cfg.scratch:
            tok = load_tokenizer_for(cfg.tokenizer, cfg.corpus, cfg.vocab_size)
            config = preset(cfg.preset, vocab_size=len(tok), pre_layer_norm=bool(cfg.pre_layer_norm),
                            pad_token_id=tok.pad_token_id)
            if modern:
                config = modern_config(config, cfg.max_seq_len // 2)
            config = config.replace(**{**head_pooling(cfg, None), **changes})
            if config.max_position_embeddings < cfg.max_seq_len:
                config = config.replace(max_position_embeddings=cfg.max_seq_len)
            model = cls(config)
            origin = f"preset {cfg.preset}{' ModernBERT-style' if modern else ''} (from scratch)"
        else:
            source = resolve_init(cfg.init)
            folder = sources.resolve(source)
            model = cls.from_pretrained(folder, **{**head_pooling(cfg, folder), **changes})
            tok = load_tokenizer_for(str(folder))
            if cfg.pre_layer_norm and not model.config.pre_layer_norm:
                raise TrainingError("--pre-layer-norm applies to models trained from scratch only")
            origin = f"{source.name} ({model.load_report.summary()})"
    except (sources.SourceError, CheckpointError, ConfigError, OptionError) as exc:
        raise TrainingError(str(exc)) from exc
    if cfg.max_seq_len > model.config.max_position_embeddings:
        raise TrainingError(f"--max-seq-len {cfg.max_seq_len} exceeds the model's "
                            f"{model.config.max_position_embeddings} positions")
    model.train()
    return model, tok, origin


def head_pooling(cfg: TrainConfig, folder: Path | None) -> dict[str, str]:
    """The ``classifier_pooling`` change a fine-tuning run makes to its starting model's config: ``--pooling``
    when it is ``cls`` or ``mean``; with ``auto``, what the starting folder declares as a sentence-transformers
    model (:func:`bertcore.loading.sources.declared_pooling`: mean for the packaged all-MiniLM-L6-v2, trained as a
    mean-pooled sentence encoder), else no change (the model's own ``config.json``, [CLS] for BERT; a preset when
    ``folder`` is None). ``--model-overrides`` still wins. docs/measurements/finetuning.md measures the two heads."""
    from ..loading.sources import declared_pooling

    if cfg.pretrain:
        return {}
    if cfg.pooling != "auto":
        return {"classifier_pooling": cfg.pooling}
    declared = declared_pooling(folder) if folder is not None else None
    return {"classifier_pooling": declared} if declared else {}


def start_model_config(init: str | None, preset: str) -> BertConfig | None:
    """The architecture a run will train: the preset, or the ``config.json`` of the starting model
    (None when it cannot be read)."""
    if init in (None, "", "scratch"):
        return PRESETS[preset]
    if init == "packaged":
        from ..loading.sources import packaged_model_dir

        folder = packaged_model_dir()
    else:
        folder = Path(init).expanduser()
        last = last_checkpoint(folder) if (folder / "checkpoints").is_dir() else None
        folder = last or folder
    try:
        return read_config_file(folder / "config.json")
    except (ConfigError, OSError):
        return None


PACKAGED_DATA = ("bbc", "tweets", "bbc-topics")


def validate(task: str, opts: dict[str, Any]) -> list[str]:
    """Problems with a set of page options that bounded inputs cannot catch alone (messages for
    people, [] when the run can start): the starting model folder, the data path, the sequence
    length against the model's positions, evaluation interval against the run length."""
    from ..data.corpora import CORPORA

    problems = modern_problems(opts) if task == "pretrain" else []
    init = opts.get("init")
    if init == "":
        problems.append("Choose a starting model: no checkpoint or folder is selected.")
    elif init not in (None, "packaged", "scratch") and not (Path(init).expanduser() / "config.json").is_file():
        problems.append(f"No model at {init}: the folder must hold config.json and the weights "
                        "(model.safetensors or pytorch_model.bin) and the tokenizer files.")
    data = opts.get("corpus" if task == "pretrain" else "dataset")
    if data is not None and not str(data).startswith("hub:") and data not in PACKAGED_DATA and data not in CORPORA:
        path = Path(str(data)).expanduser()
        if not str(data).strip():
            problems.append("Give the path of your data file or folder.")
        elif not path.exists():
            problems.append(f"No file or folder at {path}.")
        elif task == "finetune" and path.suffix.lower() != ".csv":
            problems.append(f"{path.name} is not a .csv file: fine-tuning reads a CSV with text and label columns.")
    config = None if problems else start_model_config(init, opts.get("preset", "nano"))
    seq = opts.get("max_seq_len", TrainConfig.max_seq_len)
    if config is not None and seq > config.max_position_embeddings:
        problems.append(f"Sequence length {seq} is longer than the model's "
                        f"{config.max_position_embeddings} positions; choose at most {config.max_position_embeddings}.")
    steps = opts.get("max_steps")
    if steps is not None and opts.get("eval_every", 1) > steps:
        problems.append(f"Evaluate every {opts['eval_every']} steps is more than the {steps} steps of the run: "
                        "no validation point would be drawn; lower it.")
    if task == "pretrain" and opts.get("probe") not in (None, "", PROBE_AUTO) and "[MASK]" not in opts["probe"]:
        problems.append(f"The probe sentence needs at least one [MASK] (or write '{PROBE_AUTO}').")
    parts = (CORPORA[data].parts or (data,)) if data in CORPORA else (data,)
    try:
        named = TrainConfig.create(task, corpus_weights=opts.get("corpus_weights")).part_weights() \
            if task == "pretrain" else {}
    except OptionError:
        named = {}  # the check below reports it
    if unknown := sorted(set(named) - set(parts)):
        problems.append(f"Corpus weights name {', '.join(unknown)}, not a part of the corpus {data!r} (parts: "
                        f"{', '.join(map(str, parts))}).")
    try:
        cfg = TrainConfig.create(task, **{k: v for k, v in opts.items() if k != "device"})
        cfg.check()
    except OptionError as exc:
        problems.append(str(exc))
    else:
        if (tok_problem := tokenizer_problem(cfg)) is not None:
            problems.append(f"Tokenizer {opts.get('tokenizer')!r}: {tok_problem}")
    return problems
