"""The package as pip installs it (pyproject.toml, setup.py): a regular, non-editable install of the clone's files,
used from a folder outside the clone, imports bertcore and explorer from the install, finds the shipped model there
and fills a [MASK] with it, runs the installed app's pages, and its ``bert-explorer`` command prints its usage and
starts the app's server with the project's settings (about 30 s in all).

Fast and offline: ``pip install --no-deps --no-build-isolation --no-index --target`` builds the wheel with this
venv's setuptools (requirements-dev-only.txt) and installs only our package; its dependencies are this venv's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import ROOT

PROBE = """
import json
import bertcore, bertcore.training.cli, explorer
from bertcore.readouts import fill_mask
from bertcore.loading import shipped_file, sources
from explorer import cli
from streamlit.testing.v1 import AppTest

folder = sources.shipped_mlm_dir()
lm = sources.load(sources.DEFAULT)
tok = lm.tokenizer
text = "The central bank raised interest " + tok.mask_token + " for the third time."
ids = tok(text, return_tensors="pt")["input_ids"]
preds = fill_mask.predict(lm.model, tok, ids, fill_mask.mask_token_positions(tok, ids), k=5)
# the installed script, run as streamlit runs it: the default page, then one reached by a page path relative to
# the script's folder (as app.py and the pages name them)
at = AppTest.from_file(str(cli.app_script()), default_timeout=120).run()
pages = [[e.value for e in at.exception], [t.value for t in at.title]]
at.switch_page("explorer/app_pages/masking.py").run()
pages += [[e.value for e in at.exception], [t.value for t in at.title]]
print(json.dumps({
    "files": [bertcore.__file__, explorer.__file__, bertcore.training.cli.__file__, cli.__file__],
    "app": [str(cli.app_script()), str(cli.config_file())], "model": str(folder), "top5": preds[0].tokens,
    "hash_ok": shipped_file.manifest(folder)["model_hash"] == shipped_file.model_hash(folder), "pages": pages}))
"""


def _clone_files(dest: Path) -> None:
    """What a clone holds (tracked files and untracked ones git does not ignore), hard-linked into ``dest``: the
    build writes its build/ and egg-info there, never in the working tree others use."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"needs a git checkout: {exc}")
    for rel in filter(None, listed.split("\0")):
        source, target = ROOT / rel, dest / rel
        if not source.is_file():  # deleted in the working tree, not yet committed
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another file system
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict, Path]:
    """``(site folder, environment that imports from it only, a working folder outside the clone)``."""
    tmp = tmp_path_factory.mktemp("install")
    clone, site, elsewhere = tmp / "clone", tmp / "site", tmp / "elsewhere"
    _clone_files(clone)
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(site), str(clone)],
                          capture_output=True, text=True, cwd=elsewhere, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STREAMLIT_"))}
    env.update(PYTHONPATH=str(site), PYTHONNOUSERSITE="1", TOKENIZERS_PARALLELISM="false")
    return site, env, elsewhere


@pytest.fixture(scope="module")
def probe(installed) -> dict:
    """What :data:`PROBE` finds, run once with the installed package (one torch import for the checks below)."""
    site, env, elsewhere = installed
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=elsewhere, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_imports_come_from_the_install(installed, probe):
    site = installed[0]
    assert all(Path(f).is_relative_to(site) for f in probe["files"]), probe["files"]
    # every sub-package, found by the include patterns; nothing else of the clone
    packages = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("bertcore/**/__init__.py")}
    packages |= {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("explorer/**/__init__.py")}
    assert all((site / p / "__init__.py").is_file() for p in packages), packages
    assert not (site / "tests").exists() and not (site / "bench").exists()


def test_metadata_reads_the_requirements_files(installed):
    site = installed[0]
    (info,) = site.glob("bert_explorer-0.1.0.dist-info")
    meta = (info / "METADATA").read_text(encoding="utf-8")

    def pins(name: str) -> list[str]:
        lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
        return [line.strip() for line in lines if line.strip() and not line.strip().startswith(("#", "-r"))]

    required = re.findall(r"^Requires-Dist: (.+)$", meta, re.M)
    assert [r for r in required if "extra ==" not in r] == pins("requirements.txt")
    assert [r.split(";")[0].strip() for r in required if "extra ==" in r] == pins("requirements-dev-only.txt")
    assert "Requires-Python: >=3.11" in meta and "Provides-Extra: dev" in meta
    scripts = (info / "entry_points.txt").read_text(encoding="utf-8")
    assert "bert-explorer = explorer.cli:main" in scripts and "bertcore-train = bertcore.training.cli:main" in scripts


