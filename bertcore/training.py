"""One readable training loop for pretraining (MLM + NSP) and fine-tuning (classification).

    setup     device (auto: CUDA else CPU), DDP (torchrun: gloo on CPU, NCCL on GPUs), seeds,
              the per-device lock, data (bertcore.data), model, AdamW, resume from a checkpoint
    loop      batch -> forward (bf16 autocast on CUDA) -> loss -> backward -> clip -> lr_at(step)
              -> optimizer step -> metrics every ``log_every`` -> eval every ``eval_every``
              -> checkpoint every ``save_every`` (and on SIGTERM, then exit as ``cancelled``)
    end       last checkpoint; fine-tuning: test metrics, confusion matrix, classification
              report and a TF-IDF + logistic regression baseline on the same split

Pretraining loss = MLM cross-entropy on the selected positions only (labels != -100; the MLM
head runs on those rows only, ``masked_only=True``) + NSP cross-entropy (2 classes).

Every metric record goes to the subscribers (``on_event``); the run directory writer
(:class:`bertcore.runs.RunWriter`) is one of them, so the UI and a test see the same events.
Reproducibility: the data order depends on (seed, epoch), the masks on (seed, step, rank), and
the dropout RNG state is saved in each checkpoint, so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from . import data as D
from . import runs as R
from .checkpoint import atomic_write
from .config import BertConfig, preset
from .heads import BertForPreTraining, BertForSequenceClassification

Event = dict[str, Any]


class TrainingError(RuntimeError):
    """A run that cannot start (bad options, model that does not load); the message is for people."""


class Cancelled(Exception):
    """Raised inside the loop when SIGTERM/SIGINT asked the run to stop."""


# ----------------------------------------------------------------------------- schedule
def lr_at(step: int, peak: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warmup from peak/warmup to peak over
    ``warmup_steps``, then linear decay to 0 at ``total_steps``. Pure (BERT appendix A.2)."""
    if total_steps <= 0:
        return peak
    if warmup_steps > 0 and step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    return peak * max(0.0, (total_steps - step) / span)


def warmup_steps_of(warmup: float, total_steps: int) -> int:
    """``warmup`` >= 1 is a number of steps; below 1 a fraction of ``total_steps``."""
    return int(warmup) if warmup >= 1 else int(round(warmup * total_steps))


# ----------------------------------------------------------------------------- device, DDP
@dataclass
class Dist:
    """Process group facts: ``rank``, ``world_size``, ``local_rank``; ``enabled`` under torchrun."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    enabled: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def all_reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t


def pick_device(name: str | None, dist: Dist | None = None) -> torch.device:
    """``auto`` -> CUDA if available else CPU; under DDP on CUDA, ``cuda:<local_rank>``."""
    name = R.resolve_device(name)
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TrainingError(f"device {name!r} asked for, but CUDA is not available here; use --device cpu")
        if dist is not None and dist.enabled:
            return torch.device("cuda", dist.local_rank)
    return torch.device(name)


def init_distributed(device_name: str | None) -> Dist:
    """Join the process group when started by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = R.resolve_device(device_name).startswith("cuda")
    if use_cuda:
        torch.cuda.set_device(local)
    else:
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if use_cuda else "gloo")
    return Dist(rank, world, local, True)


def autocast(device: torch.device, precision: str):
    """bf16 autocast on CUDA (``precision`` auto or bf16); a no-op context otherwise."""
    if device.type == "cuda" and precision in ("auto", "bf16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    if device.type == "cpu" and precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, beta2: float = 0.999) -> torch.optim.Optimizer:
    """AdamW with no weight decay on biases and LayerNorm weights; fused kernel where available."""
    decay, no_decay, seen = [], [], set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay if p.ndim < 2 or "LayerNorm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    for kwargs in ({"fused": True}, {"foreach": True}, {}):
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2), eps=1e-6, **kwargs)
        except (RuntimeError, TypeError, ValueError):
            continue
    raise TrainingError("cannot build AdamW")


