"""Attribution graphs (bertcore.circuits): exact in float64, as circuit-tracer tests its own. On a tiny random BERT, a
tiny random ModernBERT and on the shipped MiniLM-MLM, with random transcoders (exactness holds for any weights): each
target's incoming edges plus its constant rebuild its value, and scaling one feature, error or embedding node by 2 in
the frozen model changes every target by that node's adjacency column."""

from __future__ import annotations

import pytest
import torch

from bertcore.circuits import attribution as A
from bertcore.circuits.graph import compute_graph_scores, prune_graph, square
from bertcore.loading import sources
from bertcore.modeling.config import BertConfig
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.sae.transcoder import Transcoder
from bertcore.tokenization.tokenizer import load_tokenizer
from bertcore.training.models import MODERN_FIELDS
from tests.conftest import tiny_bert

TEXT = "The keys to the cabinet [MASK] on the table."


def random_transcoders(config, d_sae: int = 32, seed: int = 0) -> dict[int, Transcoder]:
    """One transcoder per block with random weights (a skip path and biases too): the graph's algebra is exact for
    any weights, trained or not."""
    out = {}
    g = torch.Generator().manual_seed(seed)
    h = config.hidden_size
    for layer in range(config.num_hidden_layers):
        tc = Transcoder(h, h, d_sae, 4, seed=seed + layer)
        with torch.no_grad():
            tc.W_enc.copy_(torch.randn(h, d_sae, generator=g) / h ** 0.5)
            tc.b_enc.copy_(torch.randn(d_sae, generator=g) * 0.1)
            tc.W_skip.copy_(torch.randn(h, h, generator=g) * 0.02)
            tc.b_dec.copy_(torch.randn(h, generator=g) * 0.05)
            tc.threshold.fill_(0.4)  # a few active latents per token: a small graph
        out[layer] = tc.eval()
    return out


@pytest.fixture(scope="module", params=["tiny", "modernbert", "shipped"])
def case(request):
    if request.param == "tiny":
        model = tiny_bert(BertForMaskedLM, seed=3)
        tok = load_tokenizer(sources.packaged_model_dir())
    elif request.param == "modernbert":  # pre-LN, rotary, gated, local attention (a 4-token window) in blocks 1-2
        tok = load_tokenizer(sources.packaged_model_dir())
        torch.manual_seed(3)
        model = BertForMaskedLM(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=3,
                                           num_attention_heads=2, intermediate_size=48, max_position_embeddings=64,
                                           local_attention=4, **MODERN_FIELDS)).eval()
    else:
        lm = sources.load(sources.PACKAGED_MLM)
        model, tok = lm.model, lm.tokenizer
    tcs = random_transcoders(model.config)
    return model, tok, tcs, A.build(model, tok, TEXT, tcs, batch=64)


def _targets(rm: A.Replacement, graph: A.Graph, **run) -> torch.Tensor:
    """Every target's value in the frozen model (features' pre-activations, then the logit targets)."""
    with torch.no_grad():
        inputs, logits = rm.run(1, **run)
    feats = [rm.pre_activations(inputs, int(b), [int(p)], [int(f)])[0, 0] for b, p, f in graph.features]
    logit = [logits[0, graph.mask_position] @ t.vector for t in graph.targets]
    return torch.stack(feats + logit)


def test_incoming_edges_and_the_constant_rebuild_every_target(case):
    model, tok, tcs, graph = case
    rebuilt = graph.edges.sum(1) + graph.constants
    torch.testing.assert_close(rebuilt, graph.values, atol=1e-8, rtol=0)
    assert not graph.dropped.any() and graph.n_active == graph.layout.features  # a whole graph
    assert graph.layout.features > 10 and len(graph.targets) >= 1


def test_scaling_a_feature_error_or_embedding_moves_every_target_by_its_column(case):
    model, tok, tcs, graph = case
    rm = A.Replacement(model, tcs, A.encode(tok, TEXT).tensors())
    base = _targets(rm, graph)
    lay, t = graph.layout, len(graph.tokens)
    s = int(graph.edges[:, :lay.features].abs().sum(0).argmax())  # the feature with the largest effects, doubled
    layer, p, f = (int(v) for v in graph.features[s])
    scale = torch.ones(1, t, tcs[layer].d_sae, dtype=torch.float64)
    scale[0, p, f] = 2.0
    moved = _targets(rm, graph, scale_features={layer: scale}) - base
    torch.testing.assert_close(moved, graph.edges[:, s], atol=1e-6, rtol=0)
    assert moved.abs().max() > 1e-6  # the feature does move something
    delta = torch.zeros(1, t, model.config.hidden_size, dtype=torch.float64)
    block = min(2, model.config.num_hidden_layers - 1)
    error = lay.part("errors").start + block * t + 3
    delta[0, 3] = rm.errors[block][3]  # block 0 or 2, position 3: its error added once more
    moved = _targets(rm, graph, deltas={block: delta}) - base
    torch.testing.assert_close(moved, graph.edges[:, error], atol=1e-6, rtol=0)
    emb = torch.zeros(1, t, rm.embedding.shape[-1], dtype=torch.float64)
    emb[0, 1] = rm.embedding[1]  # the first word's embedding node
    moved = _targets(rm, graph, deltas={"embed": emb}) - base
    torch.testing.assert_close(moved, graph.edges[:, lay.part("embeddings").start + 1], atol=1e-6, rtol=0)


