"""The one-click pretraining recipes (bertcore.training.recipes): valid TrainConfig options, the default
is from scratch under a time budget (that the Train page launches exactly them: tests/pages/test_train_form.py)."""

from __future__ import annotations


import pytest

from bertcore.runs.config import TrainConfig
from bertcore.training.models import validate
from bertcore.training.recipes import DEFAULT_RECIPE, RECIPES


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


@pytest.mark.parametrize("name", ["scratch-fast", "modern"])
def test_from_scratch_recipes_start_alike_whatever_the_budget_becomes(name):
    """The step count a calibration plans (3,000 on a busy laptop, 12,000 on an idle machine) must not
    change the learning rate of the steps where runs leave the unigram plateau (the goal: by step 1,500)."""
    from bertcore.training.schedule import RunLength

    cfg = TrainConfig.from_dict({"task": "pretrain", **RECIPES[name].options, "max_time": 10.0})
    lengths = [RunLength.of(cfg, 1000).calibrated(total, None) for total in (3000, 4500, 6000, 12000)]
    for step in range(0, 1501, 50):
        assert len({length.lr(step, 0.0, 2e-3) for length in lengths}) == 1, step