def test_the_shipped_model_is_installed_and_fills_a_mask(installed, probe):
    folder = Path(probe["model"])
    assert folder == installed[0] / "bertcore" / "_shipped" / "minilm-mlm"
    assert "rates" in probe["top5"], probe["top5"]
    assert probe["hash_ok"]  # the views shipped beside it still apply to the copy
    for layer in (2, 4, 6):  # its SAEs (the Features page)
        assert (folder / "sae" / f"layer-{layer}" / "sae_weights.safetensors").is_file()


def test_the_app_script_and_settings_are_installed(installed, probe):
    site = installed[0]
    script, config = map(Path, probe["app"])
    assert script == site / "bert_explorer_app.py" and config == site / "explorer" / "streamlit_config.toml"
    assert script.read_text(encoding="utf-8") == (ROOT / "app.py").read_text(encoding="utf-8")
    assert config.read_text(encoding="utf-8") == (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert probe["pages"] == [[], ["BERT Explorer"], [], ["Masking"]], probe["pages"]  # no exception on either
    stems = re.findall(r'page\("(\w+)"', script.read_text(encoding="utf-8"))  # every page app.py lists
    assert stems and all((site / "explorer" / "app_pages" / f"{s}.py").is_file() for s in stems)


def test_bert_explorer_help(installed):
    site, env, elsewhere = installed
    for cmd in ([str(site / "bin" / "bert-explorer"), "--help"], [sys.executable, "-m", "explorer.cli", "-h"]):
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("usage: bert-explorer") and "streamlit run" in done.stdout, done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bert_explorer_starts_the_server_with_the_project_settings(installed):
    """From a folder without .streamlit/: the project's settings apply (its address, 127.0.0.1; headless, else
    streamlit would ask for an e-mail on a first start), and an extra argument (the port) goes to streamlit run and
    overrides the project's 8501."""
    site, env, elsewhere = installed
    port = _free_port()
    log = elsewhere / "server.log"
    url = f"URL: http://127.0.0.1:{port}"  # the config's address, the argument's port
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(site / "bin" / "bert-explorer"), "--server.port", str(port)], cwd=elsewhere,
                                env={**env, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        health, text, deadline = None, "", time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not (health == "ok" and url in text):
            time.sleep(0.3)
            text = log.read_text(encoding="utf-8", errors="replace")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as resp:
                    health = resp.read().decode()
            except OSError:
                pass
        assert health == "ok" and url in text, text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_show_the_code_snippet_runs_outside_the_clone(installed):
    """The Attention page's "Show the code" snippet, saved in a folder outside the clone, runs on the installed
    package and draws the same map as the snippet run here (to 1e-6)."""
    import numpy as np
    import plotly.basedatatypes

    from bertcore.loading.sources import DEFAULT
    from explorer.views import attention as views
    from explorer.views.code import snippet

    site, env, elsewhere = installed
    code = snippet("Attention: layer 2, head 4", views.one_head,
                   (DEFAULT, "The keys to the cabinet are on the table.", None, 1, 3, False, False),
                   draw=[(views.heatmap_figure, {})])
    quiet = "import plotly.basedatatypes\nplotly.basedatatypes.BaseFigure.show = lambda self, *a, **k: None\n"
    (elsewhere / "attention_view.py").write_text(
        quiet + code + "\nimport json\nimport numpy\nprint(json.dumps(numpy.asarray(result.attention).tolist()))\n")
    done = subprocess.run([sys.executable, "attention_view.py"], capture_output=True, text=True, cwd=elsewhere,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    there = np.array(json.loads(done.stdout.strip().splitlines()[-1]))
    show = plotly.basedatatypes.BaseFigure.show
    plotly.basedatatypes.BaseFigure.show = lambda self, *a, **k: None
    try:
        namespace: dict = {"__name__": "__main__"}
        exec(compile(code, "attention_view.py", "exec"), namespace)
    finally:
        plotly.basedatatypes.BaseFigure.show = show
    here = np.asarray(namespace["result"].attention)
    assert there.shape == here.shape == (12, 12)
    np.testing.assert_allclose(there, here, atol=1e-6)
