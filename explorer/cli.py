"""``bert-explorer``: start the app from any folder, as ``streamlit run app.py`` does in the repository's root.

Runs ``streamlit run`` on the app's script with the project's settings (``.streamlit/config.toml``, passed as
``--section.key=value`` flags, so they hold whatever the current folder is), then the user's own arguments, which
come later and so win (``bert-explorer --server.port 8600``). From a clone or an editable install it runs the clone's
``app.py`` and reads its ``.streamlit/config.toml``; from an installed wheel, the copies setup.py put in the package
(``bert_explorer_app.py`` beside ``explorer/``, ``explorer/streamlit_config.toml``). Imports no project module.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any, Sequence

#: the folder that holds ``explorer/``: the clone's root, or site-packages
_TOP = Path(__file__).resolve().parent.parent
#: where the script and the settings are: an installed wheel's copies (setup.py's BUNDLED), then the clone's files
APP_SCRIPTS = (_TOP / "bert_explorer_app.py", _TOP / "app.py")
CONFIG_FILES = (Path(__file__).resolve().parent / "streamlit_config.toml", _TOP / ".streamlit" / "config.toml")

USAGE = """\
usage: bert-explorer [STREAMLIT-RUN-OPTIONS] [-- APP-ARGS]

Start BERT Explorer, then open the URL it prints (http://localhost:8501 by default).

Runs `streamlit run` on the app with the project's settings (.streamlit/config.toml: this machine only,
port 8501, no browser opened, no file watcher). Every other argument goes to `streamlit run` after those
settings, so it overrides them (`streamlit run --help` lists the options), e.g.:
  bert-explorer --server.port 8600
  bert-explorer --server.address 0.0.0.0    (serves your network: only one you trust)
"""


class CliError(RuntimeError):
    """The app's script or settings are missing (a broken install)."""


def _first(paths: Sequence[Path], what: str) -> Path:
    for path in paths:
        if path.is_file():
            return path
    raise CliError(f"{what} is missing: looked for " + ", ".join(map(str, paths)) + " (reinstall the package)")


def app_script() -> Path:
    """The app's main script (the clone's ``app.py``, or its copy in an installed package)."""
    return _first(APP_SCRIPTS, "the app's script")


def config_file() -> Path:
    """The project's Streamlit settings (``.streamlit/config.toml``, or its copy in an installed package)."""
    return _first(CONFIG_FILES, "the app's Streamlit settings")


def _flags(table: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):  # a nested section, e.g. [theme.sidebar]
            out += _flags(value, f"{name}.")
        else:
            for item in value if isinstance(value, list) else [value]:  # a list option: its flag once per item
                text = str(item).lower() if isinstance(item, bool) else str(item)
                out.append(f"--{name}={text}")
    return out


def config_flags(path: Path | None = None) -> list[str]:
    """The settings of ``path`` (default :func:`config_file`) as ``streamlit run`` flags, in file order."""
    with open(path or config_file(), "rb") as f:
        return _flags(tomllib.load(f))


def streamlit_args(argv: Sequence[str] = ()) -> list[str]:
    """The arguments of ``streamlit``: ``run``, the script, the project's settings, then ``argv``."""
    return ["run", str(app_script()), *config_flags(), *argv]


def main(argv: Sequence[str] | None = None) -> int:
    """The ``bert-explorer`` command: ``--help`` prints :data:`USAGE`; anything else starts the server (blocks)."""
    args = list(sys.argv[1:] if argv is None else argv)
    ours = args[: args.index("--")] if "--" in args else args  # after "--": the app's own arguments
    if "-h" in ours or "--help" in ours:
        print(USAGE, end="")
        return 0
    try:
        full = streamlit_args(args)
    except (CliError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"bert-explorer: {exc}", file=sys.stderr)
        return 1
    from streamlit.web import cli as streamlit_cli

    return streamlit_cli.main(args=full, prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
