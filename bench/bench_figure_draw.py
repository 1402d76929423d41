"""Draw time in Chromium of the token-labelled figures (one head, side by side, rollout, neuron view,
attribution), as shipped (``token_axis``: at most ~40 labels, automargin off) and with Plotly's
automargin switched back on for every axis, in the same browser: the ratio is what automargin costs.

    python bench/bench_figure_draw.py          # needs /usr/bin/chromium (bash .ci/install-browser.sh)

Each figure's JSON is drawn with ``Plotly.newPlot`` ``--reps`` times; the median in ms is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio
from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.figures import attention, attribution, compare, rollout  # noqa: E402

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_content(f"<html><body><div id=g style='width:1200px'></div>"
                         f"<script>{plotly.offline.get_plotlyjs()}</script></body></html>")

        def ms(fig: go.Figure) -> float:
            spec = pio.to_json(fig)
            return statistics.median(page.evaluate(DRAW, spec) for _ in range(args.reps))

        for t in (128, 512):
            for name, fig in figures(t).items():
                shipped, auto = ms(fig), ms(with_automargin(fig))
                print(f"{t} tokens, {name}: {shipped:.0f} ms as shipped, {auto:.0f} ms with automargin "
                      f"({auto / shipped:.1f}x)", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
