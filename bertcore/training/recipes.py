"""Named pretraining recipes: the option sets the Train page offers in one click.

Each recipe is a dict of :class:`~bertcore.training.config.TrainConfig` fields; the page launches it
with a time budget (``max_time``, minutes) and the CLI runs the same options. The from-scratch recipe
is the fastest found by ``bench/bench_recipes.py`` (table in ``docs/recipes.md``); the MiniLM recipe is
the one that trained the packaged fill-mask model (``models/minilm-mlm/README.md``), shortened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recipe:
    """``label`` and ``description`` are for people; ``options`` are TrainConfig fields; ``minutes`` the
    suggested time budget."""

    label: str
    description: str
    options: dict[str, Any] = field(default_factory=dict)
    minutes: float = 10.0


RECIPES: dict[str, Recipe] = {
    "scratch-fast": Recipe(
        "From scratch, fastest recipe found (tiny BERT, 10 minutes)",
        "A 2-layer BERT (hidden 128, 2 heads) trained from random weights on BBC News with the recipe that got "
        "furthest below the frequency plateau in our 10-minute CPU measurements (docs/recipes.md): a WordPiece "
        "vocabulary of 8,000 trained on the corpus, 32-token sequences in batches of 64 (many small steps), peak "
        "lr 3e-3, pre-LN layers, no dropout, no NSP, and every selected token replaced by [MASK] (no copying "
        "shortcut). Expect the loss to sit on the unigram line (the model knows only word frequencies) and then "
        "creep below it; on one CPU thread it reached 1.6x the accuracy of always guessing 'the' in 10 minutes, "
        "not yet the sudden drop that comes with longer training. To see a model fill masks within minutes, "
        "teach the MiniLM instead.",
        {"preset": "tiny", "tokenizer": "corpus", "vocab_size": 8000, "corpus": "bbc", "max_seq_len": 32,
         "batch_size": 64, "lr": 3e-3, "warmup": 0.05, "pre_layer_norm": True, "dropout": 0.0, "nsp": False,
         "mask_replace_prob": 1.0, "random_replace_prob": 0.0, "eval_every": 100, "eval_batches": 8,
         "save_early": True, "keep_checkpoints": 5},
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
        "PLACEHOLDER",
        {"preset": "tiny", "corpus": "agreement", "tokenizer": "corpus", "vocab_size": 200, "max_seq_len": 64,
         "batch_size": 32, "lr": 1e-3, "warmup": 0.05, "pre_layer_norm": True, "dropout": 0.0, "nsp": False,
         "mask_replace_prob": 1.0, "random_replace_prob": 0.0, "eval_every": 25, "eval_batches": 4,
         "save_early": True, "keep_checkpoints": 0, "probe": "the keys near this dog [MASK] old ."},
        minutes=2.0,
    ),
}
DEFAULT_RECIPE = "scratch-fast"
