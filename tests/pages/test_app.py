"""The sidebar navigation: every page file is reachable, once, in a named section, all expanded."""

from __future__ import annotations

import ast
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def registered() -> dict[str, list[str]]:
    """Section -> page file stems, read from app.py's PAGES dict (page("<stem>", ...) calls)."""
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    pages = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "PAGES")
    return {k.value: [c.args[0].value for c in v.elts] for k, v in zip(pages.keys, pages.values)}


def test_every_page_file_is_in_exactly_one_section():
    stems = [s for section in registered().values() for s in section]
    files = sorted(p.stem for p in (ROOT / "explorer" / "app_pages").glob("*.py") if p.stem != "__init__")
    assert sorted(stems) == files
    assert len(stems) == len(set(stems))
    assert list(registered())[0] == "Start" and registered()["Start"] == ["overview"]


def test_app_opens_on_the_overview_with_the_model_picker():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    assert at.title[0].value == "BERT Explorer"  # the Overview page is the default
    assert at.sidebar.radio(key="model_kind").value == "packaged"