# ----------------------------------------------------------------------------- model sources
def resolve_init(init: str):
    """``packaged`` | a run directory (its last checkpoint) | a local HF folder | a hub id ->
    ``bertcore.sources.ModelSource``."""
    from . import sources

    if init in ("packaged", "default", ""):
        return sources.PACKAGED
    path = Path(init).expanduser()
    if path.is_dir():
        if (path / "checkpoints").is_dir():
            last = R.last_checkpoint(path)
            if last is None:
                raise TrainingError(f"run {path} has no complete checkpoint to start from")
            return sources.ModelSource("run", str(last))
        return sources.ModelSource("local", str(path))
    if path.exists() or init.startswith((".", "/", "~")):
        raise TrainingError(f"{init} is not a model folder")
    return sources.ModelSource("hub", init)


def load_tokenizer_for(spec: str):
    from . import sources
    from .tokenizer import load_tokenizer

    folder = sources.packaged_model_dir() if spec in ("packaged", "", None) else Path(spec).expanduser()
    try:
        return load_tokenizer(folder)
    except (OSError, ValueError) as exc:
        raise TrainingError(f"no tokenizer in {folder}: {exc}") from exc


def _config_changes(args) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if args.dropout is not None:
        changes.update(hidden_dropout_prob=args.dropout, attention_probs_dropout_prob=args.dropout)
    if getattr(args, "model_overrides", None):
        over = args.model_overrides
        changes.update(json.loads(over) if isinstance(over, str) else over)
    return changes


def build_model(args, labels: list[str] | None = None):
    """The model and tokenizer a run starts from (before any resume)."""
    from . import sources
    from .checkpoint import CheckpointError
    from .config import ConfigError

    pretrain = args.task == "pretrain"
    cls = BertForPreTraining if pretrain else BertForSequenceClassification
    head_changes = {} if pretrain else {"num_labels": len(labels), "id2label": dict(enumerate(labels))}
    changes = {**_config_changes(args), **head_changes}
    scratch = (args.init is None) if pretrain else (args.init == "scratch")
    try:
        if scratch:
            tok = load_tokenizer_for(args.tokenizer)
            config = preset(args.preset, vocab_size=len(tok), pre_layer_norm=bool(args.pre_layer_norm),
                            pad_token_id=tok.pad_token_id, **changes)
            if config.max_position_embeddings < args.max_seq_len:
                config = config.replace(max_position_embeddings=args.max_seq_len)
            model = cls(config)
            origin = f"preset {args.preset} (from scratch)"
        else:
            source = resolve_init(args.init)
            folder = sources.resolve(source)
            model = cls.from_pretrained(folder, **changes)
            tok = load_tokenizer_for(str(folder))
            if args.pre_layer_norm and not model.config.pre_layer_norm:
                raise TrainingError("--pre-layer-norm applies to models trained from scratch only")
            origin = f"{source.name} ({model.load_report.summary()})"
    except (sources.SourceError, CheckpointError, ConfigError) as exc:
        raise TrainingError(str(exc)) from exc
    if args.max_seq_len > model.config.max_position_embeddings:
        raise TrainingError(f"--max-seq-len {args.max_seq_len} exceeds the model's "
                            f"{model.config.max_position_embeddings} positions")
    model.train()
    return model, tok, origin


