"""The shipped SAEs' card (models/minilm-mlm/sae/README.md) is what their files give: the metrics rows and the
label-purity rows that ``python -m bertcore.sae card`` writes from ``metrics.json`` and ``features.npz``, and every
stored index belongs to the shipped model and SAE files (else the Features page's first visit re-indexes)."""

from __future__ import annotations


import pytest

from bertcore.sae import features
from bertcore.sae import io as sae_io
from bertcore.sae.report import SHIPPED_SENTENCES, card, feature_params
from bertcore.loading.sources import shipped_mlm_dir

MODEL = shipped_mlm_dir()
SAES = sorted((MODEL / "sae").glob("layer-*"))


def table_rows(text: str) -> list[str]:
    """The card's per-layer rows (metrics and purity), not the hand-given 'what was tried' table."""
    body = text.split("## What was tried")[0]
    return [line for line in body.splitlines() if line.startswith("| ") and line[2:3].isdigit()]


@pytest.mark.skipif(not SAES, reason="no shipped SAEs")
def test_every_shipped_index_belongs_to_the_shipped_files():
    for folder in SAES:
        block = sae_io.layer_of(sae_io.read_cfg(folder)["metadata"]["hook_name"])  # 0-based: layer-2 reads block 1
        assert folder.name == sae_io.folder_name(block) == f"layer-{block + 1}"
        index = features.read(folder, MODEL, feature_params(block, SHIPPED_SENTENCES))
        assert index is not None, f"{folder}: features.npz is stale; run python -m bertcore.sae features"
        assert {"share", "pure_varied_share", "one_word_share"} <= set(index.purity["random"])


@pytest.mark.skipif(not SAES, reason="no shipped SAEs")
def test_the_shipped_card_gives_the_files_numbers():
    shipped = table_rows((MODEL / "sae" / "README.md").read_text())
    recomputed = table_rows(card(SAES, MODEL, ["cmd"]))
    assert len(shipped) == 4 * len(SAES)  # one metrics row and three purity rows per layer
    assert shipped == recomputed
