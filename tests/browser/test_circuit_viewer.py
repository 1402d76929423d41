"""circuit-tracer's graph viewer in Chromium, offline, on a graph of ``python -m bertcore.circuits graph``: the graph
and its feature files served by circuit-tracer's own local server (``circuit_tracer/frontend/local_server.py``), the
viewer's ``index.html`` as its wheel ships it. The viewer loads d3, Anthropic's jetpack, dagre and pako from the web;
here they come from npm (``bash .ci/install-viewer-js.sh``: d3 7.9.2 with d3-collection 1.0.7, the public d3-jetpack
2.3.0, dagre 0.8.5, pako 2.1.0) through Playwright's request routing, and nothing else leaves the machine. The public
jetpack lacks one method the viewer calls, ``d3.conventions(...).drawAxis(svg)``: :data:`JETPACK_SHIM` adds it (its
``d3.drawAxis`` on that layer). Anthropic's ``jetpack_2024-07-20.js`` is not on npm; the test stands in for it."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from bertcore.circuits import __main__ as cli
from bertcore.circuits import export
from bertcore.loading import sources

from .conftest import ROOT

VIEWER_JS = Path(os.environ.get("VIEWER_JS", ROOT / "artifacts" / "viewer-js"))
LIBS = ("d3.min.js", "d3-collection.min.js", "d3-jetpack.cjs", "dagre.min.js", "pako.min.js")
JETPACK_SHIM = ("(function(){var conv = d3.conventions; d3.conventions = function(o){ var c = conv(o); "
                "c.drawAxis = function(svg){ return d3.drawAxis(Object.assign({}, c, {svg: svg || c.svg})) }; "
                "return c }})();")
TEXT = "The keys [MASK] on the table."


def _d3_bundle() -> str:
    """What the viewer's ``static_js/lib/d3.js`` and ``jetpack_*.js`` give it: d3 7, ``d3.nest`` (d3-collection,
    without replacing d3 7's own ``map``/``set``...), the public jetpack (its CommonJS build, handed the d3 global),
    the shim."""
    read = {name: (VIEWER_JS / name).read_text(encoding="utf-8") for name in LIBS}
    return "\n;".join([
        read["d3.min.js"], "var __d3 = Object.assign({}, d3);", read["d3-collection.min.js"],
        "['map','set','keys','values','entries'].forEach(function(k){ if (__d3[k]) d3[k] = __d3[k] });",
        "(function(){var module={exports:{}};var exports=module.exports;var require=function(){return window.d3};\n"
        + read["d3-jetpack.cjs"] + "\n;for (var k in exports) window.d3[k] = exports[k];})();",
        JETPACK_SHIM])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A graph of the shipped model and transcoders (contrast are / is, with its feature files) in a data folder,
    served by circuit-tracer's local server on a free port: ``(port, folder, graph JSON)``."""
    if not all((VIEWER_JS / name).is_file() for name in LIBS):
        pytest.skip(f"the viewer's JavaScript libraries are not in {VIEWER_JS}: bash .ci/install-viewer-js.sh")
    local_server = pytest.importorskip("circuit_tracer.frontend.local_server")
    folder = tmp_path_factory.mktemp("graphs")
    shipped = sources.load(sources.PACKAGED_MLM).path / "transcoders"
    assert cli.main(["graph", TEXT, "--contrast", "are", "is", "--transcoders", str(shipped), "--out",
                     str(folder)]) == 0
    doc = json.loads((folder / f"{export.slug_of(TEXT)}.json").read_text(encoding="utf-8"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = local_server.serve(data_dir=str(folder), port=port)
    yield port, folder, doc
    server.stop()


def test_the_viewer_draws_every_node_and_opens_a_features_panel(served, browser):
    """In the session's Chromium (``browser``: one Playwright per test session; a second ``sync_playwright`` in the
    same thread refuses to start while the first runs)."""
    port, folder, doc = served
    d3_bundle = _d3_bundle()
    libs = {"static_js/lib/d3.js": d3_bundle, "unpkg.com/dagre@0.8.5/dist/dagre.min.js":
            (VIEWER_JS / "dagre.min.js").read_text(), "unpkg.com/pako@2.1.0/dist/pako.min.js":
            (VIEWER_JS / "pako.min.js").read_text()}
    outside = []

    def route(r):
        url = r.request.url
        if url.startswith(f"http://localhost:{port}/"):
            return r.continue_()
        for tail, body in libs.items():
            if url.endswith(tail):
                return r.fulfill(status=200, content_type="application/javascript", body=body)
        if url.startswith("https://transformer-circuits.pub/"):  # jetpack (in the bundle), hot reload, npy
            return r.fulfill(status=200, content_type="application/javascript", body="")
        outside.append(url)
        return r.abort()

    errors = []
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", route)
        page.goto(f"http://localhost:{port}/index.html")
        drawn, deadline = 0, time.monotonic() + 60
        while not drawn and time.monotonic() < deadline:
            drawn = page.evaluate("document.querySelectorAll('.link-graph text.node').length")
            time.sleep(0.5)
        # the viewer keeps embeddings, logits and the nodes within its pruning slider (the node threshold)
        kept = [n for n in doc["nodes"] if n["feature_type"] in ("embedding", "logit")
                or n["influence"] <= doc["metadata"]["node_threshold"]]
        assert drawn == len(kept) > len(doc["metadata"]["prompt_tokens"]), (drawn, len(kept), errors)
        ticks = page.evaluate("Array.from(document.querySelectorAll('.link-graph text')).map(e => e.textContent)")
        assert "are - is" in ticks  # the logit's token, read from its clerp
        # click a feature node: the feature panel loads its file and labels it L{block}/{latent}
        node = page.evaluate("""() => {
            var el = Array.from(document.querySelectorAll('.link-graph text.node')).find(e => e.textContent == '●');
            var r = el.getBoundingClientRect();
            return {x: r.x + r.width / 2, y: r.y + r.height / 2, id: el.__data__.node_id}}""")
        page.mouse.click(node["x"], node["y"])
        shown, deadline = 0, time.monotonic() + 30
        while not shown and time.monotonic() < deadline:
            shown = page.evaluate("document.querySelectorAll('.feature-example-list .ctx-container').length")
            time.sleep(0.3)
        block, latent, _ = node["id"].split("_")
        feature = next(n for n in doc["nodes"] if n["node_id"] == node["id"])
        path = folder / (doc["metadata"]["transcoder_list"][int(block)].removeprefix("./data/")
                         + f"/{feature['feature']}.json")
        examples = json.loads(path.read_text())["examples_quantiles"][0]["examples"]
        assert shown == len(examples) > 0
        title = page.evaluate("document.querySelector('.feature-detail .feature-title').textContent")
        title = title.replace("\xa0", " ")  # the viewer writes "Feature&nbsp;L{layer}/{featIdx}"
        assert title.startswith(f"Feature L{block}/{latent}")
        page.screenshot(path=str(ROOT / "artifacts" / "circuit-viewer.png"))
    finally:
        context.close()
    assert errors == [] and outside == []
