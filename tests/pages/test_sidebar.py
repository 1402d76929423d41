"""AppTest of the sidebar's model picker (explorer/widgets/): a hub id offline, a missing, broken or
good local folder, a run checkpoint; every page follows the chosen model, a failed load keeps the last one."""

import pytest
import transformers

from bertcore.modeling.heads import BertForPreTraining
from bertcore.loading.sources import ModelSource

from ..conftest import mark_complete, save_tiny_bert
from .conftest import charts, check, dataframes, each_attention_tab, open_page


def test_sidebar_hub_id_offline_gives_clear_error_and_keeps_packaged_model():
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("hub").run()
    at.sidebar.text_input(key="model_hub_id").set_value("bert-base-uncased").run()
    at.sidebar.button(key="model_hub_use").click().run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and "offline" in errors[0] and "local" in errors[0]
    assert {m.label: m.value for m in at.metric}["Layers"] == "6"  # still the packaged model
    # a missing local folder: the same kind of message
    at.sidebar.radio(key="model_kind").set_value("local").run()
    assert not at.sidebar.error  # switching the source clears the old message
    at.sidebar.text_input(key="model_local_path").set_value("/no/such/folder").run()
    at.sidebar.button(key="model_local_use").click().run()
    assert "no folder" in at.sidebar.error[0].value
    at.sidebar.radio(key="model_kind").set_value("packaged").run()
    assert not at.sidebar.error and not at.exception


def test_sidebar_broken_local_folder_gives_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("local").run()
    at.sidebar.text_input(key="model_local_path").set_value(str(tmp_path)).run()
    at.sidebar.button(key="model_local_use").click().run()
    assert not at.exception
    assert "cannot read weights" in at.sidebar.error[0].value
    assert {m.label: m.value for m in at.metric}["Layers"] == "6"


def test_sidebar_lists_run_checkpoints_or_says_there_are_none(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("run").run()
    assert not at.exception
    assert any("No checkpoint" in i.value for i in at.sidebar.info)


def test_sidebar_good_local_folder_is_used_by_every_page(tmp_path, packaged):
    """A folder saved with save_pretrained (a tiny transformers BertForMaskedLM and its tokenizer), picked
    through the sidebar's local-folder input, becomes the model of the pages."""
    folder = save_tiny_bert(tmp_path / "my-bert", transformers.BertForMaskedLM, tokenizer=None,
                            num_hidden_layers=3, num_attention_heads=2, max_position_embeddings=128)
    packaged.tokenizer.save_pretrained(str(folder))
    at = open_page("overview")
    at.sidebar.radio(key="model_kind").set_value("local").run()
    at.sidebar.text_input(key="model_local_path").set_value(str(folder)).run()
    at.sidebar.button(key="model_local_use").click().run()
    check(at, None)
    assert not at.sidebar.error, [e.value for e in at.sidebar.error]
    assert at.session_state["model_source"] == ModelSource("local", str(folder), str(folder))
    assert any(str(folder) in c.value.replace("\\", "") for c in at.sidebar.caption)  # "In use: <folder>", escaped
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Layers"], metrics["Heads per layer"], metrics["Max positions"]) == ("3", "2", "128")
    assert metrics["Head on top"] == "mlm"
    at.switch_page("explorer/app_pages/masking.py").run()  # a page that needs the MLM head uses it
    check(at, None)
    assert any("top guess" in df.columns for df in dataframes(at))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A run directory holding one checkpoint of a tiny 2-layer, 2-head BERT with 64 positions."""
    root = tmp_path_factory.mktemp("runs")
    folder = save_tiny_bert(root / "tiny-run" / "checkpoints" / "step-000010", BertForPreTraining, tokenizer="full",
                            num_attention_heads=2)
    mark_complete(folder, 10)
    return root


def test_pages_follow_a_run_checkpoint_with_other_sizes(tiny_run, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tiny_run))
    at = open_page("attention")
    at.slider(key="att_layer").set_value(6)
    at.slider(key="att_head").set_value(12).run()
    at.sidebar.radio(key="model_kind").set_value("run").run()
    assert "tiny-run" in at.sidebar.selectbox(key="model_run_ref").format_func(
        at.sidebar.selectbox(key="model_run_ref").value)
    at.sidebar.button(key="model_run_use").click().run()
    check(at, None)
    assert at.slider(key="att_layer").value == 2 and at.slider(key="att_head").value == 2  # clamped to the new model
    each_attention_tab(at)
    at.text_area(key="att_text").set_value("token " * 100).run()
    msgs = check(at, "warning")
    assert any("reads at most 64" in w for w in msgs["warning"])
    at.switch_page("explorer/app_pages/overview.py").run()
    check(at, None)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "2" and metrics["Head on top"] == "pretraining"
    at.switch_page("explorer/app_pages/word_senses.py").run()
    check(at, None)
    assert charts(at) == 3 and at.slider(key="ws_layer").max == 2
    at.switch_page("explorer/app_pages/tokenization.py").run()
    check(at, None)
