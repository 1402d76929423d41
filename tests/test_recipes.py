"""The one-click pretraining recipes: valid TrainConfig options, the Train page's default, and the
page launches exactly the recipe's options with the chosen time budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.training.config import TrainConfig
from bertcore.training.models import validate
from bertcore.training.recipes import DEFAULT_RECIPE, RECIPES

TRAIN_PAGE = str(Path(__file__).resolve().parents[1] / "explorer" / "app_pages" / "train.py")


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipe_options_are_valid_train_config(name):
    opts = {**RECIPES[name].options, "max_time": RECIPES[name].minutes}
    cfg = TrainConfig.from_dict({"task": "pretrain", **opts})
    for key, value in opts.items():
        assert getattr(cfg, key) == value, key
    assert validate("pretrain", opts) == []


def test_default_recipe_is_from_scratch_with_a_time_budget():
    recipe = RECIPES[DEFAULT_RECIPE]
    assert recipe.options.get("init") in (None, "scratch") and recipe.minutes <= 10
    assert RECIPES["minilm-mlm"].options["init"] == "packaged"


@pytest.mark.parametrize("name,minutes", [(DEFAULT_RECIPE, None), ("minilm-mlm", 3.0)])
def test_page_launches_the_recipe(tmp_path, monkeypatch, name, minutes):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    launched = []

    def fake_launch(task, args, **kwargs):
        launched.append((task, args, kwargs))
        run_dir = tmp_path / "fake-run"
        run_dir.mkdir(exist_ok=True)
        return run_dir

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = AppTest.from_file(TRAIN_PAGE, default_timeout=60).run()
    assert not at.exception
    assert at.radio(key="train_recipe").value == DEFAULT_RECIPE  # what a new user gets
    if name != DEFAULT_RECIPE:
        at.radio(key="train_recipe").set_value(name).run()
    if minutes is not None:
        at.number_input(key=f"train_recipe_minutes_{name}").set_value(minutes).run()
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(launched) == 1
    task, args, _ = launched[0]
    assert task == "pretrain"
    assert args == {**RECIPES[name].options, "max_time": minutes or RECIPES[name].minutes}


def test_custom_shows_the_whole_form(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = AppTest.from_file(TRAIN_PAGE, default_timeout=60).run()
    at.radio(key="train_recipe").set_value("custom").run()
    assert not at.exception
    assert at.selectbox(key="train_pt_start").value == "scratch"
