"""bertcore.settings: the one reader of every BERT_EXPLORER_* environment variable, and its table in the docs."""

import ast
import re
from pathlib import Path

import pytest

from bertcore import settings as S

from .conftest import ROOT


def test_every_variable_the_code_names_is_a_setting_and_only_the_settings_module_reads_the_environment():
    """No module reads a BERT_EXPLORER_* variable itself (os.environ / os.getenv with the name); every name the code
    and docs use is a field of Settings."""
    fields = {S.variable(name) for name in S.Settings.model_fields}
    named, readers = set(), []
    for path in [*ROOT.glob("bertcore/**/*.py"), *ROOT.glob("explorer/**/*.py"), ROOT / "app.py"]:
        text = path.read_text(encoding="utf-8")
        named |= set(re.findall(r"BERT_EXPLORER_[A-Z_]*[A-Z]", text))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "get", "getenv") and any(isinstance(a, ast.Constant) and str(a.value).startswith(S.PREFIX)
                                             for a in node.args):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not readers, f"read the setting from bertcore.settings instead: {readers}"
    assert named - fields <= {"BERT_EXPLORER_FULL_RECOMPUTE"}, named - fields  # a test switch, read by tests only


def test_values_types_and_messages(monkeypatch, tmp_path):
    for name in S.Settings.model_fields:
        monkeypatch.delenv(S.variable(name), raising=False)
    assert S.settings().view_cache_mb == 512.0 and S.settings().warmup is True and S.settings().shared is False
    monkeypatch.setenv("BERT_EXPLORER_VIEW_CACHE_MB", "64.5")
    monkeypatch.setenv("BERT_EXPLORER_WARMUP", "0")
    monkeypatch.setenv("BERT_EXPLORER_RUNS", str(tmp_path / "r"))
    now = S.settings()
    assert (now.view_cache_mb, now.warmup, now.runs) == (64.5, False, tmp_path / "r")
    monkeypatch.setenv("BERT_EXPLORER_VIEW_CACHE_MB", "0")
    with pytest.raises(S.SettingsError, match=r"BERT_EXPLORER_VIEW_CACHE_MB='0': .*greater than 0"):
        S.settings()


def test_the_docs_table_is_the_settings_table():
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert S.table() in page, "docs/settings.md's table differs from bertcore.settings.table(): paste it in"


def test_import_bertcore_imports_no_torch():
    """bertcore's names load on first use, so the settings (and `import bertcore`) come before torch."""
    import subprocess
    import sys

    code = "import sys, bertcore, bertcore.settings; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]
    assert Path(S.__file__).name == "settings.py"
