"""A time budget becomes a fixed step count (bertcore.training.calibrate): the plan, the rounding, what
run.json records, the time limit, and that runs of the same seed and step count are equal.

The clock of these runs is a fake one that moves only when a training step runs (``dt`` seconds per
step), so the calibration measures a known throughput and the planned step count is exact."""

from __future__ import annotations

import pytest

from bertcore import runs as R
from bertcore.training.cli import parse_args, resume_config, to_config
from bertcore.training import calibrate as C
from bertcore.training.loop import Trainer
from bertcore.training.optim import lr_at

from .test_training import tiny_pretrain_argv


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def test_round_steps_is_a_coarse_grid():
    assert C.round_steps(11_347) == 11_500  # grid 500 (at most 5% of the estimate)
    assert C.round_steps(5_826) == 5_800 and C.round_steps(1_549) == 1_550 and C.round_steps(52) == 52
    assert C.round_steps(11_290) == C.round_steps(11_460) == 11_500  # machines 1.5% apart agree
    assert C.round_steps(0.3) == 1 and C.round_steps(float("nan")) == 1


def test_plan_fills_the_budget_left_with_steps_and_evaluations():
    estimate, total = C.plan(step_s=0.05, eval_s=0.0, eval_every=100, remaining_s=2.6)
    assert estimate == pytest.approx(52.0) and total == 52
    estimate, _ = C.plan(step_s=0.05, eval_s=1.0, eval_every=10, remaining_s=31.0)  # 0.15 s per step, 1 s at the end
    assert estimate == pytest.approx(200.0)
    assert C.plan(0.05, 0.0, 10, -5.0) == (0.0, 1)
    with pytest.raises(ValueError, match="must be > 0"):
        C.plan(0.0, 0.0, 10, 10.0)


class StepClock:
    """A clock that moves only when a training step runs: ``dts[i]`` seconds for the i-th step (the last
    value for every later one)."""

    def __init__(self, *dts: float) -> None:
        self.t, self.dts, self.steps = 0.0, dts, 0

    def __call__(self) -> float:
        return self.t

    def tick(self) -> None:
        self.t += self.dts[min(self.steps, len(self.dts) - 1)]
        self.steps += 1


@pytest.fixture(autouse=True)
def _one_thread_count(monkeypatch):
    """These runs time one thread count (the step counts above are exact); the choice of threads has its test."""
    monkeypatch.setattr(C, "thread_candidates", lambda trainer: [])


def run_on_clock(run_dir, clock: StepClock | None, *extra: str):
    """A tiny pretraining run; with ``clock``, a 3-second budget measured on that clock (no --max-steps)."""
    argv = tiny_pretrain_argv(run_dir, "--dropout", "0.1", "--eval-every", "20", "--log-every", "4", "--save-every",
                              "1000", *extra)
    if clock is not None:
        argv = [a for a in argv if a not in ("--max-steps", "6")] + ["--max-time", "0.05"]
    trainer = Trainer(to_config(parse_args(argv)), run_dir, argv, install_signals=False)
    if clock is not None:
        trainer.clock = clock
        step = trainer.train_step

        def timed_step(*args, **kwargs):
            clock.tick()
            return step(*args, **kwargs)

        trainer.train_step = timed_step
    return trainer, trainer.run()


def losses(run_dir, split: str = "train") -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in R.read_metrics(run_dir, split)]


def test_a_time_budget_is_calibrated_recorded_and_ends_at_its_step_count(tmp_path):
    """3 s at 0.05 s per step: 3 untimed + 5 timed steps (0.4 s), then 2.6 s / 0.05 s = 52 steps."""
    run = tmp_path / "cal"
    trainer, state = run_on_clock(run, StepClock(0.05))
    assert state == "done"
    config = R.read_config(run)
    cal = config["calibration"]
    assert cal["timed_steps"] == C.MIN_TIMED_STEPS and cal["steps_per_s"] == pytest.approx(20.0)
    assert cal["calibration_s"] == pytest.approx(0.4) and cal["estimate"] == pytest.approx(52.0)
    assert cal["total_steps"] == 52 and cal["time_limit_s"] == pytest.approx(4.5) and cal["budget_s"] == 3.0
    assert config["total_steps"] == 52 and config["warmup_steps"] == 2 and config["time_limit_s"] == 4.5
    assert trainer.step == 52 and R.read_status(run)["total_steps"] == 52
    train = R.read_metrics(run, "train")
    assert train[-1]["step"] == 52 and [r["step"] for r in R.read_metrics(run, "val")] == [0, 20, 40, 52]
    for r in train:  # a step schedule over the planned count: warmup 2, linear decay to 0 at step 52
        assert r["lr"] == pytest.approx(lr_at(r["step"] - 1, 3e-3, 2, 52))
    assert R.last_checkpoint(run).name == "step-000052"
    assert C.Calibration.from_dict(cal).summary() == ("0.05 min ≈ 52 steps on this machine (20.0 steps/s measured "
                                                      "over 5 steps)")