# ----------------------------------------------------------------------------- checkpoints
def save_checkpoint(run_dir: Path, step: int, model, tokenizer, optimizer, extra: dict[str, Any]) -> Path:
    """Write ``checkpoints/step-<N>/`` (HF folder: config.json, model.safetensors, tokenizer files,
    plus trainer_state.pt) into a dot-named temp folder, then rename it into place."""
    ckdir = run_dir / "checkpoints"
    ckdir.mkdir(parents=True, exist_ok=True)
    final = ckdir / f"{R.CHECKPOINT_PREFIX}{step:06d}"
    tmp = ckdir / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(str(tmp))
    state = {"step": step, "optimizer": optimizer.state_dict(), "rng": {"torch": torch.get_rng_state()}, **extra}
    if torch.cuda.is_available():
        state["rng"]["cuda"] = torch.cuda.get_rng_state_all()
    atomic_write(tmp / "trainer_state.pt", lambda p: torch.save(state, p))
    _fsync_dir(tmp)
    if final.exists():  # re-saving a step after a resume: swap the old one out first
        old = ckdir / f".{final.name}.old-{os.getpid()}"
        os.replace(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(tmp, final)
    _fsync_dir(ckdir)
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Keep the ``keep`` newest complete checkpoints (0: keep all); remove stale temp folders."""
    ckdir = run_dir / "checkpoints"
    if not ckdir.is_dir():
        return
    for p in ckdir.iterdir():
        if p.name.startswith(".") and p.is_dir() and not p.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(p, ignore_errors=True)
    if keep > 0:
        for p in R.checkpoints(run_dir)[:-keep]:
            shutil.rmtree(p, ignore_errors=True)


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    return torch.load(ckpt / "trainer_state.pt", map_location="cpu", weights_only=True)


# ----------------------------------------------------------------------------- metrics
def macro_f1(y_true, y_pred, n_classes: int) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, labels=list(range(n_classes)), average="macro", zero_division=0))


def tfidf_baseline(train, test, labels: list[str]) -> dict[str, Any]:
    """TF-IDF (word 1-2 grams, sublinear tf) + logistic regression on the same train / test split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, classification_report, confusion_matrix

    t0 = time.perf_counter()
    join = (lambda ds: [a + " " + b for a, b in zip(ds["text"], ds["text_pair"])]) if "text_pair" in train.column_names \
        else (lambda ds: list(ds["text"]))
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x_train, x_test = vec.fit_transform(join(train)), None
    x_test = vec.transform(join(test))
    clf = LogisticRegression(max_iter=2000, C=10.0)
    clf.fit(x_train, train["label"])
    pred = clf.predict(x_test)
    y = test["label"]
    ids = list(range(len(labels)))
    return {
        "name": "TF-IDF (1-2 grams) + logistic regression",
        "acc": float(accuracy_score(y, pred)), "f1": macro_f1(y, pred, len(labels)),
        "confusion_matrix": confusion_matrix(y, pred, labels=ids).tolist(),
        "classification_report": classification_report(y, pred, labels=ids, target_names=labels, output_dict=True,
                                                       zero_division=0),
        "train_examples": len(train), "seconds": round(time.perf_counter() - t0, 2),
    }


# ----------------------------------------------------------------------------- the run
class StopFlag:
    """Set by SIGTERM / SIGINT; the loop checks it between steps."""

    def __init__(self) -> None:
        self.set = False
        self.signal: int | None = None

    def install(self) -> None:
        def handler(signum, frame):  # noqa: ARG001
            self.set, self.signal = True, signum

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                signal.signal(sig, handler)
            except ValueError:  # not the main thread (e.g. inside a test runner thread)
                pass


class Trainer:
    """Runs one task. Build with the parsed CLI options (``argparse.Namespace`` or a dict with
    the same keys) and a run directory; :meth:`run` returns the final state."""

    def __init__(self, args, run_dir: Path, argv: list[str] | None = None,
                 on_event: list[Callable[[Event], None]] | None = None, install_signals: bool = True) -> None:
        self.args = args if isinstance(args, argparse.Namespace) else argparse.Namespace(**args)
        self.run_dir = Path(run_dir)
        self.argv = argv or []
        self.subscribers = list(on_event or [])
        self.stop = StopFlag()
        if install_signals:
            self.stop.install()
        self.dist = init_distributed(self.args.device)
        self.writer = R.RunWriter(self.run_dir, enabled=self.dist.main)
        self.lock: R.DeviceLock | None = None
        self.t0 = time.perf_counter()
        self.time_offset = 0.0  # seconds of earlier sessions of a resumed run

    # -- events
    def emit(self, record: Event) -> None:
        if not self.dist.main:
            return
        self.writer.log_metrics(record)
        for fn in self.subscribers:
            fn(record)

    def log(self, msg: str) -> None:
        if self.dist.main:
            print(f"[{R.now_iso()}] {msg}", flush=True)

    # -- setup
    def _acquire_lock(self) -> None:
        mode = getattr(self.args, "lock", "fail")
        if mode == "none" or not self.dist.main and self.device.type != "cuda":
            return
        self.lock = R.DeviceLock(self.run_dir.parent, str(self.device), self.run_dir.name)

        def on_wait(holder):
            self.log(R.busy_message(str(self.device), holder) + " -- queued")
            self.writer.set_status(state="queued", error=None)

        if not self.lock.acquire(wait=(mode == "wait"), on_wait=on_wait, should_stop=lambda: self.stop.set):
            raise Cancelled()

    def setup(self) -> None:
        a = self.args
        self.device = pick_device(a.device, self.dist)
        if getattr(a, "threads", None) and not self.dist.enabled:
            torch.set_num_threads(a.threads)
        self._acquire_lock()
        torch.manual_seed(a.seed)
        self.pretrain = a.task == "pretrain"
        resume_from = R.last_checkpoint(self.run_dir) if a.resume else None
        if a.resume and resume_from is None:
            self.log("no checkpoint to resume from: starting from the beginning")
        self.writer.set_status(state="running", started=R.now_iso(), error=None)
        self.log(f"task {a.task} on {self.device} (world size {self.dist.world_size}); run dir {self.run_dir}")

        # data first (the classification labels size the model's head)
        if self.pretrain:
            tok = load_tokenizer_for(a.tokenizer if a.init is None else str(self._init_folder()))
            self.data = D.build_pretraining_data(tok, a.corpus, a.max_seq_len, seed=a.seed, max_docs=a.max_docs,
                                                 val_fraction=a.val_fraction, short_seq_prob=a.short_seq_prob)
            self.train_ds, self.val_ds, labels = self.data.train, self.data.val, None
        else:
            self.data = D.build_classification_data(
                a.dataset, seed=a.seed, val_fraction=a.val_fraction, test_fraction=a.test_fraction,
                max_train_examples=a.max_train_examples, text_column=a.text_column, label_column=a.label_column,
                text_pair_column=a.text_pair_column)
            labels = self.data.labels
        self.log(f"data: {json.dumps(self.data.stats)}")

        if resume_from is not None:  # weights (and config) of the checkpoint
            cls = BertForPreTraining if self.pretrain else BertForSequenceClassification
            model = cls.from_pretrained(resume_from)
            tok = load_tokenizer_for(str(resume_from))
            origin = f"resumed from {resume_from.name}"
            model.train()
        else:
            model, tok, origin = build_model(a, labels)
        self.tokenizer = tok
        self.origin = origin
        if not self.pretrain:
            self.train_ds = D.tokenize_classification(self.data.train, tok, a.max_seq_len)
            self.val_ds = D.tokenize_classification(self.data.val, tok, a.max_seq_len)
            self.test_ds = D.tokenize_classification(self.data.test, tok, a.max_seq_len)
            self.collate = D.ClassificationCollator(tok)
        else:
            self.collate = D.PretrainCollator(tok, a.mlm_probability, a.whole_word_mask, model.config.vocab_size)
        self.model = model.to(self.device)
        self.ddp_model = self.model
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.ddp_model = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

        if a.batch_size % self.dist.world_size:
            raise TrainingError(f"--batch-size {a.batch_size} must be divisible by the {self.dist.world_size} processes")
        per_epoch = len(self.train_ds) // a.batch_size
        if per_epoch == 0:
            raise TrainingError(f"{len(self.train_ds)} training examples: fewer than one batch of {a.batch_size}")
        self.total_steps = a.max_steps or max(1, int(math.ceil((a.epochs or 1.0) * per_epoch)))
        self.warmup = warmup_steps_of(a.warmup, self.total_steps)
        if a.lr is None:
            a.lr = 1e-3 if (self.pretrain and a.init is None) else (1e-4 if self.pretrain else 5e-5)
        self.optimizer = make_optimizer(self.model, a.lr, a.weight_decay, a.beta2)
        self.step = 0
        if resume_from is not None:
            state = load_trainer_state(resume_from)
            self.optimizer.load_state_dict(state["optimizer"])
            self.step = int(state["step"])
            torch.set_rng_state(state["rng"]["torch"])
            if "cuda" in state["rng"] and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["rng"]["cuda"])
            self.time_offset = float(state.get("elapsed_s", 0.0))
            self.writer.truncate_logs_after(self.step)
            self.log(f"resumed at step {self.step} from {resume_from}")
        n_params = self.model.num_parameters()
        self.log(f"model: {origin}; {n_params:,} parameters; {self.total_steps} steps, warmup {self.warmup}, "
                 f"peak lr {a.lr}, batch {a.batch_size}, seq {a.max_seq_len}")
        self._write_run_json(n_params)
        self.writer.set_status(state="running", step=self.step, total_steps=self.total_steps)

    def _init_folder(self) -> Path:
        from . import sources

        return sources.resolve(resolve_init(self.args.init))

    def _write_run_json(self, n_params: int) -> None:
        existing = R.read_config(self.run_dir) if self.dist.main else None
        args = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self.args).items()}
        args["run_dir"] = str(self.run_dir)
        record = {
            "run_id": self.run_dir.name, "task": self.args.task,
            "created": (existing or {}).get("created") or R.now_iso(),
            "argv": (existing or {}).get("argv") or self.argv, "args": args,
            "model_config": self.model.config.to_dict(), "device": str(self.device),
            "world_size": self.dist.world_size, "origin": self.origin, "num_parameters": n_params,
            "data": self.data.stats, "labels": getattr(self.data, "labels", None),
            "total_steps": self.total_steps, "warmup_steps": self.warmup,
        }
        if existing is not None:
            record["resumes"] = (existing.get("resumes") or []) + ([{"at": R.now_iso(), "step": self.step}]
                                                                  if self.args.resume else [])
        self.writer.write_config(record)

    # -- one step
    def forward(self, model, batch: dict[str, torch.Tensor]):
        with autocast(self.device, self.args.precision):
            if self.pretrain:
                return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                             labels=batch["labels"], next_sentence_label=batch["next_sentence_label"], masked_only=True)
            return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["label"])

    def batch_stats(self, out, batch) -> torch.Tensor:
        """Sums for logging: pretrain [mlm_loss*n, n_masked, mlm_correct, nsp_loss*B, B, nsp_correct, tokens];
        fine-tune [loss*B, B, correct, tokens]."""
        with torch.no_grad():
            tokens = batch["attention_mask"].sum()
            if self.pretrain:
                n = out.mlm_labels.numel()
                mlm_correct = (out.prediction_logits.argmax(-1) == out.mlm_labels).sum()
                b = batch["next_sentence_label"].numel()
                nsp_correct = (out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum()
                vals = [out.mlm_loss.float() * n, n, mlm_correct, out.nsp_loss.float() * b, b, nsp_correct, tokens]
            else:
                b = batch["label"].numel()
                correct = (out.logits.argmax(-1) == batch["label"]).sum()
                vals = [out.loss.float() * b, b, correct, tokens]
            dev = batch["attention_mask"].device
            as_t = lambda v: (v.detach().to(torch.float64) if torch.is_tensor(v)  # noqa: E731
                              else torch.tensor(float(v), dtype=torch.float64, device=dev))
            return torch.stack([as_t(v) for v in vals]).cpu()

    def summarize(self, sums: torch.Tensor) -> dict[str, float]:
        s = sums.tolist()
        if self.pretrain:
            mlm_loss = s[0] / max(1, s[1])
            nsp_loss = s[3] / max(1, s[4])
            return {"loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss, "mlm_acc": s[2] / max(1, s[1]),
                    "nsp_loss": nsp_loss, "nsp_acc": s[5] / max(1, s[4])}
        return {"loss": s[0] / max(1, s[1]), "acc": s[2] / max(1, s[1])}

    def to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    # -- evaluation (rank 0, unwrapped model)
    @torch.no_grad()
    def evaluate(self, ds, max_batches: int, collect: bool = False) -> dict[str, Any]:
        model = self.model
        was_training = model.training
        model.eval()
        sums = None
        preds, golds = [], []
        bs = max(1, self.args.batch_size)
        for b, rows in D.eval_batches(ds, bs, max_batches, by_length=not self.pretrain):
            batch = self.collate(rows, D.batch_generator(self.args.seed + 7919, b))  # fixed val masks
            batch = self.to_device(batch)
            out = self.forward(model, batch)
            st = self.batch_stats(out, batch)
            sums = st if sums is None else sums + st
            if not self.pretrain:
                preds += out.logits.argmax(-1).tolist()
                golds += batch["label"].tolist()
        model.train(was_training)
        if sums is None:
            return {}
        res: dict[str, Any] = self.summarize(sums)
        if not self.pretrain:
            res["f1"] = macro_f1(golds, preds, len(self.data.labels))
            if collect:
                res["_preds"], res["_golds"] = preds, golds
        return res

    @torch.no_grad()
    def probe(self) -> dict[str, Any] | None:
        text = getattr(self.args, "probe", None)
        if not text or "[MASK]" not in text:
            return None
        tok = self.tokenizer
        enc = tok(text.replace("[MASK]", tok.mask_token), return_tensors="pt", truncation=True,
                  max_length=self.args.max_seq_len)
        ids = enc["input_ids"].to(self.device)
        model = self.model
        was = model.training
        model.eval()
        with autocast(self.device, self.args.precision):
            out = model(ids, enc["attention_mask"].to(self.device), enc["token_type_ids"].to(self.device))
        model.train(was)
        pos = (ids[0] == tok.mask_token_id).nonzero().flatten()
        probs = out.prediction_logits[0, pos].float().softmax(-1)  # (M, V)
        top = probs.topk(5, dim=-1)
        preds = [[[tok.convert_ids_to_tokens(int(i)), round(float(p), 4)] for p, i in zip(tp, ti)]
                 for tp, ti in zip(top.values, top.indices)]
        return {"step": self.step, "text": text, "predictions": preds}

    # -- checkpoint
    def checkpoint(self) -> None:
        if self.dist.main:
            path = save_checkpoint(self.run_dir, self.step, self.model, self.tokenizer, self.optimizer,
                                   {"elapsed_s": self.elapsed(), "seed": self.args.seed})
            prune_checkpoints(self.run_dir, self.args.keep_checkpoints)
            self.log(f"checkpoint {path.name}")
        self.last_save_t = time.perf_counter()
        self.dist.barrier()

    def elapsed(self) -> float:
        return self.time_offset + time.perf_counter() - self.t0

    # -- the loop
    def fit(self) -> None:
        a = self.args
        model, opt = self.ddp_model, self.optimizer
        lengths = ([len(x) for x in self.train_ds["input_ids"]] if getattr(a, "group_by_length", False) else None)
        batches = D.iterate_batches(self.train_ds, a.batch_size, seed=a.seed, start_step=self.step,
                                    rank=self.dist.rank, world_size=self.dist.world_size, lengths=lengths)
        window = None
        win_t, win_steps = time.perf_counter(), 0
        self.last_save_t = time.perf_counter()
        step_times: list[float] = []
        if self.step == 0 and self.dist.main:
            self._eval_and_log()
        while self.step < self.total_steps:
            t_step = time.perf_counter()
            step, epoch, rows = next(batches)
            batch = self.to_device(self.collate(rows, D.batch_generator(a.seed, step, self.dist.rank)))
            lr = lr_at(self.step, a.lr, self.warmup, self.total_steps)
            for group in opt.param_groups:
                group["lr"] = lr
            out = self.forward(model, batch)
            opt.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norm = None
            if a.grad_clip and a.grad_clip > 0:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), a.grad_clip))
            opt.step()
            self.step += 1
            st = self.batch_stats(out, batch)
            window = st if window is None else window + st
            win_steps += 1
            step_times.append(time.perf_counter() - t_step)
            step_times = step_times[-50:]
            stop = self._sync_stop()
            if self.step % a.log_every == 0 or self.step == self.total_steps or stop:
                sums = self.dist.all_reduce_sum(window.clone())
                dt = max(1e-9, time.perf_counter() - win_t)
                tps = float(sums[-1]) / dt
                rec = {"step": self.step, "time": round(self.elapsed(), 3), "split": "train", "epoch": epoch,
                       "lr": lr, "tokens_per_s": round(tps, 1), "steps_per_s": round(win_steps / dt, 4),
                       **{k: round(v, 6) for k, v in self.summarize(sums).items()}}
                if grad_norm is not None:
                    rec["grad_norm"] = round(grad_norm, 4)
                self.emit(rec)
                eta = (self.total_steps - self.step) * (sum(step_times) / len(step_times))
                self.writer.set_status(state="running", step=self.step, total_steps=self.total_steps,
                                       eta_s=round(eta, 1), tokens_per_s=round(tps, 1))
                window, win_t, win_steps = None, time.perf_counter(), 0
                if not math.isfinite(rec["loss"]):
                    raise TrainingError(f"the loss became {rec['loss']} at step {self.step}: lower --lr")
            if stop:
                raise Cancelled()
            if self.step % a.eval_every == 0 or self.step == self.total_steps:
                if self.dist.main:
                    self._eval_and_log()
                self.dist.barrier()
            due_time = a.save_every_s and time.perf_counter() - self.last_save_t >= a.save_every_s
            if (self.step % a.save_every == 0 or due_time) and self.step < self.total_steps:
                self.checkpoint()

    def _sync_stop(self) -> bool:
        if not self.dist.enabled:
            return self.stop.set
        flag = torch.tensor([1.0 if self.stop.set else 0.0])
        if self.device.type == "cuda":
            flag = flag.to(self.device)
        self.dist.all_reduce_sum(flag)
        return bool(flag.item() > 0)

    def _eval_and_log(self) -> None:
        if self.val_ds is not None and len(self.val_ds):
            res = self.evaluate(self.val_ds, self.args.eval_batches)
            if res:
                self.emit({"step": self.step, "time": round(self.elapsed(), 3), "split": "val",
                           "lr": lr_at(max(0, self.step - 1), self.args.lr, self.warmup, self.total_steps),
                           "tokens_per_s": None, **{k: round(v, 6) for k, v in res.items()}})
        if self.pretrain:
            rec = self.probe()
            if rec is not None:
                self.writer.log_probe(rec)

    def finish(self) -> None:
        """Final checkpoint; fine-tuning: test metrics and the baseline into results.json."""
        self.checkpoint()
        if self.pretrain or not self.dist.main:
            return
        from sklearn.metrics import classification_report, confusion_matrix

        labels = self.data.labels
        res = self.evaluate(self.test_ds, 0, collect=True)
        preds, golds = res.pop("_preds"), res.pop("_golds")
        ids = list(range(len(labels)))
        results: dict[str, Any] = {
            "step": self.step, "labels": labels,
            "test": {**res, "n": len(golds)},
            "confusion_matrix": confusion_matrix(golds, preds, labels=ids).tolist(),
            "classification_report": classification_report(golds, preds, labels=ids, target_names=labels,
                                                           output_dict=True, zero_division=0),
            "classification_report_text": classification_report(golds, preds, labels=ids, target_names=labels,
                                                                zero_division=0),
            "majority_fraction": self.data.stats.get("majority_fraction"),
            "data": self.data.stats, "wall_time_s": round(self.elapsed(), 1),
        }
        if not getattr(self.args, "no_baseline", False):
            try:
                results["baseline"] = tfidf_baseline(self.data.train, self.data.test, labels)
            except Exception as exc:  # noqa: BLE001 - the baseline is a comparison only
                results["baseline"] = {"error": f"{type(exc).__name__}: {exc}"}
        self.writer.write_results(results)
        b = results.get("baseline", {})
        self.log(f"test acc {res.get('acc'):.4f} f1 {res.get('f1'):.4f}; baseline acc {b.get('acc')} f1 {b.get('f1')}")
        self.log("\n" + results["classification_report_text"])

    def run(self) -> str:
        """Set up, train, finish. Returns the final state (done / failed / cancelled); never raises
        for training errors (they go to status.json and the log)."""
        state, error = "done", None
        try:
            self.setup()
            self.fit()
            self.finish()
        except Cancelled:
            state = "cancelled"
            self.log(f"signal {self.stop.signal}: saving a checkpoint and stopping")
            try:
                if hasattr(self, "optimizer"):  # else it stopped before training started
                    self.checkpoint()
            except Exception as exc:  # noqa: BLE001
                self.log(f"could not save the checkpoint: {exc}")
        except R.RunBusyError as exc:
            state, error = "failed", str(exc)
            self.log(error)
        except Exception as exc:  # noqa: BLE001 - every failure is reported in status.json
            state, error = "failed", f"{type(exc).__name__}: {exc}"
            if self.dist.main:
                traceback.print_exc()
        finally:
            if self.lock is not None:
                self.lock.release()
        self.writer.set_status(state=state, error=error, step=getattr(self, "step", 0), eta_s=None if state != "done" else 0.0)
        self.log(f"run {state}" + (f": {error}" if error else ""))
        if self.dist.enabled and torch.distributed.is_initialized():
            with contextlib.suppress(Exception):
                torch.distributed.destroy_process_group()
        return state


