"""The graph JSON as circuit-tracer's and Neuronpedia's viewers read it (bertcore.circuits.export), and the ``graph``
and ``serve`` commands: circuit-tracer 0.5.0's own pydantic models (``circuit_tracer/frontend/graph_models.py``,
``feature_models.py``) load every export; the logit clerps parse as ``attribution_graph/util-cg.js`` parses them;
``feature`` is the Cantor pair the viewer unpairs for a graph of ``schema_version`` 1; slugs and scans are in
Neuronpedia's character set. Graphs of a tiny random BERT and of the shipped MiniLM-MLM with random transcoders (the
format does not depend on the weights); the feature files from the shipped transcoders and their stored index."""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import urllib.request

import pytest
import torch

from bertcore.circuits import __main__ as cli
from bertcore.circuits import attribution as A
from bertcore.circuits import export
from bertcore.circuits.graph import prune_graph
from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.sae import transcoder as T
from bertcore.tokenization.tokenizer import load_tokenizer
from tests.conftest import tiny_bert

from .test_attribution import TEXT, random_transcoders

NEURONPEDIA_NAME = re.compile(r"[a-zA-Z0-9_.-]+")


def graph_models():
    """circuit-tracer's graph pydantic models (the submodule alone: no torch or transformer_lens import)."""
    return pytest.importorskip("circuit_tracer.frontend.graph_models")


def cantor_unpair(z: int) -> tuple[int, int]:
    """The viewer's ``util.cantorUnpair`` (``frontend/assets/util.js``), line for line."""
    w = math.floor((math.sqrt(8 * z + 1) - 1) / 2)
    t = (w * w + w) / 2
    y = z - t
    return int(w - y), int(y)


def viewer_logit(clerp: str) -> tuple[str, float]:
    """What ``util-cg.js`` reads from a logit's clerp: ``logitToken`` (``clerp.split('"')[1].split('" k(p=')[0]``)
    and ``logitPct`` (``+clerp.split('(p=')[1].split(')')[0]``); an IndexError where the JS throws."""
    return clerp.split('"')[1].split('" k(p=')[0], float(clerp.split("(p=")[1].split(")")[0])


@pytest.fixture(scope="module", params=["tiny-fills", "tiny-contrast", "shipped-contrast"])
def exported(request):
    if request.param.startswith("tiny"):
        model, tok = tiny_bert(BertForMaskedLM, seed=3), load_tokenizer(sources.packaged_model_dir())
    else:
        lm = sources.load(sources.PACKAGED_MLM)
        model, tok = lm.model, lm.tokenizer
    contrast = ("are", "is") if request.param.endswith("contrast") else None
    graph = A.build(model, tok, TEXT, random_transcoders(model.config), contrast=contrast, batch=64)
    pruned = prune_graph(graph.edges, graph.layout, graph.probabilities)
    n = model.config.num_hidden_layers
    plain = export.neuronpedia_json(graph, pruned, "tiny-bert", export.slug_of(TEXT), TEXT)
    local = export.neuronpedia_json(graph, pruned, "tiny-bert", export.slug_of(TEXT), TEXT,
                                    feature_dirs=[f"./data/features/tiny-bert/block-{b}" for b in range(n)])
    return graph, pruned, plain, local


def test_circuit_tracers_models_load_every_export(exported):
    """circuit-tracer's ``Metadata``, ``QParams``, ``Node``, ``Link`` and ``Model`` load the JSON as written (the
    fields its viewer needs: ``transcoder_list``, ``clickedId``, ``sg_pos``), and keep every node's fields."""
    G = graph_models()
    graph, pruned, *docs = exported
    for doc in docs:
        doc = json.loads(export.dumps(doc))
        meta = G.Metadata(**doc["metadata"])
        G.QParams(**doc["qParams"])
        for node in doc["nodes"]:
            assert G.Node(**node).model_dump(include=set(node)) == node
        for link in doc["links"]:
            G.Link(**link)
        model = G.Model(**doc)
        assert len(model.nodes) == int(pruned.nodes.sum()) and len(model.links) == int(pruned.edges.sum())
        # the version a round trip through circuit-tracer's Metadata writes is the one the export wrote
        assert meta.model_dump()["schema_version"] == doc["metadata"]["schema_version"] == 1


