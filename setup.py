"""Build hook of the package (the metadata is in pyproject.toml): copies into a built wheel the files that the
installed package reads at run time but that live outside ``bertcore/`` and ``explorer/`` in the clone, so the clone
keeps one copy of each:

- ``models/minilm-mlm/`` (the default fill-mask model, its SAEs and shipped views) ->
  ``bertcore/_shipped/minilm-mlm/`` (``bertcore.loading.sources.SHIPPED_MLM_DIR`` looks there first);
- ``app.py`` -> ``bert_explorer_app.py`` at the top of site-packages: the app's page paths
  (``explorer/app_pages/<page>.py``) are relative to the main script's folder, which must hold ``explorer/``;
- ``.streamlit/config.toml`` -> ``explorer/streamlit_config.toml`` (``explorer.cli`` passes its settings).

An editable install (``pip install -e .``) copies nothing: it runs from the clone, where these files already are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: clone path -> path in the built package (names read by bertcore/loading/sources.py and explorer/cli.py)
BUNDLED = {
    "models/minilm-mlm": "bertcore/_shipped/minilm-mlm",
    "app.py": "bert_explorer_app.py",
    ".streamlit/config.toml": "explorer/streamlit_config.toml",
}


class BuildWithBundled(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for src, dest in BUNDLED.items():
            source, target = ROOT / src, Path(self.build_lib) / dest
            if not source.exists():
                raise FileNotFoundError(f"{source} is missing: the package needs it at run time")
            if target.is_dir():
                shutil.rmtree(target)  # no file left over from an earlier build of build/
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*", "__pycache__"))
            else:
                shutil.copy2(source, target)


setup(cmdclass={"build_py": BuildWithBundled})
