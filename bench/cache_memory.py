"""What the server's shared caches can hold: each cache's entry measured at a short and at the longest input, times
its ``max_entries`` (read from the decorator in the source, so the table follows the code).

    python bench/cache_memory.py                 # the shipped MiniLM-MLM (6 layers, 12 heads, H = 384)

An entry is measured by running the bertcore function the cache wraps on the packaged model (arrays' ``nbytes``,
tensors' ``element_size() * numel()``, summed through dataclasses, tuples and dicts). The worst case is the sum of
``max_entries`` x the long entry; models themselves are counted apart (``_load_cached``, 4 entries). A cache's
``ttl`` only frees memory early; ``max_entries`` is what bounds it. docs/measurements/load.md holds the table.
"""

from __future__ import annotations

import harness

import re
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]

SHORT = "The keys to the cabinet [MASK] on the table."


def nbytes(value, seen=None) -> int:
    """Bytes of every array and tensor reachable from ``value`` (each object counted once)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.numel()
    if isinstance(value, dict):
        return sum(nbytes(v, seen) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v, seen) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return sum(nbytes(getattr(value, f), seen) for f in value.__dataclass_fields__)
    return 0


def limits(path: Path, name: str) -> tuple[int | None, str | None]:
    """``(max_entries, ttl)`` of the cached function ``name`` in ``path`` (None where not set)."""
    src = path.read_text()
    m = re.search(r"@st\.cache_(?:resource|data)\(([^\n]*)\)\s*\ndef " + re.escape(name) + r"\(", src)
    if m is None:
        raise SystemExit(f"no cached function {name} in {path}")
    entries = re.search(r"max_entries=(\d+)", m.group(1))
    ttl = re.search(r'ttl="([^"]+)"', m.group(1))
    return (int(entries.group(1)) if entries else None), (ttl.group(1) if ttl else None)


def main() -> None:
    harness.parse(__doc__)
    from bertcore import encode
    from bertcore.loading import sources
    from bertcore.analysis.attention import activations, rollout
    from bertcore.analysis.attention.words import merge_attention, word_groups
    from bertcore.analysis.representations import logit_lens

    lm = sources.load(sources.PACKAGED_MLM)
    tok = lm.tokenizer
    long_text = " ".join(["the students read the long book in the old library"] * 60)
    texts = {"short": SHORT, "long": long_text}

    def forward(text):
        return activations.run(lm.encoder, tok, text, None)

    def attention_maps(text):
        act = forward(text)
        return activations.hide_tokens(act.attentions, np.array(act.encoding.special_tokens_mask, dtype=bool))

    def word_attention(text):
        act = forward(text)
        return merge_attention(act.attentions, word_groups(act.encoding.tokens, act.encoding.word_ids))

    def head_mean(text):
        return forward(text).attentions.astype(np.float64).mean(axis=1)

    def rollout_maps(text):
        return rollout.rollout(head_mean(text)[:, None])

    def lens(text):
        ids = encode(tok, text, max_length=logit_lens.MAX_TOKENS).tensors()["input_ids"]
        return logit_lens.logit_lens(lm.model, ids, k=5)

    resources = ROOT / "explorer" / "resources.py"
    rows = [("forward", resources, forward), ("attention_maps", resources, attention_maps),
            ("word_attention", resources, word_attention), ("head_mean", resources, head_mean),
            ("rollout_maps", resources, rollout_maps),
            ("_lens", ROOT / "explorer" / "app_pages" / "masking.py", lens)]
    print(f"{'cache':16s} {'max_entries':>11s} {'ttl':>5s} {'short (KB)':>11s} {'longest (MB)':>13s} "
          f"{'worst (MB)':>11s}")
    total = 0.0
    for name, path, fn in rows:
        entries, ttl = limits(path, name)
        short = nbytes(fn(texts["short"])) / 2**10
        long_mb = nbytes(fn(texts["long"])) / 2**20
        worst = (entries or 0) * long_mb
        total += worst
        print(f"{name:16s} {entries!s:>11s} {ttl or '-':>5s} {short:11.1f} {long_mb:13.1f} {worst:11.0f}")
    params = sum(p.numel() * p.element_size() for p in lm.model.parameters()) / 2**20
    print(f"\nworst case of these caches: {total:.0f} MB; one loaded model: {params:.0f} MB of weights "
          f"(_load_cached keeps {limits(resources, '_load_cached')[0]})")
    print(f"longest input: {len(encode(tok, long_text, max_length=lm.max_length))} tokens "
          f"(the logit lens reads at most {logit_lens.MAX_TOKENS})")


if __name__ == "__main__":
    main()
