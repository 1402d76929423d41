"""Named pretraining recipes: the option sets the Train page offers in one click.

Each recipe is a dict of :class:`~bertcore.runs.config.TrainConfig` fields; the page launches it
with a time budget (``max_time``, minutes; calibrated to a step count: :mod:`.calibrate`) and the CLI runs
the same options. The from-scratch recipe is the fastest found by ``bench/bench_recipes.py``, made robust by
``bench/bench_demo_runs.py`` (both tables in ``docs/measurements/recipes.md``); the modern recipe is the same run
with a ModernBERT-style model (``--architecture modernbert``); the MiniLM recipe is the one that
trained the packaged fill-mask model (``models/minilm-mlm/README.md``), shortened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recipe:
    """``label`` and ``description`` are for people; ``options`` are TrainConfig fields; ``minutes`` the
    suggested time budget. Measured on the project's idle 2-core machine (``docs/measurements/recipes.md``, None where
    not
    measured), for the run view's notes: ``escape_by``, the step by which the measured runs' held-out loss had
    left the unigram plateau (0.3 nats below the line); ``idle_steps_per_min``, the steps a calibration plans per
    minute of budget there."""

    label: str
    description: str
    options: dict[str, Any] = field(default_factory=dict)
    minutes: float = 10.0
    escape_by: int | None = None
    idle_steps_per_min: float | None = None


#: the options of the fastest classic recipe, shared with the modern one (which changes only the architecture)
SCRATCH_FAST: dict[str, Any] = {
    "preset": "tiny", "tokenizer": "corpus", "vocab_size": 8000, "corpus": "wiki", "max_seq_len": 32, "batch_size": 64,
    "lr": 1.5e-3, "beta2": 0.98, "warmup": 500, "decay": 0.2, "unigram_init": True, "pre_layer_norm": True,
    "dropout": 0.0, "nsp": False, "mask_replace_prob": 1.0, "random_replace_prob": 0.0, "eval_every": 100,
    "eval_batches": 8, "save_early": True, "keep_checkpoints": 5, "probe": "auto"}

RECIPES: dict[str, Recipe] = {
    "scratch-fast": Recipe(
        "From scratch, fastest recipe found (tiny BERT on Wikipedia summaries, 10 minutes)",
        "A 2-layer BERT (hidden 128, 2 heads) trained from random weights on the Wikipedia lead summaries: a "
        "WordPiece vocabulary of 8,000 trained on the corpus, 32-token sequences in batches of 64 (many small "
        "steps), pre-LN layers, no dropout, no NSP, every selected token replaced by [MASK] (no copying shortcut). "
        "The MLM output bias starts at the log frequencies of the training tokens, so the loss starts on the dashed "
        "unigram line instead of spending the first steps learning frequencies (which squeezes every hidden state "
        "onto one 'frequent word' direction); peak lr 1.5e-3 with AdamW beta2 0.98 (BERT-pretraining practice for "
        "stability), reached after 500 warmup steps and held until the last 20% of the steps decay it to 0 "
        "(warmup-stable-decay), so the start of the run is the same whatever number of steps the budget becomes. "
        "The first seconds measure this machine's speed and fix the number of steps (the run view says "
        "what the minutes became), so the same seed gives the same run. What to look for: the held-out loss "
        "leaving the unigram line downwards is the model using the context. The probe shows four held-out "
        "sentences whose hidden word the neighbouring words predict in the training text ('new ___ city'): the "
        "first sign of context use is the hidden word climbing into their top 3. Measured numbers: "
        "docs/measurements/recipes.md. To watch a sudden phase change, pick 'Watch a phase change'; to see a model "
        "fill masks "
        "now, teach the MiniLM.",
        SCRATCH_FAST,
        # docs/measurements/recipes.md, plateau exits over seeds: at 1 thread (a busy core) 20 of 20 seeds left the
        # plateau by
        # step 900; the 5 idle seeds of the modern-recipe comparison (2 threads, 2026-11-27) left at steps 600-900
        # and planned 5,600-7,200 steps in 10 minutes (median 6,400)
        escape_by=1000, idle_steps_per_min=640.0,
    ),
    "modern": Recipe(
        "From scratch, ModernBERT-style (the fastest recipe's run with a 2024 encoder design, 10 minutes)",
        "The fastest recipe's run (the same Wikipedia summaries, 8,000-token WordPiece vocabulary, 32-token sequences "
        "in batches of 64, learning rate, unigram start, no NSP and time budget) with the model built as ModernBERT "
        "(Warner et al. 2024) instead of BERT, at the same size (1.53 million parameters): 4 layers of width 128 "
        "instead of 2 (deeper and narrower), rotary positions instead of a learned table (RoPE, Su et al. 2021: base "
        "160,000 on the global layers, 10,000 on the local ones), GeGLU feed-forward layers (width 144, chosen to match"
        " the parameter count), no biases but the MLM output's, a LayerNorm before each sub-layer and a final one, and "
        "local attention: layers 2 and 3 see only the 8 tokens on either side, layers 1 and 4 the whole sequence "
        "(ModernBERT: a 128-token window, a global layer every third). Its checkpoints are transformers' "
        "ModernBertForMaskedLM. What to look for: the same as the fastest recipe, the held-out loss leaving the dashed "
        "unigram line; the Positional embeddings page shows this model's rotary frequencies. Measured on 2 CPU cores "
        "(5 seeds each, docs/measurements/recipes.md): it learns faster than the classic recipe on every seed, 33.8% "
        "held-out "
        "accuracy at [MASK] after 10 minutes against 30.3% (medians), though each of its steps is about 10% slower; "
        "it leaves the unigram line around step 400 where the classic run needs about 700.",
        {**SCRATCH_FAST, "architecture": "modernbert"},
        # 5 idle seeds (2 threads, 2026-11-27, docs/measurements/recipes.md, the modern recipe against the classic
        # one): left the
        # plateau at steps 300-400 and planned 4,800-6,000 steps in 10 minutes (median 5,800)
        escape_by=500, idle_steps_per_min=580.0,
    ),
    "minilm-mlm": Recipe(
        "Teach the MiniLM to fill masks (continued MLM + NSP, 10 minutes)",
        "all-MiniLM-L6-v2's encoder already uses context but has no MLM head: this recipe adds fresh MLM and NSP "
        "heads and trains everything on BBC News with BERT's own objectives (15% selected, 80/10/10, NSP). It is "
        "the recipe of the packaged MiniLM-MLM, which trained for 1,300 steps (about 75 minutes on one core).",
        {"init": "packaged", "corpus": "bbc", "max_seq_len": 128, "batch_size": 16, "lr": 2e-4, "warmup": 0.06,
         "eval_every": 50, "eval_batches": 8, "save_early": True, "keep_checkpoints": 3},
    ),
    "phase-change": Recipe(
        "Watch a phase change (a generated grammar, 2 minutes)",
        "A 2-layer BERT (hidden 128) learns a small generated language (bertcore/data/synthetic.py): sentences "
        "like 'the keys near this dog are old .' or 'some boys that this dog sees are red .', where the verb must "
        "agree with its subject, often across a noun of the other number. What to look for: the held-out loss "
        "first falls to the dashed unigram line (the model knows which words are frequent), sits there for a "
        "few seconds, then drops far below it: the model has started to use the context. The accuracy at "
        "[MASK] leaves the most-frequent-token line at the same moment, and the probe 'the keys near this dog "
        "[MASK] old .' moves from frequent words to 'is / was / were / are' and then to the plural verbs. On the "
        "Evolution page, the Published patterns tab (toggle it on) shows the head whose verb attends to its "
        "subject. Measured on 2 CPU cores over 5 seeds (docs/measurements/recipes.md): the loss is 1 nat below the "
        "unigram line "
        "after 19-28 seconds in every seed, and after 2 minutes the accuracy at [MASK] is 46-50% against 12% for "
        "always guessing the most frequent token ('.'). The probe's answer is a lesson in itself: three seeds put "
        "'are' first, two put 'was' or 'is' first, agreeing with the nearer noun 'dog' instead of the subject "
        "'keys', the attractor error real models make too.",
        {"preset": "tiny", "corpus": "agreement", "tokenizer": "corpus", "vocab_size": 200, "max_seq_len": 64,
         "batch_size": 32, "lr": 1e-3, "warmup": 0.05, "pre_layer_norm": True, "dropout": 0.0, "nsp": False,
         "mask_replace_prob": 1.0, "random_replace_prob": 0.0, "eval_every": 25, "eval_batches": 4,
         "save_early": True, "keep_checkpoints": 0, "probe": "the keys near this dog [MASK] old ."},
        minutes=2.0,
    ),
}
DEFAULT_RECIPE = "scratch-fast"


def recipe_of(args: dict[str, Any] | None) -> str | None:
    """The name of the recipe whose every option a run's options (run.json ``args``) have, or None (a custom run).
    The time budget is not an option of a recipe, so any budget matches."""
    args = args or {}
    found = [name for name, recipe in RECIPES.items()
             if all(k in args and args[k] == v for k, v in recipe.options.items())]
    # the most specific: a modern run also has every option of the classic recipe it changes
    return max(found, key=lambda name: len(RECIPES[name].options), default=None)