def test_a_slower_machine_stops_at_the_time_limit_and_says_so(tmp_path):
    """Calibrated at 0.05 s per step, then 0.2 s per step: the limit (4.5 s) comes at step (4.5 - 0.4) / 0.2."""
    run = tmp_path / "slow"
    trainer, state = run_on_clock(run, StepClock(*[0.05] * (C.WARM_STEPS + C.MIN_TIMED_STEPS), 0.2))
    assert state == "done"
    assert R.read_config(run)["calibration"]["total_steps"] == 52
    assert trainer.step == 21 and R.read_status(run)["stopped_early_at"] == 21
    assert R.last_checkpoint(run).name == "step-000021"


def test_same_seed_same_steps_same_losses_and_the_calibration_leaves_no_trace(tmp_path):
    """Two calibrated runs of seed 0 (dropout 0.1, so the RNG state matters) and a run of --max-steps 52 without
    calibration give the same loss at every logged step."""
    runs = {"a": StepClock(0.05), "b": StepClock(0.05), "steps": None}
    for name, clock in runs.items():
        extra = ("--max-steps", "52") if clock is None else ()
        _, state = run_on_clock(tmp_path / name, clock, *extra)
        assert state == "done"
    a, b, steps = (losses(tmp_path / n) for n in ("a", "b", "steps"))
    assert len(a) == 13 and [s for s, _ in a] == [s for s, _ in b] == [s for s, _ in steps]
    for (_, la), (_, lb), (_, ls) in zip(a, b, steps):
        assert la == pytest.approx(lb, abs=1e-4) and la == pytest.approx(ls, abs=1e-4)
    val_a, val_steps = losses(tmp_path / "a", "val"), losses(tmp_path / "steps", "val")
    assert [s for s, _ in val_a] == [s for s, _ in val_steps] == [0, 20, 40, 52]
    assert [v for _, v in val_a] == pytest.approx([v for _, v in val_steps], abs=1e-4)
    assert max(abs(la - lb) for (_, la), (_, lb) in zip(a, a[1:])) > 1e-2  # the losses move: not a vacuous match


def test_a_warmup_stable_decay_run_starts_alike_whatever_its_length(tmp_path):
    """Runs of seed 0 planned at 24 and 48 steps with ``--decay 0.25`` (warmup-stable-decay) log the same
    loss at every step before the shorter one's decay (step 18); with BERT's decay over the whole run they part
    from the first step after the warmup: the length, not the seed, decided the start."""
    def start(name, total, *extra):
        _, state = run_on_clock(tmp_path / name, None, "--max-steps", str(total), "--log-every", "1", *extra)
        assert state == "done"
        return [loss for step, loss in losses(tmp_path / name) if step <= 18]

    wsd_short, wsd_long = start("wsd24", 24, "--decay", "0.25"), start("wsd48", 48, "--decay", "0.25")
    assert len(wsd_short) == 18 and wsd_short == pytest.approx(wsd_long, abs=1e-6)
    bert_short, bert_long = start("bert24", 24), start("bert48", 48)
    assert bert_short[:3] == pytest.approx(bert_long[:3], abs=1e-6)  # the warmup (2 steps) is alike
    assert max(abs(a - b) for a, b in zip(bert_short, bert_long)) > 1e-3


def test_a_resumed_calibrated_run_keeps_its_step_count(tmp_path):
    run = tmp_path / "cut"
    holder = {}

    def stop_at_8(record):
        if record["split"] == "train" and record["step"] == 8:
            holder["t"].stop.set = True

    argv = tiny_pretrain_argv(run, "--log-every", "4")
    argv = [a for a in argv if a not in ("--max-steps", "6")] + ["--max-time", "0.05"]
    t = Trainer(to_config(parse_args(argv)), run, argv, on_event=[stop_at_8], install_signals=False)
    clock = StepClock(0.05)
    t.clock, step = clock, t.train_step
    t.train_step = lambda *a, **k: (clock.tick(), step(*a, **k))[1]
    holder["t"] = t
    assert t.run() == "cancelled"
    resumed = Trainer(resume_config(parse_args(["resume", "--run-dir", str(run), "--lock", "none"])), run, [],
                      install_signals=False)
    resumed.setup()
    assert resumed.total_steps == 52 and resumed.calibration.total_steps == 52
    assert not resumed.length.needs_calibration


