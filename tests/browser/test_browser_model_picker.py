"""The sidebar's model picker in a real browser, given bad folders and hub ids: an error in the sidebar, the model
in use stays, no file changes, and no code from a checkpoint runs (a pickle that would write a file).

Run:  python -m pytest tests/browser/test_browser_model_picker.py -v -s
"""

from __future__ import annotations

import pickle
import re
import struct
import time
from pathlib import Path

from bertcore.loading.sources import packaged_model_dir

from .conftest import SCREENSHOTS, Session
from .helpers import (  # noqa: F401 - fixtures used by name
    FULL,
    SIDEBAR,
    XSS,
    _sidebar_radio,
    message_in_page,
    problems,
    results,
    shoot,
    slug,
    visible_texts,
    wait_charts,
    wait_idle,
)


class _Bomb:
    """Unpickling this would write /tmp/pwned-bert (what a malicious pytorch_model.bin does)."""

    def __reduce__(self):
        return (exec, ("open('/tmp/pwned-bert', 'w').write('pwned')",))


def _bad_model_folders(tmp: Path) -> dict[str, str]:
    """Folders that claim to be BERT checkpoints but are not (made fresh in a temp folder)."""
    import shutil


    src = packaged_model_dir()
    made: dict[str, str] = {}

    def copy_meta(name: str) -> Path:
        d = tmp / name
        d.mkdir(parents=True, exist_ok=True)
        for f in ("config.json", "vocab.txt"):
            shutil.copy(src / f, d / f)
        return d

    d = copy_meta("corrupt-safetensors")
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{garbage")
    made["corrupt safetensors"] = str(d)
    d = copy_meta("truncated-safetensors")
    with open(src / "model.safetensors", "rb") as fh:
        (d / "model.safetensors").write_bytes(fh.read(1_000_000))
    made["truncated safetensors (1 MB of 90)"] = str(d)
    d = copy_meta("pickle-bomb")
    (d / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Bomb()}, protocol=2))
    made["pickle bomb .bin"] = str(d)
    d = tmp / "not-json-config"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_bytes(b"\xff\xfe not utf-8 {")
    shutil.copy(src / "vocab.txt", d / "vocab.txt")
    made["non-UTF-8 config.json"] = str(d)
    return made


def _try_model(session: Session, server, kind: str, name: str, value: str) -> tuple[str, list[str]]:
    """Type ``value`` into the sidebar's model field, press its button; what the user is told."""
    page = session.page
    t0 = time.perf_counter()
    field_loc = page.locator(f'{SIDEBAR} [data-testid="stTextInput"] input').first
    field_loc.fill(value)
    field_loc.press("Enter")
    wait_idle(page)
    button = page.locator(f"{SIDEBAR} button").filter(has_text=re.compile(r"\buse\b", re.I)).first
    if not button.is_enabled():
        result, found = "button disabled (nothing to load)", problems(session, server)
    else:
        button.click()
        wait_idle(page)
        found = problems(session, server)
        error = visible_texts(page, f'{SIDEBAR} [data-testid="stAlert"]', limit=1)
        result = f"message: {error[0][:160]}" if error else "no message"
    in_use = visible_texts(page, f'{SIDEBAR} [data-testid="stCaptionContainer"]', limit=1)
    if in_use:
        result += f"; {in_use[0][:60]}"
    if found:
        result = "FAIL: " + "; ".join(found)
    return f"{result} ({time.perf_counter() - t0:.1f} s)", found


def test_sidebar_model_picker_bad_folders_and_ids(session, server, results, tmp_path):  # noqa: F811
    """Bad local folders and hub ids: an error in the sidebar, the previous model stays in use,
    no file changes, no code from a checkpoint runs."""
    page = session.page
    page.goto(session.base_url, wait_until="domcontentloaded")
    wait_idle(page, start_ms=5_000, need_content=True)
    failures = []
    marker = Path("/tmp/pwned-bert")
    marker.unlink(missing_ok=True)
    if _sidebar_radio(page, r"local"):
        folders = _bad_model_folders(tmp_path)
        before = {p: sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in Path(p).iterdir())
                  for p in folders.values()}
        cases = {**folders, "missing folder": "/nonexistent/bert", "a file, not a folder": "/etc/hostname",
                 "20k chars": "a" * 20_000, "NUL byte": "abc\x00def", "emoji / RTL": "/tmp/🤖/مرحبا",
                 "HTML / script": XSS, "whitespace": "   "}
        lean = ("corrupt safetensors", "pickle bomb .bin", "20k chars", "HTML / script")
        for name, value in cases.items():
            if not FULL and name not in lean:
                continue
            result, found = _try_model(session, server, "local", name, value)
            results.add("sidebar: model picker", "Local folder", name, result)
            if found:
                failures.append(f"sidebar local folder / {name}: {'; '.join(found)[:800]}")
                shoot(page, SCREENSHOTS / f"fail-sidebar-{slug(name)}.png")
        after = {p: sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in Path(p).iterdir())
                 for p in folders.values()}
        assert after == before, "a failed load changed files on disk"
        assert not marker.exists(), "the pickle bomb ran"
    if _sidebar_radio(page, r"hub"):
        hub_cases = {"offline hub id": "bert-base-uncased", "path-like id": "../../etc/passwd", "HTML / script": XSS}
        for name, value in hub_cases.items():
            if not FULL and name != "offline hub id":
                continue
            result, found = _try_model(session, server, "hub", name, value)
            results.add("sidebar: model picker", "Hub id", name, result)
            if found:
                failures.append(f"sidebar hub id / {name}: {'; '.join(found)[:800]}")
    # still usable: back to the packaged model, the page renders
    if _sidebar_radio(page, r"packaged"):
        wait_charts(page)
        found = problems(session, server)
        results.add("sidebar: model picker", "Where from", "back to packaged", "FAIL: " + "; ".join(found) if found
                    else "ok, page renders")
        if found:
            failures.append(f"after bad models, packaged model: {'; '.join(found)}")
    shoot(page, SCREENSHOTS / "sidebar-model-picker.png")
    assert not failures, "\n".join(failures)