# ----------------------------------------------------------------------------- entry point
def resume_namespace(ns: argparse.Namespace) -> argparse.Namespace:
    """The options of an earlier run (its run.json), set to resume; --max-steps / --device override."""
    config = R.read_config(ns.run_dir)
    if config is None or "args" not in config:
        raise TrainingError(f"{ns.run_dir} has no readable run.json: not a run directory")
    if config.get("model_config") is None:  # the run never got past its setup: start it again
        argv = [w for w in config.get("argv", []) if w]
        if "bertcore.train" in argv:
            argv = argv[argv.index("bertcore.train") + 1:]
        from .train import parse_args

        try:
            fresh = parse_args(argv)
        except SystemExit as exc:
            raise TrainingError(f"cannot re-read the options of {ns.run_dir}: {argv}") from exc
        fresh.lock, fresh.resume = ns.lock, True
        return fresh
    from .train import build_parser

    defaults = vars(build_parser().parse_args([config["task"]]))  # options added since the run started
    args = {**defaults, **dict(config["args"])}
    args.update(task=config["task"], resume=True, run_dir=Path(ns.run_dir), lock=ns.lock)
    if ns.max_steps is not None:
        args["max_steps"] = ns.max_steps
    if ns.device is not None:
        args["device"] = ns.device
    return argparse.Namespace(**args)


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    """``python -m bertcore.train`` after parsing. Returns the process exit code."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import datasets

        datasets.disable_progress_bars()
    except Exception:  # noqa: BLE001
        pass
    if ns.task == "resume":
        try:
            ns = resume_namespace(ns)
        except TrainingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if ns.run_dir is None:
        ns.run_dir = R.runs_root() / R.new_run_id(ns.task)
    trainer = Trainer(ns, Path(ns.run_dir), argv)
    state = trainer.run()
    if state == "done":
        return 0
    if state == "cancelled":
        return 143
    status = R.read_json(Path(ns.run_dir) / "status.json") or {}
    return 3 if "busy" in str(status.get("error", "")) else 1
