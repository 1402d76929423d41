"""Do the first steps of a from-scratch recipe squeeze every hidden state onto one direction?

Gopalani & Hu 2025 ("What happens during the loss plateau?") see two signs of a transformer stuck on a
plateau: *representation collapse* (hidden states of different tokens become nearly parallel) and a
*repetition bias* (one answer everywhere). This script trains a recipe's first ``--steps`` steps on its real
schedule (``--total-steps``, the step count a 10-minute budget becomes on an idle 2-core machine) and every
``--every`` steps measures, on 64 held-out sequences with fixed masks:

- ``loss``: the MLM loss at the selected positions, and how far it is below the run's unigram line;
- ``cos``: the mean cosine between the final hidden states of two different [MASK] positions (0.5 at random
  init here; near 1 = collapse);
- ``repeat``: the share of [MASK] positions whose top guess is the most common top guess;
- ``grad_norm``: the largest gradient norm (before clipping) since the last line.

Numbers per step do not depend on the machine's speed or load (steps, data order and masks are seeded).

    python bench/bench_early_collapse.py --steps 100                              # the recipe as it is
    python bench/bench_early_collapse.py --steps 100 --set unigram_init=false     # without the unigram init
"""

from __future__ import annotations

import harness

import json
import tempfile

import torch

from bench_demo_runs import parse_set
from bertcore import data as D
from bertcore.runs.config import TrainConfig
from bertcore.training.evaluate import EVAL_SEED_OFFSET
from bertcore.training.loop import Trainer
from bertcore.training.recipes import RECIPES


@torch.no_grad()
def diagnose(trainer: Trainer, batch: dict) -> dict:
    """``loss``, ``cos`` and ``repeat`` (see the module docstring) of the live model on ``batch``."""
    model = trainer.model
    was = model.training
    model.eval()
    out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                masked_only=True, output_hidden_states=True)
    model.train(was)
    h = torch.nn.functional.normalize(out.hidden_states[-1][batch["labels"] != -100], dim=-1)  # (N, H)
    n = h.shape[0]
    cos = float(((h @ h.T).sum() - n) / (n * (n - 1)))
    top1 = out.prediction_logits.argmax(-1)
    return {"loss": round(float(out.mlm_loss), 3), "cos": round(cos, 3),
            "repeat": round(float((top1 == top1.mode().values).float().mean()), 3)}


def main() -> None:
    p = None  # the parser, for its error messages

    def options(ap):
        nonlocal p
        p = ap
        ap.add_argument("--recipe", default="scratch-fast", choices=sorted(RECIPES))
        ap.add_argument("--steps", type=int, default=100, help="steps to train (default 100)")
        ap.add_argument("--total-steps", type=int, default=11_000, help="the schedule's length (default 11,000)")
        ap.add_argument("--every", type=int, default=25, help="steps between measurements (default 25)")
        ap.add_argument("--threads", type=int, default=1,
                        help="torch threads, of this process and the run's (default 1)")
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE", help="change a recipe option")

    a = harness.parse(__doc__, options)
    if min(a.steps, a.total_steps, a.every, a.threads) < 1:
        p.error("--steps, --total-steps, --every and --threads must be >= 1")
    try:
        overrides = parse_set(a.set)
    except ValueError as exc:
        p.error(str(exc))
    opts = {**RECIPES[a.recipe].options, "probe": None, "save_early": False, **overrides}
    cfg = TrainConfig.create("pretrain", **opts, max_steps=a.total_steps, lock="none", threads=a.threads,
                             seed=a.seed, run_dir=tempfile.mkdtemp(prefix="collapse-"))
    trainer = Trainer(cfg, cfg.run_dir, install_signals=False)
    trainer.setup()
    rows = [trainer.task.val_ds[i] for i in range(min(64, len(trainer.task.val_ds)))]
    val = trainer.to_device(trainer.task.collate(rows, D.batch_generator(cfg.seed + EVAL_SEED_OFFSET, 0)))
    unigram = trainer.task.reference["unigram_loss"]
    print(json.dumps({"recipe": a.recipe, "overrides": overrides, "unigram_loss": round(unigram, 3)}))
    batches, norms = trainer.batch_iterator(0), []
    for step in range(1, a.steps + 1):
        _, _, grad_norm, _, lr = trainer.train_step(batches)
        trainer.step = step
        norms.append(grad_norm or 0.0)
        if step % a.every == 0 or step == 1:
            d = diagnose(trainer, val)
            print(json.dumps({"step": step, **d, "below_unigram": round(unigram - d["loss"], 3),
                              "grad_norm": round(float(max(norms)), 3), "lr": round(lr, 6)}), flush=True)
            norms = []
    harness.save(a.json)


if __name__ == "__main__":
    main()
