"""The README and the documentation site point at files that exist: every image they show, every page mkdocs.yml's
nav lists, every file the README links to (GitHub renders the README; mkdocs never checks it). The site's own links
and the API pages are checked by ``mkdocs build --strict`` (.ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

DOCS = ROOT / "docs"
#: ![alt](path) and ![alt](path "title"): the image; [![alt](image)](link) gives the image
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # any link target, images' too
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def local(target: str) -> str | None:
    """The file part of a link target, or None for a URL, a mail address or an anchor on the same page."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
        return None
    return target.split("#", 1)[0].split("?", 1)[0]


def targets(pattern: re.Pattern, md: Path) -> list[str]:
    text = FENCE.sub("", md.read_text(encoding="utf-8"))  # code blocks hold no links
    return [t for t in (local(m) for m in pattern.findall(text)) if t]


def missing(pattern: re.Pattern, md: Path) -> list[str]:
    return [t for t in targets(pattern, md) if not (md.parent / t).is_file()]


@pytest.mark.parametrize("md", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_image_exists(md):
    assert not missing(IMAGE, md), f"{md.relative_to(ROOT)} shows images that do not exist"


def test_the_readme_shows_the_pages_and_links_only_existing_files():
    readme = ROOT / "README.md"
    images = targets(IMAGE, readme)
    assert len(images) >= 8 and all(t.startswith("docs/img/pages/") for t in images), images
    assert not missing(LINK, readme), "README.md links to files that do not exist"


def nav_files(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [f for value in node.values() for f in nav_files(value)]
    if isinstance(node, list):
        return [f for item in node for f in nav_files(item)]
    return []


def test_every_nav_page_exists_and_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    listed = [f for f in nav_files(config["nav"]) if not re.match(r"^[a-z]+://", f)]
    assert [f for f in listed if not (DOCS / f).is_file()] == [], "mkdocs.yml's nav lists missing pages"
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if not p.relative_to(DOCS).parts[0].startswith("_")}
    assert pages - set(listed) == set(), "pages left out of mkdocs.yml's nav"


def test_the_docs_show_the_readmes_set_up_commands():
    """docs/getting-started.md repeats the README's two set-up commands (which .ci/run runs): the same lines."""
    def commands(path: Path) -> list[str]:
        return [line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("python3 -m venv")]

    assert len(commands(ROOT / "README.md")) == 2
    assert commands(DOCS / "getting-started.md") == commands(ROOT / "README.md")
