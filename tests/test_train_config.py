"""TrainConfig: one owner of every training option; CLI <-> run.json round trips (the Train page's inputs
and what reaches run.json from them: tests/pages/test_train_form.py)."""

from __future__ import annotations

import json

import pytest

from bertcore import runs as R
from bertcore.training.cli import build_parser, parse_args, resume_config, to_config
from bertcore.runs.config import ExitCode, OptionError, TrainConfig, default_lr, fields_for


LEAD = ("pretrain --init packaged --corpus bbc --max-seq-len 128 --batch-size 32 --lr 3e-4 --warmup 0.05 "
        "--max-steps 50 --threads 1 --log-every 10 --eval-every 100 --eval-batches 10 --save-every 100 "
        "--keep-checkpoints 2 --lock none --run-dir runs/X").split()


@pytest.mark.parametrize("task", ["pretrain", "finetune"])
def test_cli_defaults_are_the_dataclass_defaults(task):
    assert to_config(parse_args([task])) == TrainConfig.create(task)
    dests = {a.dest for a in build_parser()._subparsers._group_actions[0].choices[task]._actions}
    assert {f.name for f in fields_for(task)} <= dests


def test_the_background_runs_command_line_still_parses():
    cfg = to_config(parse_args(LEAD))
    assert (cfg.init, cfg.lr, cfg.warmup, cfg.keep_checkpoints, cfg.lock, cfg.run_dir) == \
        ("packaged", 3e-4, 0.05, 2, "none", "runs/X")


def test_argv_and_run_json_round_trip():
    cfg = TrainConfig.create("finetune", init="scratch", preset="tiny", lr=2e-4, max_steps=7, group_by_length=True,
                             pre_layer_norm=True, dropout=0.0, text_pair_column="text_pair", seed=3)
    assert to_config(parse_args(cfg.to_argv())) == cfg
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_old_run_json_args_are_read_with_todays_defaults():
    old = {"task": "pretrain", "run_dir": "runs/x", "config": None, "resume": False, "preset": "nano", "lr": 0.001,
           "max_steps": 6, "a_removed_option": 1}  # a run.json of an earlier version
    cfg = TrainConfig.from_dict(old)
    assert cfg.max_steps == 6 and cfg.lr == 1e-3 and cfg.batch_size == TrainConfig.batch_size


def test_a_fine_tuning_run_recorded_before_the_head_lr_keeps_its_steps():
    """The new head's rate and length buckets are fine-tuning defaults; a run.json without them (an
    earlier version's) must resume as it ran: one rate for every parameter, batches in random order."""
    new = TrainConfig.create("finetune")
    assert new.head_lr == 1e-3 and new.group_by_length
    old = TrainConfig.from_dict({"task": "finetune", "lr": None, "max_steps": 6})
    assert old.head_lr is None and not old.group_by_length and old.max_seq_len == 64 and old.peak_lr == 5e-5
    assert to_config(parse_args(old.to_argv())) == old.replace(head_lr=5e-5)  # the same optimizer groups
    assert TrainConfig.from_dict({"task": "finetune", "init": "scratch"}).lr is None  # from scratch: 3e-4 then too
    assert TrainConfig.from_dict(new.to_dict()) == new
    assert new.pooling == "auto" and old.pooling == "cls"  # before --pooling, every head read [CLS]


def test_resume_reads_run_json_and_overrides(tmp_path):
    run = tmp_path / "r"
    cfg = TrainConfig.create("pretrain", max_steps=5, run_dir=str(run))
    R.RunWriter(run).write_config({"task": "pretrain", "args": cfg.to_dict(), "model_config": {}})
    again = resume_config(parse_args(["resume", "--run-dir", str(run), "--max-steps", "9", "--lock", "none"]))
    assert again == cfg.replace(max_steps=9, resume=True, lock="none")
    with pytest.raises(OptionError, match="no readable run.json"):
        resume_config(parse_args(["resume", "--run-dir", str(tmp_path / "nothing")]))


def test_out_of_range_is_refused_with_exit_code_2(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["pretrain", "--batch-size", "0"])
    assert exc.value.code == ExitCode.USAGE == 2
    assert "--batch-size 0 is out of range" in capsys.readouterr().err
    with pytest.raises(OptionError, match="unknown training option"):
        TrainConfig.create("pretrain", bacth_size=3)
    with pytest.raises(R.RunError, match="unknown training option"):
        R.launch("pretrain", {"bacth_size": 3}, root="/nonexistent-root-for-test", device="cpu")


def test_learning_rate_defaults_agree():
    assert TrainConfig.create("pretrain").peak_lr == default_lr("pretrain", True) == 1e-3
    assert TrainConfig.create("pretrain", init="packaged").peak_lr == 1e-4
    assert TrainConfig.create("finetune").peak_lr == 1e-4  # measured in docs/measurements/finetuning.md
    assert TrainConfig.create("finetune", init="scratch").peak_lr == 3e-4


@pytest.mark.parametrize("task", ["pretrain", "finetune", "resume"])
def test_help_of_every_subcommand_prints(task, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([task, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--run-dir" in out and (task == "resume" or "--max-time" in out)
