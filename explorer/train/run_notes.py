"""What the run view tells a student in words: what the time budget became and what a busy machine cost, whether
the run is still on the unigram plateau past the step most runs of its recipe leave it, and what fine-tuning added
over the bag-of-words baseline. Pure functions of a run's files (run.json, metrics.jsonl,
results.json): each returns a sentence or None, and :mod:`explorer.train.run_view` shows it."""

from __future__ import annotations

from typing import Any

from bertcore.training.calibrate import Calibration
from bertcore.training.recipes import RECIPES, recipe_of

from ..figures.training import format_duration

PLATEAU_NATS = 0.3  # within this many nats of the unigram line: still on the plateau (the run view's rule)


def budget_text(config: dict[str, Any] | None, status: dict[str, Any] | None) -> str | None:
    """What a run's time budget became (run.json ``calibration``, :mod:`bertcore.training.calibrate`), e.g.
    ``'Time budget: 10 min ≈ 11,500 steps on this machine (...)'``; None for a run without one."""
    cal = Calibration.from_dict((config or {}).get("calibration"))
    if cal is None:
        return None
    text = (f"Time budget: {cal.summary()} in its first {format_duration(cal.calibration_s)} (those steps are "
            f"thrown away). The learning rate follows the steps, so the same seed gives the same run; it ends at "
            f"step {cal.total_steps:,}, or at {format_duration(cal.time_limit_s)} if the machine slows down.")
    early = (status or {}).get("stopped_early_at")
    if isinstance(early, int):
        text += f" This machine was slower than measured: the time limit stopped the run at step {early:,}."
    return text


def busy_text(config: dict[str, Any] | None) -> str | None:
    """A sentence when the calibration found the machine busy, and what that cost; None otherwise.

    Busy: more CPU threads ran *slower* than fewer in the calibration's trial (on an idle machine they run
    faster; slower means another program holds a core). The cost: the planned steps against what an idle 2-core
    machine plans for the run's recipe in the same minutes (:attr:`bertcore.training.recipes.Recipe
    .idle_steps_per_min`), when the run is a recipe's.
    """
    cal = Calibration.from_dict((config or {}).get("calibration"))
    rates = (cal.thread_steps_per_s or {}) if cal is not None else {}
    if cal is None or len(rates) < 2:
        return None
    most = max(rates, key=int)
    if cal.threads is None or cal.threads >= int(most):
        return None
    tried = ", ".join(f"{k} thread{'s' * (int(k) > 1)} {v:.1f} steps/s" for k, v in rates.items())
    text = (f"The calibration found this machine busy ({tried}: more threads were slower, so another program is "
            f"using a core). The run uses {cal.threads} thread{'s' * (cal.threads > 1)} and planned "
            f"{cal.total_steps:,} steps")
    recipe = RECIPES.get(recipe_of((config or {}).get("args")) or "")
    if recipe is not None and recipe.idle_steps_per_min:
        idle = recipe.idle_steps_per_min * cal.budget_s / 60
        text += (f"; an idle 2-core machine plans about {round(idle, -2):,.0f} for this recipe in "
                 f"{cal.budget_s / 60:g} minutes. Fewer steps leave less time to learn: close other programs, "
                 "or give the run more minutes")
    return text + "."


def plateau_text(config: dict[str, Any] | None, records: list[dict[str, Any]]) -> str | None:
    """A sentence while a recipe's run is still on the unigram plateau past the step by which its measured runs
    had left it (:attr:`bertcore.training.recipes.Recipe.escape_by`): its latest held-out MLM loss within
    :data:`PLATEAU_NATS` of the unigram line (the ``reference`` record). None otherwise, or for a custom run."""
    recipe = RECIPES.get(recipe_of((config or {}).get("args")) or "")
    if recipe is None or not recipe.escape_by:
        return None
    ref = next((r for r in records if r.get("split") == "reference"), None)
    val = [r for r in records if r.get("split") == "val" and isinstance(r.get("mlm_loss"), (int, float))]
    if ref is None or not isinstance(ref.get("unigram_loss"), (int, float)) or not val:
        return None
    last, unigram = val[-1], ref["unigram_loss"]
    if last["step"] <= recipe.escape_by or last["mlm_loss"] < unigram - PLATEAU_NATS:
        return None
    return (f"Still learning word frequencies: at step {last['step']:,} the held-out loss ({last['mlm_loss']:.2f}) "
            f"is within {PLATEAU_NATS} nats of the unigram line ({unigram:.2f}), the loss of a model that knows only "
            "how frequent each word is. The model does not use the context yet; the probe's guesses are the most "
            f"frequent words. Most runs of this recipe start using the context by step {recipe.escape_by:,} "
            "(docs/measurements/recipes.md); this one is late. If the loss has not left the line by the end, start a "
            "new run with another seed or more minutes.")


def baseline_sentence(results: dict[str, Any] | None) -> str | None:
    """'Fine-tuned BERT 0.89 macro F1, TF-IDF 0.86: pretraining adds 3 points here.' from ``results.json`` (test
    and baseline macro F1, in [0, 1]); None without both."""
    test, base = (results or {}).get("test") or {}, (results or {}).get("baseline") or {}
    if not isinstance(test.get("f1"), (int, float)) or not isinstance(base.get("f1"), (int, float)):
        return None
    diff = 100 * (test["f1"] - base["f1"])
    head = f"Fine-tuned BERT {test['f1']:.2f} macro F1, TF-IDF {base['f1']:.2f}"
    if round(diff) > 0:
        return f"{head}: pretraining adds {diff:.0f} point{'s' * (round(diff) != 1)} of F1 here."
    if round(diff) == 0:
        return f"{head}: a tie here; the bag of words does as well on this test set."
    return (f"{head}: the bag of words wins by {-diff:.0f} point{'s' * (round(diff) != -1)} here. Fine-tuning "
            "needs enough steps: a short or busy run may stop before BERT has adapted to the task.")
