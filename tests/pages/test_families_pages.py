"""AppTest: every page with each family's tiny model: no exception and no error box; the
pages that cannot apply to a family say why in one line (no NSP head for RoBERTa, DistilBERT, ELECTRA and
ModernBERT; no segment table for DistilBERT; no position table for ModernBERT)."""

from __future__ import annotations

import pytest

from bertcore.loading.sources import ModelSource

from ..test_families import save_family, tokenizers  # noqa: F401 - the fixture
from .conftest import PAGES, assert_clean, messages, page

#: the family and head of each tiny model (ELECTRA's discriminator: a head that is neither MLM nor NSP)
MODELS = {"roberta": "mlm", "distilbert": "mlm", "electra": "rtd", "modernbert": "mlm"}
#: every page but the guided tour and the Train page (they do not read the chosen model's architecture)
NAMES = sorted(p.stem for p in PAGES.glob("*.py") if p.stem not in ("__init__", "tour", "train"))
#: the smallest corpus each corpus-wide page offers (the architecture is the point here, not the corpus)
STATE = {"corpus_search": {"cs_segments": 20}, "findings": {"find_segments": 10},
         "projector": {"proj_points": 200, "proj_colour": "word"}}


@pytest.fixture(scope="module")
def family_sources(tmp_path_factory, tokenizers):  # noqa: F811
    root = tmp_path_factory.mktemp("families")
    return {f: ModelSource("local", str(save_family(root / f, f, h, tokenizers)[0]), f"tiny {f}")
            for f, h in MODELS.items()}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("family", list(MODELS))
def test_every_page_runs_with_every_family(family_sources, family, name):
    at = page(name, family_sources[family], **STATE.get(name, {}))
    assert_clean(at)
    assert not messages(at)["error"], messages(at)["error"]
    infos = " ".join(messages(at)["info"])
    if name == "next_sentence":
        assert "without next-sentence prediction" in infos
    if name == "embeddings" and family in ("distilbert", "modernbert"):
        assert "no segment table" in infos
    if name in ("positions", "embeddings") and family == "modernbert":
        assert "no position table" in infos
    if name == "forward_pass":  # RoPE, GeGLU, ELECTRA's projection: every recomputed step equals the model's
        assert any("Every step below equals" in s for s in messages(at)["success"])
    if name == "anatomy":
        frames = {tuple(d.value.columns): d.value for d in at.dataframe}
        table = next(v for k, v in frames.items() if "transformers name" in k)
        assert table["transformers name"].str.len().gt(0).all()
        arch = next(v for k, v in frames.items() if "shapes_b" in k)  # BERT-base vs ModernBERT-base
        ffn_in = arch[arch["part"] == "feed-forward in (H -> I)"].iloc[0]
        assert (ffn_in["shapes_a"], ffn_in["shapes_b"]) == ("3072 × 768, 3072", "2304 × 768")
