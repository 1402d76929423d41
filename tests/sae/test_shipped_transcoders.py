"""The transcoders shipped beside MiniLM-MLM (models/minilm-mlm/transcoders/): SAELens loads each and computes what
bertcore computes; the card (README.md) is what `python -m bertcore.sae transcoders` writes from their metrics.json;
each metrics.json's check numbers (FVU and L0 on the first held-out tokens) are what the files give today; their
feature indexes belong to these files."""

from __future__ import annotations

import pytest
import torch

from bertcore.sae.catalog import TRANSCODERS_DIR
from bertcore.loading import sources
from bertcore.sae import features, replacement
from bertcore.sae import transcoder as T
from bertcore.sae.io import read_metrics
from bertcore.sae.report import SHIPPED_SENTENCES, feature_params

MODEL = sources.shipped_mlm_dir()
SET = MODEL / TRANSCODERS_DIR
FOLDERS = sorted(SET.glob("layer-*"))
pytestmark = pytest.mark.skipif(not FOLDERS, reason="no shipped transcoders")


def test_sae_lens_loads_every_shipped_transcoder_and_computes_the_same():
    from sae_lens import SAE

    x = torch.randn(16, 384, generator=torch.Generator().manual_seed(0)) * 3
    for folder in FOLDERS:
        ours, cfg = T.load(folder)
        theirs = SAE.load_from_disk(str(folder))
        assert cfg["d_sae"] == ours.d_sae and folder.name == f"layer-{cfg['layer'] + 1}"
        torch.testing.assert_close(theirs(x), ours.reconstruct(x), atol=1e-4, rtol=1e-4)


def test_the_card_is_what_the_metrics_give():
    rows = [line for line in (SET / "README.md").read_text().split("## What was tried")[0].splitlines()
            if line.startswith("| ") and line[2:3].isdigit()]
    recomputed = [line for line in replacement.card(FOLDERS, ["cmd"]).splitlines()
                  if line.startswith("| ") and line[2:3].isdigit()]
    assert rows == recomputed and len(rows) == len(FOLDERS) == 6


def test_the_check_numbers_are_what_the_files_give_today():
    lm = sources.load(sources.PACKAGED_MLM)
    tcs = T.load_set(SET, lm.config.hidden_size, lm.config.num_hidden_layers)
    again = replacement.check_numbers(lm.model, lm.tokenizer, tcs)
    for folder in FOLDERS:
        m = read_metrics(folder)
        assert again[m["layer"]]["fvu"] == pytest.approx(m["check"]["fvu"], rel=1e-5), folder.name
        assert again[m["layer"]]["l0"] == pytest.approx(m["check"]["l0"], rel=1e-5), folder.name


def test_every_shipped_index_belongs_to_the_shipped_files():
    for folder in FOLDERS:
        block = T.load(folder)[1]["layer"]
        assert features.read(folder, MODEL, feature_params(block, SHIPPED_SENTENCES)) is not None, (
            f"{folder}: features.npz is stale; run python -m bertcore.sae features --sae {folder}")
