"""bertcore.training.schedule: a run's length from max_steps, a time budget or epochs; its progress,
learning rate, ETA and sequence-length schedule (pure; the whole loop: tests/test_training.py)."""

import pytest

from bertcore.runs.config import OptionError, TrainConfig
from bertcore.training.optim import lr_at, lr_at_time
from bertcore.training.schedule import UNBOUNDED, RunLength, short_seq_len


def length(per_epoch: int = 50, **options) -> RunLength:
    return RunLength.of(TrainConfig.create("pretrain", **options), per_epoch)


def test_steps_win_then_the_time_budget_then_epochs():
    assert length(max_steps=30, max_time=2.0, warmup=0.1) == RunLength(30, 120.0, 3, 0.1, False, 120.0)
    pending = length(max_time=2.0, warmup=0.1)  # the default step schedule: the step count is calibrated
    assert (pending.total_steps, pending.bounded, pending.status_total()) == (UNBOUNDED, False, None)
    assert pending.needs_calibration and not pending.by_time
    by_time = length(max_time=2.0, warmup=0.1, budget_schedule="time")
    assert by_time.by_time and not by_time.needs_calibration and by_time.limit_s == 120.0
    assert by_time.warmup == 0  # a fractional warmup of a time-bounded run is a fraction of the budget
    assert length(max_time=2.0, warmup=7).warmup == 7
    assert length(epochs=2.5, warmup=0.1).total_steps == 125 and length(warmup=0.1).total_steps == 50
    assert length(per_epoch=1, epochs=0.1).total_steps == 1
    assert not length(max_steps=30).needs_calibration and length(max_steps=30).limit_s is None


def test_a_calibrated_length_follows_its_steps_and_stops_at_its_time_limit():
    cal = length(max_time=2.0, warmup=0.1).calibrated(200, 180.0)
    assert (cal.total_steps, cal.warmup, cal.by_time, cal.limit_s, cal.budget_s) == (200, 20, False, 180.0, 120.0)
    assert not cal.needs_calibration and cal.status_total() == 200
    assert cal.lr(50, 999.0, 1e-3) == lr_at(50, 1e-3, 20, 200)  # by step, whatever the clock says
    assert cal.progress(50, 119.0) == 0.25  # by step too (the sequence-length schedule)
    assert not cal.time_up(179.9) and cal.time_up(180.0)
    assert cal.eta(100, 10.0, [0.1]) == pytest.approx(10.0) and cal.eta(100, 175.0, [0.1]) == pytest.approx(5.0)
    assert length(max_time=2.0).lr(0, 0.0, 1e-3) == pytest.approx(1e-5)  # calibration steps: 1% of the peak
    with pytest.raises(ValueError, match="at least 1 step"):
        length(max_time=2.0).calibrated(0, 1.0)


def test_progress_lr_eta_and_time_up():
    steps = RunLength(100, None, 10, 10)
    assert steps.progress(25, 999.0) == 0.25 and not steps.time_up(1e9)
    assert steps.lr(4, 0.0, 1e-3) == lr_at(4, 1e-3, 10, 100)
    assert steps.eta(60, 0.0, [0.5, 1.5]) == pytest.approx(40.0)
    both = RunLength(100, 60.0, 10, 10, True, 60.0)  # --budget-schedule time with --max-steps
    assert both.progress(10, 30.0) == 0.5 and both.progress(90, 30.0) == 0.9  # whichever is further
    assert both.lr(4, 30.0, 1e-3) == lr_at_time(30.0, 60.0, 1e-3, 10, 4)
    assert both.eta(10, 30.0, [1.0]) == pytest.approx(30.0)  # the sooner end
    assert both.time_up(60.0) and not both.time_up(59.9)
    assert both.progress(0, 600.0) == 1.0
    by_steps = RunLength(100, 60.0, 10, 10, False, 60.0)  # --max-steps and --max-time: a step schedule
    assert by_steps.lr(4, 30.0, 1e-3) == lr_at(4, 1e-3, 10, 100) and by_steps.progress(10, 30.0) == 0.1
    assert by_steps.time_up(60.0)


def test_short_sequences_first():
    cfg = TrainConfig.create("pretrain", max_seq_len=128, short_seq_len=64, short_seq_fraction=0.9)
    assert short_seq_len(cfg, 0.5) == 64 and short_seq_len(cfg, 0.9) is None
    assert short_seq_len(cfg.replace(short_seq_len=None), 0.0) is None
    assert short_seq_len(cfg.replace(short_seq_len=256), 0.0) is None  # not shorter: no schedule


def test_warmup_stable_decay_starts_every_run_length_alike():
    """With ``decay`` below 1 (warmup-stable-decay, Hu et al. 2024) the rate of every step before the final
    decay is the same for every total, so whether a run leaves the unigram plateau cannot depend on the step count
    a calibration planned; with ``decay`` 1.0 (BERT's) it does."""
    totals = (3000, 4500, 6000, 12000)
    wsd = {t: length(max_steps=t, warmup=300, decay=0.2) for t in totals}
    for step in (0, 150, 299, 300, 1500, 2399):
        assert len({wsd[t].lr(step, 0.0, 2e-3) for t in totals}) == 1
    assert wsd[3000].lr(299, 0.0, 2e-3) == wsd[3000].lr(1500, 0.0, 2e-3) == pytest.approx(2e-3)
    assert wsd[3000].lr(2700, 0.0, 2e-3) == pytest.approx(1e-3) and wsd[3000].lr(3000, 0.0, 2e-3) == 0.0
    assert wsd[12000].lr(12000 - 1200, 0.0, 2e-3) == pytest.approx(1e-3)  # 20% of 12,000: 2,400 steps decay
    bert = {t: length(max_steps=t, warmup=300) for t in totals}  # the default decay 1.0
    assert len({bert[t].lr(1500, 0.0, 2e-3) for t in totals}) == len(totals)
    assert bert[3000].lr(1500, 0.0, 2e-3) == lr_at(1500, 2e-3, 300, 3000)
    # a decay longer than the steps after the warmup starts at the warmup's end
    assert lr_at(10, 1.0, 10, 20, decay_steps=15) == pytest.approx(1.0)
    assert lr_at(15, 1.0, 10, 20, decay_steps=15) == pytest.approx(0.5)
    assert length(max_steps=600, warmup=500, decay=0.2).warmup == 300  # a short run: half of it warms up
    with pytest.raises(OptionError, match="--decay 0.0 is out of range"):
        TrainConfig.create("pretrain", decay=0.0).check()
