"""``TrainConfig``: every training option once, with its help, default, range and CLI flag.

The command line (``bertcore.training.cli`` builds its argparse parser from :func:`fields_for`), the Train
page (defaults, min/max and help of its inputs) and the loop all read this dataclass; ``run.json``
stores it as ``args`` (:meth:`TrainConfig.to_dict`), and :meth:`TrainConfig.from_dict` reads the
``args`` of runs written by earlier versions (unknown keys are ignored, missing ones get today's
defaults), so old runs still resume.

It imports no torch itself.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BOTH = ("pretrain", "finetune")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")  # --compile (training.dist.compile_encoder)
PRETRAIN, FINETUNE = ("pretrain",), ("finetune",)
GROUPS = {"run": "run", "optim": "optimisation (AdamW, linear warmup, then linear decay to 0 over --decay of the run)",
          "length": "run length", "log": "logging and checkpoints", "model": "model", "data": "data",
          "mlm": "masked LM and NSP"}

PROBE_AUTO = "auto"  # --probe auto: held-out sentences chosen from the run's own data (.probe_choice)
PROBE_SEP = " | "  # separates the sentences of a --probe with several


class ExitCode(enum.IntEnum):
    """Exit status of ``python -m bertcore.training`` (the UI and scripts read it)."""

    DONE = 0
    FAILED = 1
    USAGE = 2  # bad options, or a run directory that cannot be resumed
    BUSY = 3  # the device is used by another run (--lock fail)
    CANCELLED = 143  # SIGTERM / SIGINT: a checkpoint was saved


class OptionError(ValueError):
    """An option out of its range or of the wrong kind (the message names the option and the range)."""


def opt(default: Any, group: str, help: str, *, type: Any = None, tasks: tuple[str, ...] = BOTH,
        min: float | None = None, max: float | None = None, choices: tuple | None = None,
        by_task: dict[str, Any] | None = None, negatable: bool = False, cli: bool = True,
        suggested: Any = None) -> Any:
    """A dataclass field with its CLI / page description in ``metadata``.

    ``by_task`` overrides the default per task; ``suggested`` is what the page pre-fills where the
    default is "unset" (``None``); ``negatable`` bools get ``--x/--no-x``.
    """
    meta = {"group": group, "help": help, "type": type, "tasks": tasks, "min": min, "max": max,
            "choices": choices, "by_task": by_task or {}, "negatable": negatable, "cli": cli,
            "suggested": suggested}
    return field(default=default, metadata=meta)


def default_lr(task: str, scratch: bool) -> float:
    """The peak learning rate when ``--lr`` is not given: pretraining from scratch 1e-3 (small models,
    Turc et al. 2019), continued pretraining 1e-4, fine-tuning from scratch 3e-4, fine-tuning a
    pretrained model 1e-4 (in the grid of Turc et al. 2019 for compact BERTs, 3e-4 / 1e-4 / 5e-5 / 3e-5;
    BERT-base's section A.3 tries 5e-5 to 2e-5: set --lr for a large model). Measured on the packaged MiniLM:
    docs/measurements/finetuning.md."""
    if task == "pretrain":
        return 1e-3 if scratch else 1e-4
    return 3e-4 if scratch else 1e-4


# fine-tuning's defaults before head_lr and length buckets; a run.json without "head_lr" predates them: these
# reproduce it
BEFORE_HEAD_LR: dict[str, Any] = {"head_lr": None, "group_by_length": False}
BEFORE_HEAD_LR_PRETRAINED_LR = 5e-5  # the peak lr then of fine-tuning a pretrained model with no --lr


@dataclass
class TrainConfig:
    """Every option of a training run (field names are the CLI's ``--flag-names`` with ``_``)."""

    task: str = opt("pretrain", "run", "pretrain (MLM + NSP) or finetune (classification)", choices=BOTH, cli=False)
    # run
    run_dir: str | None = opt(None, "run", "run directory (default: <runs root>/<new id>; runs root = "
                              "$BERT_EXPLORER_RUNS or ./runs)", type=str)
    device: str = opt("auto", "run", "auto (CUDA if available, else CPU), cpu, cuda, cuda:N", type=str)
    precision: str = opt("auto", "run", "auto = bf16 autocast on CUDA, fp32 on CPU", choices=("auto", "fp32", "bf16"))
    lock: str = opt("fail", "run", "one run per device: refuse (fail) or queue (wait) when the device is busy; "
                    "none skips the lock", choices=("fail", "wait", "none"))
    seed: int = opt(0, "run", "seed of data split, validation pairs, init and dropout (and of the training pairs, "
                    "order and masks unless --data-seed is given)", type=int, min=0, max=2**31 - 1)
    data_seed: int | None = opt(None, "run", "seed of the training pairs (NSP partners), batch order and masks "
                                "(default: --seed); give a continued stage a new one so it does not replay the "
                                "last stage's batches, while --seed keeps the same train/validation split",
                                type=int, min=0, max=2**31 - 1)
    resume: bool = opt(False, "run", "continue from the run directory's last checkpoint", type=bool)
    threads: int | None = opt(None, "run", "torch CPU threads (default: torch's choice)", type=int, min=1, max=1024)
    prefetch: int = opt(2, "run", "training batches collated and masked ahead of the step in a background thread "
                        "(0: in line, the step waits for them)", type=int, min=0, max=64)
    compile: str = opt("none", "run", "torch.compile the encoder (the MLM head's selected rows vary, so it stays "
                       "eager): default, reduce-overhead (CUDA graphs) or max-autotune; pays off on a GPU",
                       choices=COMPILE_MODES)
    # run length
    max_steps: int | None = opt(None, "length", "optimizer steps (default: from --epochs)", type=int, min=1,
                                max=10_000_000, suggested=300)
    epochs: float | None = opt(None, "length", "passes over the training split when neither --max-steps nor "
                               "--max-time is given (default 1)", type=float, min=0.01, max=1000.0, suggested=1.0)
    max_time: float | None = opt(None, "length", "time budget in minutes (see --budget-schedule): the run ends with "
                                 "a final evaluation and checkpoint; with --max-steps, a plain time limit (whichever "
                                 "comes first)", type=float, min=0.01, max=100_000.0, suggested=10.0)
    budget_schedule: str = opt("steps", "length", "how --max-time without --max-steps is spent: 'steps' measures "
                               "this machine's steps/s over the first seconds, fixes the step count (run.json "
                               "'calibration') and follows a step schedule, so the same seed and settings give the "
                               "same run (the budget x 1.5 stays a safety stop); 'time' spreads the learning rate "
                               "over elapsed time (Geiping & Goldstein 2023, Cramming): no two runs alike",
                               choices=("steps", "time"))
    # optimisation
    batch_size: int = opt(32, "optim", "sequences per step (over all DDP processes)", type=int, min=1, max=4096)
    lr: float | None = opt(None, "optim", "peak learning rate (default: 1e-3 pretrain from scratch, 1e-4 continued "
                           "pretraining, 3e-4 fine-tune from scratch, 1e-4 fine-tune a pretrained model)",
                           type=float, min=1e-7, max=1.0)
    warmup: float = opt(0.1, "optim", "warmup steps: an int >= 1 (at most half the run), or a fraction of max steps",
                        type=float, min=0.0)
    decay: float = opt(1.0, "optim", "share of the steps, at the end, over which the lr decays to 0: 1.0 from the "
                       "warmup's end (BERT); below 1 it holds its peak until then (warmup-stable-decay, Hu et al. "
                       "2024): a run starts alike whatever its length", type=float, min=0.01, max=1.0)
    head_lr: float | None = opt(None, "optim", "peak learning rate of the new classifier head (same schedule as "
                                "--lr; default: --lr); a fresh head learns little at a pretrained body's rate",
                                type=float, min=1e-7, max=1.0, tasks=FINETUNE, by_task={"finetune": 1e-3})
    layer_lr_decay: float = opt(1.0, "optim", "layer-wise lr decay: encoder layer i of L learns at --lr times this "
                                "to the power L-1-i, the embeddings at the power L (1: one rate for all; Sun et al. "
                                "2019 section 5.3.3, ELECTRA's fine-tuning)", type=float, min=0.1, max=1.0,
                                tasks=FINETUNE)
    weight_decay: float = opt(0.01, "optim", "AdamW weight decay (not on biases and LayerNorm)", type=float,
                              min=0.0, max=1.0)
    beta2: float = opt(0.999, "optim", "AdamW beta2 (beta1 = 0.9)", type=float, min=0.0, max=0.999999)
    grad_clip: float = opt(1.0, "optim", "clip the global gradient norm (0: off)", type=float, min=0.0)
    dropout: float | None = opt(None, "optim", "override hidden and attention dropout (0 is fastest)", type=float,
                                min=0.0, max=0.9)
    max_seq_len: int = opt(128, "optim", "tokens per sequence, [CLS]/[SEP] included", type=int, min=8, max=4096,
                           by_task={"finetune": 64})
    model_overrides: str | None = opt(None, "optim", 'JSON of BertConfig fields to change, e.g. '
                                      '\'{"hidden_size": 32, "num_hidden_layers": 2}\'', type=str)
    # logging and checkpoints
    log_every: int = opt(10, "log", "steps between train metric lines", type=int, min=1, max=1_000_000)
    eval_every: int = opt(100, "log", "steps between validation evaluations", type=int, min=1, max=10_000_000)
    eval_batches: int = opt(20, "log", "validation batches per evaluation (0: all)", type=int, min=0, max=1_000_000)
    save_every: int = opt(100, "log", "steps between checkpoints (one is always saved at the end)", type=int,
                          min=1, max=10_000_000)
    keep_checkpoints: int = opt(5, "log", "newest checkpoints kept (0: keep all)", type=int, min=0, max=10_000)
    save_every_s: float = opt(0.0, "log", "also checkpoint after this many seconds (0: off)", type=float, min=0.0)
    save_steps: str | None = opt(None, "log", "extra checkpoints at these steps, e.g. '0,25,50,100,200' (0: before "
                                 "the first step); never pruned", type=str)
    save_early: bool = opt(False, "log", "extra checkpoints at step 0 and log-spaced early steps (10, 20, 50, 100, "
                           "200, 500, 1000, ...), never pruned, so the Evolution page shows the start and a "
                           "sudden drop", type=bool)
    tensorboard: bool = opt(False, "log", "also write TensorBoard event files (run directory/tensorboard)", type=bool)
    # model
    preset: str = opt("nano", "model", "architecture preset when training from scratch "
                      "(nano, tiny, mini, small, medium, base, large)", type=str)
    init: str | None = opt(None, "model", "start from a model instead of a preset: 'packaged' (MiniLM), a local HF "
                           "folder / run directory / checkpoint, or a hub id; fine-tuning also 'scratch' (a preset)",
                           type=str, by_task={"finetune": "packaged"})
    tokenizer: str = opt("packaged", "model", "WordPiece tokenizer for from-scratch runs: 'packaged' "
                         "(bert-base-uncased's 30,522-token vocab), 'corpus' or 'corpus:<N>' (a WordPiece vocab of "
                         "--vocab-size / N tokens trained on --corpus with the tokenizers library, cached), or a "
                         "tokenizer folder (refused unless it is a usable BERT WordPiece tokenizer)", type=str)
    vocab_size: int = opt(8000, "model", "size of the corpus vocabulary of --tokenizer corpus", type=int,
                          min=100, max=100_000)
    pre_layer_norm: bool = opt(False, "model", "pre-LN layers (LayerNorm before each sub-layer) instead of post-LN "
                               "(from scratch only)", type=bool)
    unigram_init: bool = opt(False, "model", "start at the unigram point: the MLM output bias is set to the log "
                             "frequencies of the training tokens, so the first steps need not learn them (from "
                             "scratch only; Karpathy 2019, 'init well')", type=bool, tasks=PRETRAIN)
    architecture: str = opt("bert", "model", "design of a from-scratch model: 'bert', or 'modernbert' (Warner et al. "
                            "2024: pre-LN, no biases, rotary positions, GeGLU, local attention, MLM only: needs "
                            "--no-nsp; twice the preset's layers at its parameter count; saved as transformers' "
                            "ModernBertForMaskedLM)", type=str, choices=("bert", "modernbert"), tasks=PRETRAIN)
    position_init: str = opt("normal", "model", "initial position embeddings of a from-scratch model: 'normal' "
                             "(as BERT) or 'sinusoidal' (Vaswani et al. 2017's table, scaled to the same spread), "
                             "so attention can tell neighbours apart from the first step", type=str,
                             choices=("normal", "sinusoidal"), tasks=PRETRAIN)
    pooling: str = opt("auto", "model", "what the new classifier reads: 'cls' (the [CLS] vector through the pooler, "
                       "BERT), 'mean' (the mean of the unpadded token vectors, then the pooler; saved in bertcore's "
                       "own format, as transformers' BertForSequenceClassification pools [CLS] only) or 'auto' (what "
                       "the starting model declares: a sentence-transformers folder's 1_Pooling, e.g. mean for the "
                       "packaged MiniLM; otherwise the starting model's own head, [CLS] for BERT)", type=str,
                       choices=("auto", "cls", "mean"), tasks=FINETUNE)
    # pretraining data and masking
    corpus: str = opt("bbc", "data", "'bbc' (packaged BBC News), 'sotu' (State of the Union addresses), 'wiki' "
                      "(Wikipedia summaries), 'bbc+sotu', 'all', 'everyday' (bbc + wiki + WordNet + fortunes; the "
                      "last two from Debian packages), 'everyday+agree', 'agreement' (a generated language with "
                      "subject-verb "
                      "agreement), a .txt file or a folder of .txt files (documents "
                      "separated by blank lines in a file), or 'hub:<name>[:<config>]' (online)", type=str,
                      tasks=PRETRAIN)
    max_docs: int | None = opt(None, "data", "use at most this many documents", type=int, min=2, tasks=PRETRAIN)
    corpus_weights: str | None = opt(None, "data", "repeat parts of a mixture corpus in the training pairs, e.g. "
                                     "'wiki=2,wordnet=2,fortunes=3': each part's training documents enter that many "
                                     "times per epoch, each time cut into new NSP pairs (a fraction takes a seeded "
                                     "share of them; 0 leaves a part out of training, its held-out documents are still "
                                     "evaluated); parts not named count once", type=str, tasks=PRETRAIN)
    agreement_pairs: int = opt(0, "data", "counterfactual subject-verb number pairs mined from the training "
                               "documents (spaCy + inflect, bertcore.data.counterfactual): at most this many, pairs "
                               "with a noun between subject and verb first; each enters training as two sequences "
                               "(the sentence and its other-number version) with the verb always [MASK]ed (Lil-Bevo, "
                               "BabyLM 2023); 0: off", type=int, min=0, max=10_000_000, tasks=PRETRAIN)
    agreement_attractor_repeat: int = opt(1, "data", "times each counterfactual pair with a noun between subject "
                                          "and verb (the attractor sentences, what small models get wrong) enters "
                                          "training, each time with its own context and NSP partner", type=int, min=1,
                                          max=16, tasks=PRETRAIN)
    agreement_margin_weight: float = opt(0.0, "mlm", "weight w of the margin loss at the [MASK]ed verb of each "
                                         "counterfactual sequence, w * max(0, m - (logit(correct) - logit(other "
                                         "number))) (Noji & Takamura 2020); 0: off; needs --agreement-pairs",
                                         type=float, min=0.0, max=100.0, tasks=PRETRAIN)
    agreement_margin: float = opt(1.0, "mlm", "margin m (in logits) that the correct verb should lead the "
                                  "other-number verb by", type=float, min=0.0, max=100.0, tasks=PRETRAIN)
    val_fraction: float = opt(0.05, "data", "share held out for validation (documents when pretraining, "
                              "examples when fine-tuning)", type=float, min=0.0, max=0.5, by_task={"finetune": 0.1})
    mlm_probability: float = opt(0.15, "mlm", "fraction of tokens selected for MLM", type=float, min=0.01, max=1.0,
                                 tasks=PRETRAIN)
    whole_word_mask: bool = opt(False, "mlm", "select whole words (all their pieces) together", type=bool,
                                tasks=PRETRAIN)
    mask_replace_prob: float = opt(0.8, "mlm", "share of the selected tokens replaced by [MASK] (BERT: 0.8)",
                                   type=float, min=0.0, max=1.0, tasks=PRETRAIN)
    random_replace_prob: float = opt(0.1, "mlm", "share of the selected tokens replaced by a random token (BERT: "
                                     "0.1); the rest stays unchanged", type=float, min=0.0, max=1.0, tasks=PRETRAIN)
    nsp: bool = opt(True, "mlm", "next sentence prediction: with --no-nsp, B always continues A (contiguous text) "
                    "and the loss is MLM only (as RoBERTa)", type=bool, negatable=True, tasks=PRETRAIN)
    nsp_balance: bool = opt(False, "mlm", "hold the training pairs' NotNext share at 50%: a one-sentence document "
                            "has no true next sentence and always gets a random B (everyday mixtures: 64% NotNext "
                            "without this); held-out pairs are unchanged", type=bool, tasks=PRETRAIN)
    nsp_weight: float = opt(1.0, "mlm", "weight of the NSP loss in the total loss", type=float, min=0.0, max=100.0,
                            tasks=PRETRAIN)
    short_seq_len: int | None = opt(None, "mlm", "sequence-length schedule: train on sequences of at most this many "
                                    "tokens first (BERT appendix A.2: 128 for 90% of the steps, then 512)",
                                    type=int, min=8, max=4096, tasks=PRETRAIN)
    short_seq_fraction: float = opt(0.0, "mlm", "share of the run (steps, or time with --max-time) spent at "
                                    "--short-seq-len", type=float, min=0.0, max=1.0, tasks=PRETRAIN)
    short_seq_prob: float = opt(0.1, "data", "chance of a shorter target length (as BERT)", type=float, min=0.0,
                                max=1.0, tasks=PRETRAIN)
    probe: str | None = opt("The government said it would [MASK] the new law next [MASK].", "data",
                            "sentence whose [MASK] predictions are logged at each evaluation; several separated by "
                            "' | '; 'auto': 4 held-out sentences of the corpus whose masked content word its two "
                            "neighbours predict in the training text (bertcore/training/probe_choice.py)", type=str,
                            tasks=PRETRAIN)
    # fine-tuning data
    dataset: str = opt("tweets", "data", "'tweets' (packaged, positive vs negative), 'bbc-topics' (packaged, 5 "
                       "classes), a .csv file (text, optional text_pair, label columns), or 'hub:imdb', 'hub:sst2', "
                       "'hub:<name>[:<config>]' (online)", type=str, tasks=FINETUNE)
    text_column: str = opt("text", "data", "CSV / hub text column", type=str, tasks=FINETUNE)
    text_pair_column: str | None = opt(None, "data", "optional second text column (sentence pairs)", type=str,
                                       tasks=FINETUNE)
    label_column: str = opt("label", "data", "CSV / hub label column", type=str, tasks=FINETUNE)
    max_train_examples: int | None = opt(None, "data", "subsample the training split (seeded)", type=int, min=1,
                                         tasks=FINETUNE)
    test_fraction: float = opt(0.1, "data", "fraction of examples for test", type=float, min=0.0, max=0.5,
                               tasks=FINETUNE)
    group_by_length: bool = opt(False, "data", "batch examples of similar length together (less padding, faster "
                                "on a CPU)", type=bool, tasks=FINETUNE, by_task={"finetune": True}, negatable=True)
    no_baseline: bool = opt(False, "data", "skip the TF-IDF + logistic regression baseline", type=bool,
                            tasks=FINETUNE)

    # -- construction
    @classmethod
    def create(cls, task: str, **values: Any) -> "TrainConfig":
        """A config for ``task`` with its task defaults, then ``values`` (unknown names raise OptionError)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise OptionError(f"unknown training option(s) {unknown}; known: {sorted(known)}")
        base = {f.name: f.metadata["by_task"][task] for f in dataclasses.fields(cls) if task in f.metadata["by_task"]}
        return cls(**{**base, **values, "task": task})

    @classmethod
    def from_dict(cls, data: dict[str, Any], task: str | None = None) -> "TrainConfig":
        """From a ``run.json`` ``args`` dict (or a parsed CLI namespace's ``vars``); keys this version
        does not know are ignored, missing keys get the task defaults, except for a fine-tuning run written before
        ``head_lr`` existed: it gets the defaults of then (:data:`BEFORE_HEAD_LR`), so its resume takes the
        same steps and loads its optimizer state."""
        known = {f.name for f in dataclasses.fields(cls)}
        task = task or data.get("task") or "pretrain"
        values = {k: (str(v) if isinstance(v, Path) else v) for k, v in data.items() if k in known and k != "task"}
        if task == "finetune" and "pooling" not in data:
            values["pooling"] = "cls"  # written before --pooling: every head then read [CLS]
        if task != "finetune" or "head_lr" in data:
            return cls.create(task, **values)
        cfg = cls.create(task, **{**BEFORE_HEAD_LR, **values})
        return cfg if cfg.lr is not None or cfg.scratch else cfg.replace(lr=BEFORE_HEAD_LR_PRETRAINED_LR)

    def to_dict(self) -> dict[str, Any]:
        """Every option (JSON-ready), as ``run.json`` stores it under ``args``."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def to_argv(self) -> list[str]:
        """CLI words that rebuild this config: the task, then every option of the task that differs
        from its default (``True`` -> a bare flag; negatable ``False`` -> ``--no-x``)."""
        default = TrainConfig.create(self.task)
        words = [self.task]
        for f in fields_for(self.task):
            value = getattr(self, f.name)
            if value == getattr(default, f.name):
                continue
            flag = "--" + f.name.replace("_", "-")
            if f.metadata["type"] is bool:
                words.append(flag if value else "--no-" + flag[2:])
            elif value is not None:
                words += [flag, str(value)]
            elif f.name == "head_lr":  # None: the head at --lr, which is what --head-lr <lr> does
                words += [flag, str(self.peak_lr)]
        return words

    # -- derived values
    @property
    def pretrain(self) -> bool:
        return self.task == "pretrain"

    @property
    def scratch(self) -> bool:
        """Trained from a preset (random init) rather than continued from a model."""
        return self.init in (None, "") if self.pretrain else self.init == "scratch"

    @property
    def train_data_seed(self) -> int:
        """Seed of training pairs, batch order and masks: ``data_seed``, else ``seed`` (HF ``data_seed``)."""
        return self.seed if self.data_seed is None else self.data_seed

    @property
    def peak_lr(self) -> float:
        return self.lr if self.lr is not None else default_lr(self.task, self.scratch)

    def overrides(self) -> dict[str, Any]:
        """BertConfig changes asked for: ``--dropout`` and ``--model-overrides`` (JSON)."""
        changes: dict[str, Any] = {}
        if self.dropout is not None:
            changes.update(hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout)
        if self.model_overrides:
            over = self.model_overrides
            try:
                changes.update(json.loads(over) if isinstance(over, str) else dict(over))
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                raise OptionError(f"--model-overrides is not a JSON object of BertConfig fields: {exc}") from exc
        return changes

    def check(self) -> None:
        """Raise :class:`OptionError` for a value outside its field's range or choices."""
        if self.task not in BOTH:
            raise OptionError(f"unknown task {self.task!r}; use one of {BOTH}")
        for f in fields_for(self.task):
            value, m = getattr(self, f.name), f.metadata
            if value is None or isinstance(value, bool):
                continue
            flag = "--" + f.name.replace("_", "-")
            if m["choices"] and value not in m["choices"]:
                raise OptionError(f"{flag} {value!r}: choose one of {', '.join(m['choices'])}")
            if isinstance(value, (int, float)) and ((m["min"] is not None and value < m["min"])
                                                    or (m["max"] is not None and value > m["max"])):
                raise OptionError(f"{flag} {value} is out of range [{m['min']}, {m['max']}]")
        if self.pretrain and self.mask_replace_prob + self.random_replace_prob > 1.0 + 1e-9:
            raise OptionError(f"--mask-replace-prob {self.mask_replace_prob} + --random-replace-prob "
                              f"{self.random_replace_prob} exceed 1 (the rest of the selected tokens stays unchanged)")
        if self.pretrain and self.agreement_margin_weight > 0 and not self.agreement_pairs:
            raise OptionError(f"--agreement-margin-weight {self.agreement_margin_weight} needs --agreement-pairs > 0 "
                              "(the margin loss is taken at the verbs of the counterfactual pairs)")
        if self.pretrain:
            self.part_weights()  # raises on a malformed --corpus-weights
        self.extra_save_steps(10**9)  # raises on a malformed --save-steps

    def part_weights(self) -> dict[str, float]:
        """``--corpus-weights`` as ``{part: weight}`` ({} when not given); whether the parts exist is checked when
        the corpus is loaded (:func:`bertcore.data.build_pretraining_data`).

        Raises:
            OptionError: not ``name=number`` items separated by commas, or a weight outside [0, 16].
        """
        out: dict[str, float] = {}
        for item in str(self.corpus_weights or "").replace(" ", "").split(","):
            if not item:
                continue
            name, eq, value = item.partition("=")
            try:
                weight = float(value)
            except ValueError:
                weight = float("nan")
            if not eq or not name or not 0.0 <= weight <= 16.0:
                raise OptionError(f"--corpus-weights {self.corpus_weights!r}: give part=weight items separated by "
                                  "commas, each weight from 0 to 16, e.g. wiki=2,wordnet=2,fortunes=3")
            out[name] = weight
        return out

    def extra_save_steps(self, total_steps: int) -> tuple[int, ...]:
        """Steps of the extra checkpoints (``--save-steps``, ``--save-early``) up to ``total_steps``.

        Raises:
            OptionError: ``--save-steps`` is not a comma-separated list of whole numbers >= 0.
        """
        steps: set[int] = set()
        if self.save_steps:
            try:
                steps |= {int(x) for x in str(self.save_steps).replace(" ", "").split(",") if x != ""}
            except ValueError as exc:
                raise OptionError(f"--save-steps {self.save_steps!r}: give whole numbers separated by commas, "
                                  "e.g. 0,25,50,100") from exc
            if any(x < 0 for x in steps):
                raise OptionError(f"--save-steps {self.save_steps!r}: steps must be >= 0")
        if self.save_early:
            steps.add(0)
            k = 1
            while k <= total_steps:
                steps |= {m * k for m in (1, 2, 5) if m * k >= 10 and m * k <= total_steps}
                k *= 10
        return tuple(sorted(x for x in steps if x <= total_steps))


def fields_for(task: str) -> list[dataclasses.Field]:
    """The options of a task in declaration order (``task`` itself left out)."""
    return [f for f in dataclasses.fields(TrainConfig) if f.metadata["cli"] and task in f.metadata["tasks"]]


def field_info(name: str, task: str = "pretrain") -> dict[str, Any]:
    """What the page needs for one input: ``default`` (the task's, or the suggested value where the
    default is unset), ``min``, ``max``, ``help``, ``choices``."""
    f = next((f for f in dataclasses.fields(TrainConfig) if f.name == name), None)
    if f is None:
        raise OptionError(f"unknown training option {name!r}")
    m = f.metadata
    default = m["by_task"].get(task, f.default)
    if default is None and m["suggested"] is not None:
        default = m["suggested"]
    return {"default": default, "min": m["min"], "max": m["max"], "help": m["help"], "choices": m["choices"]}