def test_feature_is_the_cantor_pair_the_viewer_unpairs(exported):
    """With ``schema_version`` 1 the viewer labels a feature ``L{layer}/{featIdx}``, ``featIdx`` from
    ``cantorUnpair(feature)``: it gives back the block and latent of the node (circuit-tracer's own pairing too)."""
    G = graph_models()
    graph, pruned, doc, _ = exported
    features = [n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder"]
    assert features
    for node in features:
        block, latent, pos = (int(v) for v in node["node_id"].split("_"))
        assert cantor_unpair(node["feature"]) == (block, latent) and int(node["layer"]) == block
        assert node["feature"] == G._cantor_pairing(block, latent)
    assert len({n["feature"] for n in features}) == len({tuple(n["node_id"].split("_")[:2]) for n in features})


def test_logit_clerps_parse_as_both_viewers_parse_them(exported):
    """Every logit clerp is circuit-tracer's ``Output "{token}" (p={prob:.3f})`` (its own ``Node.logit_node`` writes
    the same text), and ``util-cg.js``'s splits give the target's token and probability."""
    G = graph_models()
    graph, pruned, doc, _ = exported
    logits = [n for n in doc["nodes"] if n["feature_type"] == "logit"]
    assert len(logits) == len(graph.targets) >= 1
    for node, target in zip(logits, graph.targets):
        token, p = viewer_logit(node["clerp"])
        assert token == target.label and p == pytest.approx(target.probability, abs=5e-4)
        theirs = G.Node.logit_node(pos=node["ctx_idx"], vocab_idx=node["feature"], token=target.label,
                                   num_layers=int(node["layer"]) - 1, token_prob=target.probability)
        assert node["clerp"] == theirs.clerp and node["node_id"] == theirs.node_id
    assert [n["is_target_logit"] for n in logits] == [True] + [False] * (len(logits) - 1)
    if len(graph.targets[0].token_ids) == 2:  # a contrast: a virtual index past the vocabulary, as circuit-tracer's
        assert logits[0]["feature"] == len(graph.targets[0].vector)


def test_slugs_and_scans_are_in_neuronpedias_character_set(exported):
    graph, pruned, doc, local = exported
    assert export.slug_of("Well, the keys (old ones) [MASK] here.") == "bert-well-the-keys-old-ones-mask"
    assert export.slug_of("Ça [MASK], élève!") == "bert-a-mask-l-ve"
    assert export.slug_of("The keys [MASK] on the table.") == "bert-the-keys-mask-on-the-table"
    assert export.safe_name("minilm-mlm") == "minilm-mlm" and export.safe_name("run 3/sae") == "run-3-sae"
    with pytest.raises(ValueError, match="no character"):
        export.safe_name("(( ))")
    for d in (doc, local):
        assert NEURONPEDIA_NAME.fullmatch(d["metadata"]["slug"]) and NEURONPEDIA_NAME.fullmatch(d["metadata"]["scan"])
    odd = export.neuronpedia_json(graph, pruned, "my model (v2)", "a, b [MASK]", TEXT)["metadata"]
    assert (odd["scan"], odd["slug"]) == ("my-model-v2", "a-b-MASK")
    assert local["metadata"]["scan"] == "custom-tiny-bert" and local["metadata"]["transcoder_list"][0].startswith(
        "./data/features/tiny-bert/")
    with pytest.raises(ValueError, match="one per block|blocks"):
        export.neuronpedia_json(graph, pruned, "x", "y", TEXT, feature_dirs=["./a"])


# ----------------------------------------------------------------------------- the commands
@pytest.fixture(scope="module")
def random_set(tmp_path_factory):
    """A transcoder set for the packaged MiniLM-MLM with random weights (d_sae 32: a small, fast graph)."""
    folder = tmp_path_factory.mktemp("set")
    torch.manual_seed(0)
    for block, tc in random_transcoders(sources.load(sources.PACKAGED_MLM).config, d_sae=32).items():
        T.save(tc, folder / f"layer-{block + 1}", block)
    return folder


@pytest.mark.parametrize("argv,message", [
    (["No mask here."], "exactly one [MASK]"),
    (["The [MASK] and the [MASK]."], "exactly one [MASK]"),
    ([TEXT, "--contrast", "are", "cabinetry"], "'cabinetry' is 2 tokens"),
])
def test_the_graph_command_says_what_is_wrong_and_exits_2(argv, message, random_set, tmp_path, capsys):
    assert cli.main(["graph", *argv, "--transcoders", str(random_set), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out" / "graph-metadata.json").exists()


def test_transcoders_of_another_model_exit_2(tmp_path, capsys):
    other = tiny_bert(BertForMaskedLM, seed=3).config  # hidden size 32, not MiniLM's 384
    for block, tc in random_transcoders(other, d_sae=8).items():
        T.save(tc, tmp_path / "set" / f"layer-{block + 1}", block)
    assert cli.main(["graph", TEXT, "--transcoders", str(tmp_path / "set"), "--out", str(tmp_path / "out")]) == 2
    assert "trained on another model" in capsys.readouterr().err


def test_the_graph_command_writes_what_circuit_tracers_local_server_serves(random_set, tmp_path, capsys):
    """``DIR/{slug}.json`` and ``DIR/graph-metadata.json`` (one entry per slug, a second graph added), both loaded by
    circuit-tracer's models; then ``serve DIR`` serves them where the viewer's ``index.html`` and ``init-cg.js`` fetch
    them (``./data/graph-metadata.json``, ``./graph_data/{slug}.json``) and the viewer's page itself."""
    G = graph_models()
    out = tmp_path / "out"
    for text in (TEXT, "The keys to the cabinet [MASK] on the table.", "A dog [MASK] here."):
        assert cli.main(["graph", text, "--contrast", "are", "is", "--transcoders", str(random_set), "--no-features",
                         "--threads", "1", "--out", str(out)]) == 0
    slugs = [g["slug"] for g in json.loads((out / "graph-metadata.json").read_text())["graphs"]]
    assert slugs == [export.slug_of(TEXT), export.slug_of("A dog [MASK] here.")]
    for entry in json.loads((out / "graph-metadata.json").read_text())["graphs"]:
        G.Metadata(**entry)
        G.Model(**json.loads((out / f"{entry['slug']}.json").read_text()))
    assert "serve" in capsys.readouterr().out

    pytest.importorskip("circuit_tracer.frontend.local_server")
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    got = {}

    def fetch_then_stop(_seconds):  # in place of the command's wait: fetch as the viewer does, then Ctrl-C
        for path in ("/data/graph-metadata.json", f"/graph_data/{slugs[1]}.json", "/index.html"):
            with urllib.request.urlopen(f"http://localhost:{port}{path}", timeout=10) as r:
                got[path] = r.read()
        raise KeyboardInterrupt

    real_sleep = cli.time.sleep
    cli.time.sleep = fetch_then_stop
    try:
        assert cli.main(["serve", str(out), "--port", str(port)]) == 0
    finally:
        cli.time.sleep = real_sleep
    assert json.loads(got["/data/graph-metadata.json"])["graphs"][1]["slug"] == slugs[1]
    assert json.loads(got[f"/graph_data/{slugs[1]}.json"])["metadata"]["slug"] == slugs[1]
    assert b"attribution_graph/util-cg.js" in got["/index.html"]


def test_serve_without_circuit_tracer_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    import sys

    (tmp_path / "graph-metadata.json").write_text('{"graphs": []}')
    monkeypatch.setitem(sys.modules, "circuit_tracer.frontend.local_server", None)  # as if not installed
    assert cli.main(["serve", str(tmp_path)]) == 2
    assert "pip install --no-deps circuit-tracer==0.5.0" in capsys.readouterr().err
    assert cli.main(["serve", str(tmp_path / "nothing")]) == 2
    assert "no graph-metadata.json" in capsys.readouterr().err


def test_the_feature_files_are_circuit_tracers_feature_model(tmp_path, capsys):
    """With the shipped transcoders (their held-out index stored beside them): one file per feature node, where the
    viewer looks (``transcoder_list[layer]/{feature}.json`` under the server's ``./data/``), loaded by
    circuit-tracer's ``feature_models.Model``: the top contexts with an activation per token, peaking at
    ``train_token_ind`` with the index's top activation, and the top logits."""
    F = pytest.importorskip("circuit_tracer.frontend.feature_models")
    shipped = sources.load(sources.PACKAGED_MLM).path / "transcoders"
    text = "The keys [MASK] on the table."
    out = tmp_path / "out"
    assert cli.main(["graph", text, "--contrast", "are", "is", "--transcoders", str(shipped), "--threads", "2",
                     "--out", str(out)]) == 0
    doc = json.loads((out / f"{export.slug_of(text)}.json").read_text())
    dirs = doc["metadata"]["transcoder_list"]
    assert doc["metadata"]["scan"].startswith("custom-") and len(dirs) == 6
    features = [n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder"]
    assert features
    for node in features:
        path = out / (dirs[int(node["layer"])].removeprefix("./data/") + f"/{node['feature']}.json")
        feature = F.Model(**json.loads(path.read_text()))
        block, latent = cantor_unpair(node["feature"])
        assert feature.index == latent and feature.top_logits and feature.bottom_logits
        top = feature.examples_quantiles[0].examples[0]
        assert len(top.tokens) == len(top.tokens_acts_list) > top.train_token_ind
        assert top.tokens_acts_list[top.train_token_ind] == pytest.approx(feature.act_max, rel=2e-2)
        assert top.tokens[0] == "[CLS]" and top.tokens[-1] == " [SEP]" and "##" not in "".join(top.tokens)
        words = [a for t, a in zip(top.tokens, top.tokens_acts_list) if t.strip() not in ("[CLS]", "[SEP]")]
        assert max(words) == pytest.approx(feature.act_max, rel=2e-2)  # the index ranks no special token
        assert 0 < feature.activation_frequency < 1 and len(feature.quantile_values) == 100
        assert feature.quantile_values == sorted(feature.quantile_values)
        assert sum(feature.histogram) > 0
    files = list((out / "features").rglob("*.json"))
    assert len(files) == len({(n["layer"], n["feature"]) for n in features})
    shutil.rmtree(out)


def test_a_features_clerp_is_its_label(exported):
    """With names (``{block: [label]}``, :func:`bertcore.sae.report.set_label_texts`'s texts), each feature node's clerp
    is its feature's label; a block without names keeps ``"block b latent l"``; the models still load it."""
    G = graph_models()
    graph, pruned, *_ = exported
    n = graph.layout.errors // len(graph.tokens)
    names = {b: [f"label {b}/{i}" for i in range(64)] for b in range(1, n)}  # block 0 unnamed
    doc = export.neuronpedia_json(graph, pruned, "tiny-bert", export.slug_of(TEXT), TEXT, names=names)
    features = [node for node in doc["nodes"] if node["feature_type"] == "cross layer transcoder"]
    assert features
    for node in features:
        block, latent, _ = (int(v) for v in node["node_id"].split("_"))
        assert node["clerp"] == (f"label {block}/{latent}" if block else f"block 0 latent {latent}")
        G.Node(**node)
