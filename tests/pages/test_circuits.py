"""The Circuits page: with a transcoder set in a run (random transcoders: the graph's algebra holds for any), the
default sentence's pruned graph is drawn with its scores, a node's details show, "Show the code" is recorded; without
transcoders the page says how to train them; bad input gets a sentence."""

from __future__ import annotations

import pytest
import torch

from bertcore.loading import sources
from bertcore.sae import transcoder as T
from explorer.as_code import RECORD_KEY

from ..circuits.test_attribution import random_transcoders
from .conftest import assert_clean, chart_specs, messages, page


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A runs root with one finished transcoder run for the shipped model (random weights, d_sae 32)."""
    root = tmp_path_factory.mktemp("runs")
    lm = sources.load(sources.PACKAGED_MLM)
    torch.manual_seed(0)
    for block, tc in random_transcoders(lm.config, d_sae=32).items():
        T.save(tc, root / "20261129-000000-sae" / "sae" / f"layer-{block + 1}", block)
    return root


def test_the_default_graph_is_drawn_with_its_scores(runs, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(runs))
    at = page("circuits")
    assert_clean(at)
    specs = chart_specs(at)
    graph = next(s for s in specs if "Attribution graph" in str(s["layout"].get("title", "")))
    kinds = {t.get("name") for t in graph["data"]}
    assert {"embedding", "logit (target)"} <= kinds
    labels = [m.label for m in at.metric]
    assert "Replacement score" in labels and "Completeness score" in labels
    rec = at.session_state[RECORD_KEY]["circuits"]
    assert "def graph(" in rec.code and "shipped.circuit(" in rec.code
    assert 0.0 <= rec.result.scores["replacement"] <= 1.0 and len(rec.result.node_ids) == len(rec.result.kinds)
    assert rec.result.targets == ["are − is"] or len(rec.result.targets) == 1
    # a lower threshold keeps fewer nodes
    at.slider(key="cir_threshold").set_value(0.3).run()
    assert_clean(at)
    assert len(at.session_state[RECORD_KEY]["circuits"].result.node_ids) <= len(rec.result.node_ids)


def test_the_download_is_the_pruned_graph_named_after_the_transcoders_model(runs, tmp_path):
    """The JSON the page offers is :func:`bertcore.circuits.export.neuronpedia_json` of the graph pruned at the
    page's threshold, its ``scan`` the model the transcoder files name (not a fixed name)."""
    import json
    import shutil

    from bertcore.circuits import attribution, export
    from bertcore.circuits.graph import prune_graph
    from explorer.views import circuits as views

    folder = tmp_path / "set"
    shutil.copytree(runs / "20261129-000000-sae" / "sae", folder)
    for layer in folder.glob("layer-*"):  # as a run on another model writes them
        cfg = json.loads((layer / "cfg.json").read_text())
        cfg["metadata"]["model_name"] = "my-bert"
        (layer / "cfg.json").write_text(json.dumps(cfg))
    text = "The keys to the cabinet [MASK] on the table."
    doc = json.loads(export.dumps(views.neuronpedia(sources.PACKAGED_MLM, text, ("are", "is"), folder,
                                                    node_threshold=0.5)))
    assert doc["metadata"]["scan"] == "my-bert" and doc["metadata"]["slug"] == export.slug_of(text)
    lm = sources.load(sources.PACKAGED_MLM)
    g = attribution.build(lm.model, lm.tokenizer, text, T.load_set(folder), contrast=("are", "is"))
    kept = prune_graph(g.edges, g.layout, g.probabilities, 0.5, 0.98)
    want = export.neuronpedia_json(g, kept, "my-bert", doc["metadata"]["slug"], text, 0.5, 0.98)
    assert doc["nodes"] == want["nodes"] and doc["links"] == want["links"]


def test_without_transcoders_the_page_says_how_to_train_them(tmp_path, monkeypatch):
    from bertcore.sae import catalog

    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    monkeypatch.setattr(catalog, "TRANSCODERS_DIR", "no-transcoders-here")  # as a model shipped without them
    at = page("circuits")
    assert_clean(at)
    assert any("has no transcoders yet" in i for i in messages(at)["info"])
    assert any("--kind transcoder" in c.value for c in at.code)


@pytest.mark.parametrize("state,expect", [
    ({"cir_text": "No mask here."}, "exactly one [MASK]"),
    ({"cir_text": "The [MASK] and the [MASK]."}, "exactly one [MASK]"),
    ({"cir_contrast": "are/unbelievably"}, "pick a word that is one token"),
    ({"cir_contrast": "are"}, "two words separated"),
    ({"cir_text": "word " * 80 + "[MASK]."}, "at most 64"),
])
def test_bad_input_gets_a_sentence(runs, monkeypatch, state, expect):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(runs))
    at = page("circuits", **state)
    assert_clean(at)
    said = " ".join(sum(messages(at).values(), []))
    assert expect in said.replace("\\", ""), said


def test_a_set_of_another_width_is_refused_with_a_sentence(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    for block in range(6):
        T.save(T.Transcoder(8, 8, 4, 2), root / "r" / "sae" / f"layer-{block + 1}", block)
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(root))
    at = page("circuits", cir_set="run r")
    assert_clean(at)
    said = " ".join(sum(messages(at).values(), []))
    assert "do not match the model's hidden size" in said, said


