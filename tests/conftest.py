"""Shared test set-up: offline hub, deterministic torch, the packaged model loaded once."""

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(scope="session")
def packaged():
    """The packaged all-MiniLM-L6-v2 as a bertcore ``LoadedModel`` (loaded once per session)."""
    from bertcore import sources

    return sources.load(sources.PACKAGED)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
