"""AppTest of the Positional embeddings page: ranges out of bounds get a message, the learned table is
drawn beside sinusoids of the same size, the position regression (Wang & Chen 2020) is shown."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.readouts import positional
from bertcore.loading.sources import PACKAGED

from .conftest import array, assert_clean, chart_specs, messages, page, texts


@pytest.mark.parametrize("start,end,match", [(300, 600, "512 positions"), (100, 50, "empty"),
                                             (600, 700, "512 positions"), (-5, 10, ">= 0"),
                                             (0, 99_999_999, "512 positions"), (0, 0, None), (510, 511, None)])
def test_positions_ranges(start, end, match):
    at = page("positions", pos_start=start, pos_end=end)
    assert_clean(at)
    warnings = messages(at)["warning"]
    if match:
        assert any(match in w and "Showing positions" in w for w in warnings), warnings
    else:
        assert not warnings
    assert not messages(at)["error"]


def test_positions_learned_beside_sinusoids_of_the_same_size(packaged):
    at = page("positions", PACKAGED, pos_start=10, pos_end=41, pos_base=100.0)
    assert_clean(at)
    specs = chart_specs(at)
    assert len(specs) == 5 + 3  # values, cosine, PCA, offsets, linear read-out (Wang & Chen 2020); rotary (3)
    tables = specs[0]
    titles = [a["text"] for a in tables["layout"]["annotations"]]
    assert titles == ["learned (this model)", "sinusoidal (base 100)"]
    learned, sinus = (array(tables["data"][i]["z"]) for i in (0, 1))
    assert learned.shape == sinus.shape == (32, packaged.config.hidden_size)
    np.testing.assert_allclose(learned, packaged.encoder.embeddings.position_embeddings.weight[10:42].detach().numpy(),
                               atol=1e-6)
    np.testing.assert_allclose(sinus, positional.sinusoidal(32, packaged.config.hidden_size, base=100.0, start=10),
                               atol=1e-6)


@pytest.mark.parametrize("base", [1.0, -3.0, 0.0])
def test_positions_bad_sinusoid_base_gets_a_message(base):
    at = page("positions", pos_base=base)
    assert_clean(at)
    assert any("base must be above 1" in w for w in messages(at)["warning"])


def test_positions_with_small_model(mlm_source):
    at = page("positions", source=mlm_source)
    assert_clean(at)


def test_positions_page_shows_the_position_regression():
    at = page("positions", PACKAGED)
    assert_clean(at)
    found = [t for t in texts(at.markdown) + texts(at.caption) if "Wang & Chen" in t]
    assert found and "mean absolute error" in found[0]
    metrics = {m.label: m.value for m in at.metric}
    learned = float(metrics["Learned table: mean absolute error"].split()[0])
    assert learned > 5 and float(metrics["Sinusoidal table: mean absolute error"].split()[0]) < 1
    assert any(spec for spec in at.get("plotly_chart") if "pos_regression" in str(spec.proto.id))
