"""AppTest of the "Use this checkpoint in Python" box on the Train and Evolution pages: the code that
loads a run's checkpoint, the notice and one-click re-export of an older pre-LN folder, and clear messages for
broken folders."""

from __future__ import annotations

import json

import pytest

from bertcore.modeling import hf_format
from bertcore.modeling.heads import BertForPreTraining

from ..conftest import mark_complete, save_tiny_bert
from ..test_hf_format import write_legacy
from .conftest import fake_run, page, texts

RUN = "20261122-100000-pretrain-aaaa"


def codes(at) -> list[str]:
    return [c.value for c in at.code if "from_pretrained" in c.value]


def legacy_run(root):
    """A run whose checkpoint is a legacy pre-LN folder (``model_type: bert`` + ``pre_layer_norm: true``)."""
    d = fake_run(root, RUN, steps=())
    ckpt = save_tiny_bert(d / "checkpoints" / "step-000020", BertForPreTraining, seed=1, hidden_size=16,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                          pre_layer_norm=True)
    write_legacy(ckpt, BertForPreTraining.from_pretrained(ckpt))
    mark_complete(ckpt, 20)
    assert hf_format.folder_format(ckpt) == hf_format.LEGACY_PRELN
    return d, ckpt


@pytest.mark.parametrize("name", ["train", "evolution"])
def test_the_box_shows_the_code_that_loads_the_checkpoint(runs_root, name):
    d = fake_run(runs_root, RUN, steps=(10, 20))
    at = page(name, train_recipe="custom")
    assert not at.exception and not at.error
    (code,) = codes(at)
    assert "AutoModelForMaskedLM.from_pretrained(path)" in code and str(d / "checkpoints" / "step-000020") in code
    assert any("Use this checkpoint in Python" in m.value for m in at.markdown)
    assert not any("wrongly" in t for t in texts(at.warning))
    key = f"train_py_step_{RUN}" if name == "train" else "evo_py_step"
    at.selectbox(key=key).set_value(10).run()
    assert str(d / "checkpoints" / "step-000010") in codes(at)[0]


@pytest.mark.parametrize("name", ["train", "evolution"])
def test_an_older_pre_ln_checkpoint_gets_a_notice_and_a_one_click_reexport(runs_root, name):
    d, ckpt = legacy_run(runs_root)
    at = page(name, train_recipe="custom")
    assert not at.exception and not at.error  # an older folder still loads (Evolution draws it)
    if name == "evolution":
        assert len(at.get("plotly_chart")) == 3
    assert any("transformers would load it wrongly" in t for t in texts(at.warning))
    assert "from bertcore.modeling.heads import BertForPreTraining" in codes(at)[0]  # only bertcore loads it as it is
    key = "train_py_reexport" if name == "train" else "evo_py_reexport"
    at.button(key=key).click().run()
    assert not at.exception and not at.error
    assert any("Re-exported step-000020" in t.replace("\\", "") for t in texts(at.success))
    assert hf_format.folder_format(ckpt) == hf_format.PRELN
    assert json.loads((ckpt / "config.json").read_text())["model_type"] == "roberta-prelayernorm"
    assert (ckpt / "README.md").is_file() and (ckpt / "trainer_state.pt").is_file()
    assert not any("wrongly" in t for t in texts(at.warning))
    assert "AutoModelForMaskedLM.from_pretrained(path)" in codes(at)[0]
    assert sorted(p.name for p in (d / "checkpoints").iterdir()) == ["step-000020"]


def _break(ckpt, how: str) -> None:
    if how == "truncated":
        weights = ckpt / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:2000])
    elif how == "model_type":
        data = json.loads((ckpt / "config.json").read_text())
        (ckpt / "config.json").write_text(json.dumps({**data, "model_type": "gpt2"}))
    else:
        for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            (ckpt / f).unlink(missing_ok=True)


EXPECTED = {"truncated": "truncated or corrupt", "model_type": "'gpt2'", "no_tokenizer": "no tokenizer"}


@pytest.mark.parametrize("how", list(EXPECTED))
@pytest.mark.parametrize("name", ["train", "evolution"])
def test_a_broken_checkpoint_gets_a_message_not_a_traceback(runs_root, name, how):
    d = fake_run(runs_root, RUN, steps=(20,))
    _break(d / "checkpoints" / "step-000020", how)
    at = page(name, train_recipe="custom")
    assert not at.exception
    assert any(EXPECTED[how] in t.replace("\\", "") for t in texts(at.error)), texts(at.error)
