"""explorer/train/run_notes.py: the run view's sentences for a busy calibration, a run still on the unigram
plateau past its recipe's usual escape step, and fine-tuning against the TF-IDF baseline; as text and on the
Train page (AppTest)."""

from __future__ import annotations

from bertcore import runs
from bertcore.training import TrainConfig
from bertcore.training.recipes import RECIPES, recipe_of
from explorer.train import run_notes as notes

from .conftest import fake_run, page, texts

SCRATCH = TrainConfig.create("pretrain", **RECIPES["scratch-fast"].options, max_time=10.0).to_dict()
BUSY = {"steps_per_s": 8.4, "timed_steps": 40, "timed_s": 4.8, "eval_s": 0.5, "calibration_s": 9.0,
        "budget_s": 600.0, "estimate": 5380.0, "total_steps": 5400, "time_limit_s": 900.0, "threads": 1,
        "thread_steps_per_s": {"2": 0.63, "1": 8.4}}
IDLE = {**BUSY, "threads": 2, "thread_steps_per_s": {"2": 19.0, "1": 11.0}, "total_steps": 11500}


def test_a_run_of_a_recipe_is_recognised_by_its_options_whatever_its_minutes():
    assert recipe_of(SCRATCH) == "scratch-fast"
    assert recipe_of({**SCRATCH, "max_time": 3.0}) == "scratch-fast"
    assert recipe_of({**SCRATCH, "lr": 1e-3}) is None and recipe_of(None) is None


def test_busy_calibration_says_what_it_cost():
    text = notes.busy_text({"args": SCRATCH, "calibration": BUSY})
    assert "found this machine busy (2 threads 0.6 steps/s, 1 thread 8.4 steps/s" in text
    assert "planned 5,400 steps; an idle 2-core machine plans about 6,400 for this recipe in 10 minutes" in text
    assert notes.busy_text({"args": SCRATCH, "calibration": IDLE}) is None  # more threads were faster
    assert notes.busy_text({"args": SCRATCH}) is None
    custom = notes.busy_text({"args": {**SCRATCH, "lr": 1e-3}, "calibration": BUSY})
    assert custom.endswith("planned 5,400 steps.")  # no recipe: no idle figure to compare with


def plateau_records(last_loss: float, last_step: int = 2000) -> list[dict]:
    return [{"step": 0, "split": "reference", "unigram_loss": 6.86},
            {"step": 100, "split": "val", "mlm_loss": 6.9}, {"step": last_step, "split": "val", "mlm_loss": last_loss}]


def test_plateau_note_only_past_the_usual_escape_step_and_near_the_line():
    config = {"args": SCRATCH}
    text = notes.plateau_text(config, plateau_records(6.70))
    assert text.startswith("Still learning word frequencies: at step 2,000 the held-out loss (6.70)")
    escape_by = RECIPES["scratch-fast"].escape_by
    assert f"by step {escape_by:,}" in text
    assert notes.plateau_text(config, plateau_records(6.40)) is None  # left the line (0.46 nats below)
    assert notes.plateau_text(config, plateau_records(6.70, last_step=escape_by)) is None  # not late yet
    assert notes.plateau_text({"args": {**SCRATCH, "lr": 1e-3}}, plateau_records(6.70)) is None  # a custom run


def test_baseline_sentence():
    assert notes.baseline_sentence({"test": {"f1": 0.892}, "baseline": {"f1": 0.858}}) == (
        "Fine-tuned BERT 0.89 macro F1, TF-IDF 0.86: pretraining adds 3 points of F1 here.")
    assert "a tie" in notes.baseline_sentence({"test": {"f1": 0.856}, "baseline": {"f1": 0.858}})
    assert "wins by 1 point here" in notes.baseline_sentence({"test": {"f1": 0.852}, "baseline": {"f1": 0.858}})
    lose = notes.baseline_sentence({"test": {"f1": 0.80}, "baseline": {"f1": 0.858}})
    assert "the bag of words wins by 6 points" in lose
    assert notes.baseline_sentence({"test": {"f1": 0.8}, "baseline": {"error": "one class"}}) is None


def test_train_page_shows_the_busy_and_plateau_notes(runs_root):
    d = fake_run(runs_root, "20261122-100000-pretrain-aaaa")
    runs.write_json(d / "run.json", {**runs.read_config(d), "args": SCRATCH, "calibration": BUSY})
    for rec in plateau_records(6.75):
        runs.append_jsonl(d / "metrics.jsonl", rec)
    at = page("train", train_recipe="custom")
    assert not at.exception
    assert any("found this machine busy" in t and "about 6,400" in t for t in texts(at.warning))
    assert any(t.startswith("Still learning word frequencies") for t in texts(at.info))


def test_train_page_states_what_fine_tuning_added(runs_root):
    fake_run(runs_root, "20261122-100100-finetune-bbbb", task="finetune", steps=())
    at = page("train", train_recipe="custom")
    assert not at.exception
    assert any("Fine-tuned BERT 0.83 macro F1, TF-IDF 0.80: pretraining adds 3 points of F1 here." in m.value
               for m in at.markdown)
