"""The steering check (bertcore.circuits.check and ``python -m bertcore.circuits check``): which nodes it steers,
how it scores the cases, what it reads, and the sentence it prints for bad input."""

from __future__ import annotations

import math

import pytest
import torch

from bertcore.circuits import attribution as A
from bertcore.circuits import check as C
from bertcore.circuits.__main__ import main
from bertcore.loading import sources
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.tokenization.tokenizer import load_tokenizer
from tests.circuits.test_attribution import TEXT, random_transcoders
from tests.conftest import tiny_bert


def test_the_node_is_the_most_influential_feature_and_the_supernode_one_place():
    model = tiny_bert(BertForMaskedLM, seed=3)
    tok = load_tokenizer(sources.packaged_model_dir())
    graph = A.build(model, tok, TEXT, random_transcoders(model.config), batch=64)
    influence = C.target_influence(graph)[:graph.layout.features]
    node, supernode = C.top_nodes(graph)
    assert list(node) == graph.features[int(influence.argmax())].tolist()
    assert 1 <= len(supernode) <= C.SUPERNODE and len({(b, p) for b, p, _ in supernode}) == 1
    index = {tuple(f): i for i, f in enumerate(graph.features.tolist())}
    got = [float(influence[index[n]]) for n in supernode]
    assert got == sorted(got, reverse=True)
    block, pos = supernode[0][:2]
    here = (graph.features[:, 0] == block) & (graph.features[:, 1] == pos)
    cell = float(influence[here].sum())  # no other (block, position) holds more influence
    for b, p in {tuple(f[:2]) for f in graph.features.tolist()}:
        other = (graph.features[:, 0] == b) & (graph.features[:, 1] == p)
        assert float(influence[other].sum()) <= cell + 1e-12


def _case(kind, predicted, frozen, recomputed, factor=2.0, steered="node", scales_frozen=None):
    scales_frozen = frozen if scales_frozen is None else scales_frozen
    return C.Case(kind, "t", "x", steered, [(0, 0, 0)], [1.0], factor, predicted, frozen, recomputed, scales_frozen,
                  0.0, [], [])


def test_the_summary_counts_the_direction_and_correlates():
    cases = [_case("agreement", 1.0, 0.5, -0.1), _case("agreement", -2.0, -1.0, -1.5),
             _case("agreement", 0.5, -0.2, 0.1, scales_frozen=0.4), _case("cloze", 1.0, 2.0, 2.0),
             _case("cloze", 0.0, 0.3, 0.0, steered="supernode")]  # no predicted change: right only if none came
    rows = {(r["sentences"], r["steered"], r["factor"]): r for r in C.summary(cases)}
    agreement = rows[("agreement", "node", "2x")]
    assert agreement["n"] == 3
    assert agreement["direction_frozen"] == pytest.approx(2 / 3)
    assert agreement["direction_recomputed"] == pytest.approx(2 / 3)
    assert agreement["direction_scales_frozen"] == 1.0
    assert agreement["median_ratio_frozen"] == pytest.approx(0.5)  # 0.5, 0.5 and -0.4
    assert math.isnan(rows[("cloze", "supernode", "2x")]["median_ratio_frozen"])  # no predicted change: no ratio
    assert agreement["pearson_frozen"] == pytest.approx(float(torch.corrcoef(torch.tensor(
        [[1.0, -2.0, 0.5], [0.5, -1.0, -0.2]]))[0, 1]))
    assert rows[("all", "all", "both")]["n"] == 5
    zero = rows[("cloze", "supernode", "2x")]
    assert zero["direction_frozen"] == 0.0 and zero["direction_recomputed"] == 1.0
    assert math.isnan(rows[("cloze", "node", "2x")]["pearson_frozen"])  # one point: no correlation
    table = C.markdown(C.summary(cases))
    assert "| agreement | node | 2x | 3 | 67% |" in table and "| 100% | " in table
    assert "direction right (attention and LayerNorm scales frozen)" in table.splitlines()[0]
    assert len({line.count("|") for line in table.splitlines()}) == 1  # every row as wide as the head


def test_cloze_files_and_transcoder_folders_are_read_or_refused(tmp_path):
    path = tmp_path / "cloze.tsv"
    path.write_text("# a comment\nsentence\tanswers\nThe [MASK] sat.\tcat|dog\n\nA [MASK] ran.\tdog\n")
    assert C.read_cloze(path) == ["The [MASK] sat.", "A [MASK] ran."]
    with pytest.raises(A.CircuitError, match="no cloze file"):
        C.read_cloze(tmp_path / "missing.tsv")
    with pytest.raises(A.CircuitError, match="holds no transcoder folders"):
        C.load_transcoders(tmp_path)


def test_the_command_prints_a_sentence_for_bad_input(tmp_path, capsys):
    code = main(["check", "--transcoders", str(tmp_path), "--sentences", "4", "--out", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "holds no transcoder folders" in err and "Traceback" not in err


def test_a_sentence_gives_four_cases_each_run_three_ways():
    """Node and supernode at -1x and 2x; each case's three actual changes are what :func:`steer` gives in that mode,
    and its prediction the graph's."""
    from bertcore.circuits.steer import predicted_change, steer

    model = tiny_bert(BertForMaskedLM, seed=3)
    tok = load_tokenizer(sources.packaged_model_dir())
    tcs = random_transcoders(model.config)
    cases, facts = C.check_sentence(model, tok, C.Sentence("cloze", TEXT, "test"), tcs, batch=64)
    assert [(c.steered, c.factor) for c in cases] == [("node", -1.0), ("node", 2.0), ("supernode", -1.0),
                                                       ("supernode", 2.0)]
    assert facts["tokens"] == len(A.encode(tok, TEXT).tokens)
    graph = A.build(model, tok, TEXT, tcs, batch=64)
    for c in cases:
        nodes = [tuple(n) for n in c.nodes]
        modes = (("frozen", {}), ("recomputed", {"freeze_attention": False}),
                 ("scales_frozen", {"freeze_layer_norms": True}))
        runs = {mode: steer(model, tok, TEXT, tcs, nodes, c.factor, graph=graph, **kw).change for mode, kw in modes}
        assert (c.actual_frozen, c.actual_recomputed, c.actual_scales_frozen) == (
            runs["frozen"], runs["recomputed"], runs["scales_frozen"])
        assert c.predicted == predicted_change(graph, nodes, c.factor)
    # three different runs (a node of the last block at the [MASK] reads no attention downstream: two may agree)
    assert any(c.actual_frozen != c.actual_recomputed for c in cases)
    assert all(c.actual_frozen != c.actual_scales_frozen for c in cases)