@pytest.mark.parametrize("fast", [1, 2])
def test_the_calibration_keeps_the_faster_thread_count_and_a_resume_keeps_it(tmp_path, monkeypatch, fast):
    """A clock on which steps at ``fast`` threads take 0.05 s and at the other count 0.15 s (as 2 threads beside a
    busy core): the run goes on at ``fast`` threads, run.json says so, and a resumed run sets it again."""
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(C, "thread_candidates", lambda trainer: [2, 1])
    seen = []

    class ThreadClock(StepClock):
        def tick(self):
            seen.append(torch.get_num_threads())
            self.t += 0.05 if torch.get_num_threads() == fast else 0.15

    try:
        trainer, state = run_on_clock(tmp_path / "t", ThreadClock())
        assert state == "done"
        cal = R.read_config(tmp_path / "t")["calibration"]
        assert cal["threads"] == fast and set(cal["thread_steps_per_s"]) == {"2", "1"}
        assert cal["thread_steps_per_s"][str(fast)] == pytest.approx(20.0)
        assert cal["steps_per_s"] == pytest.approx(20.0)  # the plan is made at the chosen count
        trial = 2 * (1 + C.TRIAL_STEPS)
        assert seen[:trial] == [2] * (1 + C.TRIAL_STEPS) + [1] * (1 + C.TRIAL_STEPS)
        assert set(seen[trial:]) == {fast}  # calibration and run at the chosen count
        assert "the faster of 2: " in C.Calibration.from_dict(cal).summary()
        assert torch.get_num_threads() == before  # the choice held for the run only
        torch.set_num_threads(3 - fast)
        cfg = resume_config(parse_args(["resume", "--run-dir", str(tmp_path / "t"), "--lock", "none"]))
        Trainer(cfg, tmp_path / "t", [], install_signals=False).setup()
        assert torch.get_num_threads() == fast
    finally:
        torch.set_num_threads(before)


def test_length_grouped_batches_are_timed_per_token(monkeypatch):
    """With --group-by-length a few timed batches can all be long (or short): a batch of L tokens a row
    takes L/100 s here, the epoch's mean batch is 35 tokens a row, and the timed ones are 60, 60, 10, ...:
    the plan and the thread choice must read 0.35 s a step whatever the order (per timed step: 0.6 and 0.5 s)."""
    import types

    import torch

    class Trainer:
        clock = StepClock(0.0)
        device, dist = torch.device("cpu"), types.SimpleNamespace(any_flag=lambda flag, device: flag)
        lengths = iter([60] * 8 + [60, 60, 10] * 40)

        def train_step(self, batches):
            n = next(self.lengths)
            self.clock.t += n / 100
            return None, {"input_ids": torch.zeros(4, n)}

    trainer = Trainer()
    monkeypatch.setattr(C, "thread_candidates", lambda trainer: [1])
    before = torch.get_num_threads()
    try:
        seconds, steps, tokens, rates = C._time_steps(trainer, None, budget_s=60.0, mean_tokens=4 * 35)
    finally:
        torch.set_num_threads(before)  # the trial leaves torch at its fastest count (1): a run's choice, not ours
    assert rates == {"1": pytest.approx(1 / 0.35)}  # the trial's four steps were all 60 tokens long
    assert C.seconds_per_step(seconds, steps, tokens, 4 * 35) == pytest.approx(0.35, rel=0.05)
    assert C.seconds_per_step(seconds, steps, tokens, None) == pytest.approx(seconds / steps)  # batches alike
    cal = C.Calibration(2.9, 5, 1.7, 0.0, 2.0, 60.0, 160.0, 160, 90.0, batch_tokens=140.0)
    assert "2.9 steps/s of an average batch (140 tokens) measured over 5 steps" in cal.summary()
    assert C.Calibration.from_dict(cal.to_dict()) == cal
    assert C.batch_tokens(types.SimpleNamespace(cfg=types.SimpleNamespace(group_by_length=False))) is None
