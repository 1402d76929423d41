"""Draw time in Chromium of the token-labelled figures (one head, side by side, rollout, neuron view,
attribution), as shipped (``token_axis``: at most ~40 labels, automargin off) and with Plotly's
automargin switched back on for every axis, in the same browser: the ratio is what automargin costs.

    python bench/bench_figure_draw.py          # needs /usr/bin/chromium (bash .ci/install-browser.sh)

Each figure's JSON is drawn with ``Plotly.newPlot`` ``--reps`` times; the median in ms is printed. The draw times
are measured in the browser (``performance.now()``, the JSON's transfer left out), and ``--json`` saves them as
pyperf benchmarks all the same.
"""

from __future__ import annotations

import harness

import statistics

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio
import pyperf
from playwright.sync_api import sync_playwright

from explorer.figures import attention, attribution, compare, rollout

DRAW = """async (spec) => { const f = JSON.parse(spec); const el = document.getElementById('g');
    Plotly.purge(el); const t0 = performance.now(); await Plotly.newPlot(el, f.data, f.layout);
    await new Promise(r => requestAnimationFrame(() => r())); return performance.now() - t0; }"""


def figures(t: int) -> dict[str, go.Figure]:
    rng = np.random.default_rng(0)
    a = rng.random((t, t)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    tokens = [f"tok{i}" for i in range(t)]
    return {"one head": attention.attention_heatmap(a, tokens),
            "side by side": compare.side_by_side(a, a[::-1], tokens),
            "rollout": rollout.contributions_figure({"raw": a[:6], "rollout": a[6:12], "flow": None}, tokens, "q"),
            "neuron view": rollout.neuron_figure(a[0, :64], a[:, :64], a[:, :64], a[0], a[0], tokens, "q"),
            "attribution": attribution.attribution_bars(tokens, a[0] - a[0].mean())}


def with_automargin(fig: go.Figure) -> go.Figure:
    out = go.Figure(fig)
    out.update_xaxes(automargin=True)
    out.update_yaxes(automargin=True)
    return out


def browser_timing(name: str, ms: list[float]) -> pyperf.Benchmark:
    """Draw times measured in the browser (ms) as a pyperf benchmark (seconds), as the harness keeps its own."""
    meta = {"name": name, "unit": "second", "loops": 1, "timer": "browser performance.now()"}
    return pyperf.Benchmark([pyperf.Run([v / 1000 for v in ms], metadata=meta, collect_metadata=True)])


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--reps", type=int, default=5))
    drawn: list[pyperf.Benchmark] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_content(f"<html><body><div id=g style='width:1200px'></div>"
                         f"<script>{plotly.offline.get_plotlyjs()}</script></body></html>")

        def ms(fig: go.Figure, name: str) -> float:
            spec = pio.to_json(fig)
            values = [page.evaluate(DRAW, spec) for _ in range(args.reps)]
            drawn.append(browser_timing(name, values))
            return statistics.median(values)

        for t in (128, 512):
            for name, fig in figures(t).items():
                shipped = ms(fig, f"{t} tokens, {name}: as shipped")
                auto = ms(with_automargin(fig), f"{t} tokens, {name}: with automargin")
                print(f"{t} tokens, {name}: {shipped:.0f} ms as shipped, {auto:.0f} ms with automargin "
                      f"({auto / shipped:.1f}x)", flush=True)
        browser.close()
    harness.save(args.json, drawn)


if __name__ == "__main__":
    main()