def test_steering_a_node_shows_the_real_models_change_beside_the_graphs(runs, monkeypatch):
    """The steering panel's numbers are bertcore.circuits.steer's, run on the page's inputs."""
    from bertcore.circuits import steer

    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(runs))
    at = page("circuits", cir_factor=2.0, cir_steer=True, cir_set="run 20261129-000000-sae")  # not the shipped set
    assert_clean(at)
    c = at.session_state[RECORD_KEY]["circuits"].result
    first = at.session_state["cir_members"][0]
    i = c.node_ids.index(first)
    node = (int(c.layers[i]), int(c.positions[i]), int(c.features[i]))
    lm = sources.load(sources.PACKAGED_MLM)
    tcs = T.load_set(runs / "20261129-000000-sae" / "sae")
    from bertcore.circuits import attribution

    text = "The keys to the cabinet [MASK] on the table."
    g = attribution.build(lm.model, lm.tokenizer, text, tcs, contrast=("are", "is"))
    want = steer.steer(lm.model, lm.tokenizer, text, tcs, [node], 2.0, graph=g, contrast=("are", "is"))
    shown = {m.label: m.value for m in at.metric}
    after = next(v for k, v in shown.items() if k.startswith("After "))
    assert after == f"{want.after:+.3f}"
    assert shown["The graph predicted"] == f"{want.before + want.predicted:+.3f}"
    at.radio(key="cir_hold").set_value("attention and LayerNorm scales (as the graph)").run()  # the graph is cached
    assert_clean(at)
    want = steer.steer(lm.model, lm.tokenizer, text, tcs, [node], 2.0, graph=g, contrast=("are", "is"),
                       freeze_layer_norms=True)
    after = next(m.value for m in at.metric if m.label.startswith("After "))
    assert after == f"{want.after:+.3f}" and want.change != 0.0


@pytest.mark.parametrize("folder", ["x" * 20_000, "/no/such/folder", "a\x00b"])
def test_a_typed_folder_that_is_not_one_gets_a_sentence(tmp_path, monkeypatch, folder):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = page("circuits", cir_set="a folder ...", cir_folder=folder)
    assert_clean(at)
    assert any("No folder at that path" in w for w in messages(at)["warning"])


def test_a_shared_server_offers_no_typed_folder(runs, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(runs))
    monkeypatch.setenv("BERT_EXPLORER_SHARED", "1")
    at = page("circuits")
    assert_clean(at)
    assert "a folder ..." not in at.selectbox(key="cir_set").options


def test_the_default_example_paints_from_the_shipped_graph_without_building_one(tmp_path, monkeypatch):
    """On a fresh clone the shipped transcoders are picked and the default sentence's pruned graph is read from the
    model's shipped.npz: no attribution graph is built (a different threshold builds one)."""
    from bertcore.circuits import attribution
    from bertcore.sae.catalog import TRANSCODERS_DIR
    from explorer.views import core

    if not (sources.shipped_mlm_dir() / TRANSCODERS_DIR).is_dir():
        pytest.skip("no shipped transcoders")
    core.clear()
    built = []
    real = attribution.build
    monkeypatch.setattr(attribution, "build", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = page("circuits")
    assert_clean(at)
    assert at.selectbox(key="cir_set").value == "shipped transcoders" and built == []
    c = at.session_state[RECORD_KEY]["circuits"].result
    assert c.targets == ["are - is"] and len(c.node_ids) > 10
    assert not any(m.label.startswith("After ") for m in at.metric)  # steering waits for its toggle
    at.slider(key="cir_threshold").set_value(0.5).run()
    assert_clean(at)
    assert built == [1]


def test_the_page_opens_on_the_most_influential_nodes_with_their_labels(tmp_path, monkeypatch):
    """With the shipped transcoders, the default graph draws its AT_A_GLANCE most influential nodes and the logit,
    each feature written with its stored label (the words it fires on, not "block b latent l"); the toggle draws
    every node the pruning keeps, the labels on hover."""
    from bertcore.sae.catalog import TRANSCODERS_DIR
    from explorer.views import circuits as views

    if not (sources.shipped_mlm_dir() / TRANSCODERS_DIR).is_dir():
        pytest.skip("no shipped transcoders")
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path))
    at = page("circuits")
    assert_clean(at)
    c = at.session_state[RECORD_KEY]["circuits"].result
    names = views.feature_names(sources.PACKAGED_MLM, sources.shipped_mlm_dir() / TRANSCODERS_DIR)
    feature = c.kinds.index("feature")
    block, latent = int(c.layers[feature]), int(c.features[feature])
    assert c.labels[feature] == f"{names[block][latent]} (block {block} #{latent})"

    def drawn():
        graph = next(s for s in chart_specs(at) if "Attribution graph" in str(s["layout"].get("title", "")))
        nodes = [t for t in graph["data"] if t.get("mode", "").startswith("markers") and t.get("customdata")]
        return sum(len(t["customdata"]) for t in nodes), [w for t in nodes for w in (t.get("text") or [])]

    count, written = drawn()
    assert count == views.AT_A_GLANCE + c.kinds.count("logit") < len(c.node_ids)
    assert written and not any(w.startswith("block ") for w in written)
    at.toggle(key="cir_full").set_value(True).run()
    assert_clean(at)
    count, written = drawn()
    assert count == len(c.node_ids) and written == []