def test_pruning_and_scores_read_the_graph(case):
    model, tok, tcs, graph = case
    replacement, completeness = compute_graph_scores(graph.edges, graph.layout, graph.probabilities)
    assert 0 <= replacement <= 1 and 0 <= completeness <= 1
    pruned = prune_graph(graph.edges, graph.layout, graph.probabilities)
    lay = graph.layout
    assert pruned.nodes[lay.part("embeddings")].all() and pruned.nodes[lay.part("logits")].all()
    kept = pruned.nodes[lay.part("features")]
    assert 0 < int(kept.sum()) < lay.features


def test_bad_input_gets_a_sentence(case):
    model, tok, tcs, _ = case
    with pytest.raises(A.CircuitError, match="exactly one \\[MASK\\]"):
        A.build(model, tok, "No mask here.", tcs)
    with pytest.raises(A.CircuitError, match="exactly one \\[MASK\\]"):
        A.build(model, tok, "[MASK] and [MASK].", tcs)
    with pytest.raises(A.CircuitError, match="'cabinetry' is 2 tokens"):
        A.build(model, tok, TEXT, tcs, contrast=("are", "cabinetry"))
    with pytest.raises(A.CircuitError, match="blocks \\[1\\] have none"):
        A.build(model, tok, TEXT, {k: v for k, v in tcs.items() if k != 1})


def test_the_neuronpedia_json_holds_the_pruned_graph(case):
    """The export has the fields Neuronpedia's graph schema requires, one node per kept node with a unique id, and one
    link per kept edge carrying its adjacency weight."""
    import json

    from bertcore.circuits.export import dumps, neuronpedia_json

    model, tok, tcs, graph = case
    pruned = prune_graph(graph.edges, graph.layout, graph.probabilities)
    built = neuronpedia_json(graph, pruned, "tiny-bert", "keys-cabinet", TEXT)
    text = dumps(built)  # what the page's download writes
    doc = json.loads(text)
    assert doc == json.loads(json.dumps(built)) and len(text) < len(json.dumps(built))  # the same, compact
    assert set(doc) == {"metadata", "qParams", "nodes", "links"}
    assert {"slug", "scan", "prompt_tokens", "prompt"} <= set(doc["metadata"])
    assert doc["metadata"]["prompt_tokens"] == graph.tokens
    required = {"node_id": str, "feature": int, "layer": str, "ctx_idx": int, "feature_type": str, "jsNodeId": str,
                "clerp": str}
    for node in doc["nodes"]:
        for key, kind in required.items():
            assert isinstance(node[key], kind), (key, node)
    ids = [n["node_id"] for n in doc["nodes"]]
    assert len(ids) == len(set(ids)) == int(pruned.nodes.sum())
    kinds = [n["feature_type"] for n in doc["nodes"]]
    assert kinds.count("embedding") == len(graph.tokens) and kinds.count("logit") == len(graph.targets)
    assert len(doc["links"]) == int(pruned.edges.sum()) > 0
    index = {name: i for i, name in enumerate(ids)}
    kept = pruned.nodes.nonzero().flatten().tolist()
    adjacency = square(graph.edges, graph.layout)
    for link in doc["links"][:50]:
        s, t = kept[index[link["source"]]], kept[index[link["target"]]]
        assert link["weight"] == pytest.approx(float(adjacency[t, s]), rel=1e-5)  # 6 significant digits
    short = neuronpedia_json(graph, pruned, "tiny-bert", "keys-cabinet", TEXT, digits=3)["links"]
    assert [k["weight"] for k in short] == [float(f"{k['weight']:.3g}") for k in doc["links"]]
    assert len(dumps(short)) < len(dumps(doc["links"]))


def test_building_a_graph_beside_plain_forwards_on_one_model_leaves_both_exact():
    """One thread builds a graph while another runs plain forwards on the same (shared) model: each gets what it gets
    alone, and the model keeps its mode, its requires_grad and no hooks (the graph runs on a private copy)."""
    import threading

    model = tiny_bert(BertForMaskedLM, seed=3)
    tok = load_tokenizer(sources.packaged_model_dir())
    tcs = random_transcoders(model.config)
    ids = A.encode(tok, TEXT).tensors()
    with torch.no_grad():
        plain_alone = model(**ids).logits
    alone = A.build(model, tok, TEXT, tcs, batch=64).edges
    grads = [p.requires_grad for p in model.parameters()]
    got, errors = {}, []

    def builder():
        got["adjacency"] = A.build(model, tok, TEXT, tcs, batch=64).edges

    def plain():
        for _ in range(40):
            with torch.no_grad():
                if not torch.equal(model(**ids).logits, plain_alone):
                    errors.append("plain")

    threads = [threading.Thread(target=builder), threading.Thread(target=plain)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and torch.equal(got["adjacency"], alone)
    assert not model.training and [p.requires_grad for p in model.parameters()] == grads
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
