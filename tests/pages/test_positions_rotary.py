"""AppTest of the Rotary positions section of the Positional embeddings page: with a
learned-position BERT it shows ModernBERT's settings and the numeric relative-property check; with a tiny
ModernBERT the learned-table views say why they do not apply, and the model's own bases and heads are shown."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.modeling import rotary
from bertcore.loading.sources import ModelSource

from ..test_families import save_family, tokenizers  # noqa: F401 - the fixture
from .conftest import array, assert_clean, chart_specs, messages, page, texts


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory, tokenizers):  # noqa: F811
    folder, _ = save_family(tmp_path_factory.mktemp("modernbert") / "m", "modernbert", "mlm", tokenizers)
    return ModelSource("local", str(folder), "tiny ModernBERT")


def _metric(at) -> tuple[str, str]:
    m = at.metric[-1]
    return m.label, m.value


def test_rotary_section_beside_learned_positions(mlm_source):
    at = page("positions", mlm_source)
    assert_clean(at)
    assert any("Rotary positions" in t for t in texts(at.header))
    label, value = _metric(at)
    assert "q(m)·k(n) − q(m+s)·k(n+s)" in label and float(value) < 1e-5
    specs = chart_specs(at)
    assert len(specs) == 5 + 3  # learned vs sinusoidal (5), then frequencies, score grid, decay
    waves = specs[5]
    assert [d["name"] for d in waves["data"]] == ["global layers (base 160,000)", "local layers (base 10,000)"]
    np.testing.assert_allclose(array(waves["data"][0]["y"]), rotary.wavelengths(64, 160_000.0).numpy(), rtol=1e-6)
    grid = array(specs[6]["data"][0]["z"])
    assert grid.shape == (48, 48)
    assert max(np.ptp(np.diagonal(grid, o)) for o in range(-47, 48)) < 1e-6
    assert any("no rotary positions" in t for t in messages(at)["info"])


def test_rotary_model_shows_its_own_bases_and_heads(modernbert):
    at = page("positions", modernbert)
    assert_clean(at)
    assert not messages(at)["error"] and not messages(at)["warning"]
    assert any("no position table" in t for t in messages(at)["info"])
    specs = chart_specs(at)
    assert len(specs) == 4  # frequencies, score grid, decay, the heads by offset
    assert [d["name"] for d in specs[0]["data"]] == ["global layers (base 160,000)", "local layers (base 10,000)"]
    assert len(array(specs[0]["data"][0]["y"])) == 8 // 2  # head size 8: 4 planes
    heads = array(specs[3]["data"][0]["z"])
    assert heads.shape == (4, 33)  # 4 heads, offsets -16..16
    assert any("is a global layer" in t or "is a local layer" in t for t in texts(at.caption))
    at.slider(key="rope_layer").set_value(2).run()
    assert_clean(at)
    assert any("Layer 2 is a local layer" in t for t in texts(at.caption))
    far = array(chart_specs(at)[3]["data"][0]["z"])[:, [0, -1]]  # offsets -16 and 16: outside the 4-token window
    assert np.all(np.nan_to_num(far) == 0)
