"""The README's "Use in Jupyter" example runs as written, on a tiny saved HF BERT folder."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go
import pytest
import torch
import transformers

from .conftest import ROOT, save_tiny_bert

PLACEHOLDER = "/path/to/bert-folder"


def jupyter_example() -> str:
    """The first ```python block after the "## Use in Jupyter" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use in Jupyter", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert blocks, "the README's Use in Jupyter section has no python block"
    return blocks[0]


def test_example_is_short_and_uses_a_local_folder():
    code = jupyter_example()
    assert PLACEHOLDER in code
    assert len([line for line in code.splitlines() if line.strip()]) <= 12


@pytest.fixture
def tiny_folder(tmp_path) -> Path:
    return save_tiny_bert(tmp_path, transformers.BertModel, num_hidden_layers=5, num_attention_heads=2)


def test_example_runs(tiny_folder, monkeypatch):
    shown: list[go.Figure] = []
    monkeypatch.setattr(go.Figure, "show", lambda self, *a, **k: shown.append(self))
    code = jupyter_example().replace(PLACEHOLDER, str(tiny_folder))
    namespace: dict = {}
    exec(compile(code, "README.md (Use in Jupyter)", "exec"), namespace)  # noqa: S102 - our own README
    assert len(shown) == code.count(".show()") >= 2
    assert all(isinstance(f, go.Figure) and f.data for f in shown)
    act = namespace["act"]
    assert act.attentions.shape[:2] == (5, 2)
    assert namespace["maps"]["Rollout"].shape == (5, len(act.tokens))  # (layers, T): the rollout of "it"
    assert torch.is_tensor(namespace["loaded"].encoder.embeddings.word_embeddings.weight)


def test_second_example_runs(monkeypatch):
    """The logit-lens and patching example (packaged MiniLM-MLM) runs as written and shows two figures."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use in Jupyter", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[1]
    shown: list[go.Figure] = []
    monkeypatch.setattr(go.Figure, "show", lambda self, *a, **k: shown.append(self))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    assert len(shown) == 2 and "Logit lens" in shown[0].layout.title.text


def test_the_context_mixing_example_runs_after_the_patching_one(monkeypatch, capsys):
    """The README's mixing / DecompX block runs on the names the block before it defines."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use in Jupyter", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    mixing_block = next(b for b in blocks if "mixing.mixing(" in b)
    setup = next(b for b in blocks if "clean = encode(" in b)
    skip = ("patching.scan", "effect_heatmap", "lens_figures", "logit_lens.logit_lens", "top = ")
    setup = "\n".join(line for line in setup.splitlines() if not any(s in line for s in skip))
    namespace: dict = {}
    exec(compile(setup + "\n" + mixing_block, "README.md (context mixing)", "exec"), namespace)  # noqa: S102
    terms, clean = namespace["terms"], namespace["clean"]
    assert namespace["alti"].shape == (6, len(clean.tokens), len(clean.tokens))
    assert terms.contributions.shape == (len(clean.tokens) + 1, 1)
    assert abs(terms.contributions.sum() - terms.value[0]) < 1e-6
