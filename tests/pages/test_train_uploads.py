"""Uploads on the Train page (AppTest with st.file_uploader): bad files are refused in the page with a
message and leave nothing on disk; good files are saved under <runs root>/uploads/ and become the run's data."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from .conftest import page

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
GOOD_CSV = "text,label\n" + "".join(f"sentence number {i} is {'good' if i % 2 else 'bad'},{'pos' if i % 2 else 'neg'}\n"
                                    for i in range(12))


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def upload(task: str, name: str, data: bytes, mime: str = "text/plain") -> AppTest:
    at = page("train", train_recipe="custom")
    if task == "finetune":
        at.radio(key="train_task").set_value("finetune").run()
        at.selectbox(key="train_ft_data").set_value("upload").run()
    else:
        at.selectbox(key="train_pt_data").set_value("upload").run()
    uploader = at.get("file_uploader")[0]
    uploader.set_value((name, data, mime)).run()
    assert not at.exception
    return at


def plain(text) -> str:
    """A message without the Markdown escapes the page adds to user-provided text."""
    return str(text).replace("\\", "")


def errors(at: AppTest) -> str:
    return " | ".join(plain(e.value) for e in at.error)


def refused(at: AppTest, runs_root: Path, *needles: str) -> None:
    text = errors(at)
    for needle in needles:
        assert needle in text, text
    # the start button is refused too, and nothing was written or launched
    at.button(key="train_start").click().run()
    assert not at.exception
    assert any("uploaded file was refused" in str(e.value) for e in at.error)
    assert files_under(runs_root) == []


@pytest.mark.parametrize("task,name,data,needles", [
    ("finetune", "latin1.csv", "text,label\ncaf\xe9 ok,pos\n".encode("latin-1"), ("not UTF-8 text", "0xe9")),
    ("finetune", "nolabel.csv", b"text,score\nhello,1\nworld,2\n", ("lacks column(s) ['label']", "'text', 'score'")),
    ("finetune", "empty.csv", b"", ("is empty",)),
    ("finetune", "image.csv", PNG, ("not a text file", "PNG image")),
    ("finetune", "few.csv", b"text,label\na,pos\nb,neg\n", ("2 usable labelled row(s)", "at least 10")),
    ("finetune", "one.csv", ("text,label\n" + "x y,pos\n" * 12).encode(), ("single label", "at least 2")),
    ("pretrain", "corpus.txt", b"\x00\x01\x02binary\x00", ("not a text file", "NUL bytes")),
    ("pretrain", "one.txt", b"just one document without blank lines\n", ("1 non-empty document", "at least 2")),
    ("pretrain", "huge.txt", b"a" * (50 * 1024 * 1024 + 1), ("limited to 50 MB",)),
])
def test_bad_upload_is_refused_with_a_message_and_leaves_nothing(runs_root, task, name, data, needles):
    at = upload(task, name, data)
    refused(at, runs_root, *needles)


def test_good_csv_is_saved_under_uploads_and_becomes_the_dataset(runs_root):
    at = upload("finetune", "My data (v2).csv", GOOD_CSV.encode("utf-8-sig"), "text/csv")
    assert errors(at) == ""
    [saved] = files_under(runs_root)
    assert saved.parent == runs_root / "uploads"
    assert saved.name.endswith("-My_data_v2_.csv") and len(saved.name.split("-")[0]) == 16
    assert saved.read_text(encoding="utf-8") == GOOD_CSV  # BOM removed
    assert any("12 labelled rows, 2 labels" in plain(s.value) for s in at.success)
    assert not [w for w in at.warning if "refused" in str(w.value) or "Upload a file" in str(w.value)]
    # the same file again: reused, not rewritten, nothing else appears
    at.get("file_uploader")[0].set_value(("My data (v2).csv", GOOD_CSV.encode("utf-8-sig"), "text/csv")).run()
    assert files_under(runs_root) == [saved]


def test_good_text_corpus_is_accepted(runs_root):
    corpus = "First document. It has two sentences.\n\nSecond document here.\n\nA third one.\n"
    at = upload("pretrain", "../../etc/corpus.txt", corpus.encode())
    assert errors(at) == ""
    [saved] = files_under(runs_root)
    assert saved.parent == runs_root / "uploads" and saved.name.endswith("-corpus.txt")
    assert any("3 documents" in plain(s.value) for s in at.success)


def test_path_input_still_offered_and_no_upload_means_no_start(runs_root):
    at = page("train", train_recipe="custom")
    at.selectbox(key="train_pt_data").set_value("local").run()
    assert at.text_input(key="train_pretrain_path") is not None
    at.selectbox(key="train_pt_data").set_value("upload").run()
    at.button(key="train_start").click().run()
    assert not at.exception
    assert any("Upload a file first" in str(e.value) for e in at.error)
    assert files_under(runs_root) == []
