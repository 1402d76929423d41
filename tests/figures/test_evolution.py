"""explorer.figures.evolution: attention and position similarity across a run's checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.figures import evolution as E


def softmax_rows(rng, t):
    x = rng.normal(size=(t, t))
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


def test_attention_evolution_small_multiples():
    rng = np.random.default_rng(0)
    maps = [softmax_rows(rng, 5) for _ in range(5)]
    fig = E.attention_evolution_figure(maps, ["[CLS]", "the", "cat", "the", "[SEP]"], [0, 10, 20, 30, 40],
                                       layer=1, head=0, cols=3)
    assert len(fig.data) == 5
    assert [a.text for a in fig.layout.annotations][:5] == [f"step {s}" for s in (0, 10, 20, 30, 40)]
    assert fig.layout.coloraxis.cmin == 0
    assert fig.layout.coloraxis.cmax == pytest.approx(max(m.max() for m in maps))  # shared by all panels
    assert len(set(fig.data[0].x)) == 5  # repeated tokens stay separate columns
    assert fig.layout.title.text.startswith("layer 2, head 1:")  # block 1, head 0: the UI's 1-based labels


@pytest.mark.parametrize("maps, tokens, steps, match", [
    ([], [], [], "at least one"),
    ([np.eye(3)], ["a", "b", "c"], [1, 2], "one step per checkpoint"),
    ([np.eye(3), np.eye(4)], ["a", "b", "c"], [1, 2], "same tokens"),
    ([np.eye(3)], ["a", "b"], [1], "one token per row"),
    ([np.ones((3, 3))], ["a", "b", "c"], [1], "sum to 1"),
])
def test_attention_evolution_rejects(maps, tokens, steps, match):
    with pytest.raises(ValueError, match=match):
        E.attention_evolution_figure(maps, tokens, steps)


def test_position_similarity_evolution_and_neighbours():
    rng = np.random.default_rng(1)
    sims = []
    for _ in range(3):
        v = rng.normal(size=(12, 8))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        sims.append(v @ v.T)
    fig = E.position_similarity_evolution_figure(sims, [0, 50, 100])
    assert len(fig.data) == 3 and fig.layout.coloraxis.cmin == -1
    line = E.neighbour_similarity_figure(sims, [100, 0, 50], max_offset=3)
    assert [t.name for t in line.data] == ["offset 1", "offset 2", "offset 3"]
    assert list(line.data[0].x) == [0, 50, 100]
    with pytest.raises(ValueError, match="outside"):
        E.position_similarity_evolution_figure([np.full((3, 3), 2.0)], [0])
