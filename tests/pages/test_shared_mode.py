"""AppTest of the shared-server mode (explorer/server/shared_mode.py, BERT_EXPLORER_SHARED=1): a typed path is
refused with
a message, another session's run cannot be cancelled, an upload over the limit is refused, the Overview says the
mode is on; and the operator's file, the per-session run limit, the queue position and the session's folder."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertcore import runs
from bertcore.loading.sources import DEFAULT, ModelSource
from explorer.server import shared_mode

from .conftest import APP, TIMEOUT, fake_run, open_page, page, texts, tiny_folder

OTHER = shared_mode.owner_token("somebody else's session id")


def csv(rows: int, word: str = "sentence") -> bytes:
    """A good fine-tuning CSV (text, label) of ``rows`` rows, about 31 bytes each."""
    return ("text,label\n" + "".join(f"{word} number {i} is {'good' if i % 2 else 'bad'},{'pos' if i % 2 else 'neg'}\n"
                                     for i in range(rows))).encode()



@pytest.fixture
def shared(tmp_path, monkeypatch, runs_root):
    """Shared mode on, with an operator file: one listed model folder, a 1 KB upload limit, a 1.5 KB quota, one run
    per session, session folders under ``tmp_path / "sessions"``. Returns the file's settings."""
    config = tmp_path / "shared.toml"
    config.write_text('max_upload_mb = 0.001\nupload_quota_mb = 0.0015\nmax_runs_per_session = 1\n'
                      'session_folder = "sessions"\n\n[models]\n"Listed tiny" = "listed"\n', encoding="utf-8")
    monkeypatch.setenv(shared_mode.ENV_FLAG, "1")
    monkeypatch.setenv(shared_mode.ENV_CONFIG, str(config))
    s = shared_mode.settings()
    assert s.enabled and s.session_root == tmp_path / "sessions"
    assert s.folders == {"Listed tiny": str(tmp_path / "listed")}
    return s


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def set_owner(run_dir: Path, owner: str | None) -> None:
    config = runs.read_config(run_dir)
    runs.write_json(run_dir / "run.json", {**config, "owner": owner})


def in_use(at: AppTest) -> ModelSource:
    """The sidebar's model (the default until one is chosen)."""
    try:
        return at.session_state["model_source"]
    except KeyError:
        return DEFAULT


def button_keys(at: AppTest) -> set[str]:
    return {b.key for b in at.button}


# ------------------------------------------------- the four checks: typed paths, others' runs, uploads, the Overview
def test_a_typed_path_is_refused_with_a_clear_message(shared, tmp_path):
    """No folder input in the picker; a link that names a folder (which would load) is refused before it is read,
    with a message; the operator's listed folder loads under its label."""
    folder = tiny_folder(tmp_path / "typed")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = f"local:{folder}"
    at.run()
    assert not at.exception, at.exception
    assert at.sidebar.radio(key="model_kind").options == ["Packaged with the app (offline)",
                                                          "Listed by this server's operator",
                                                          "Checkpoint of a training run"]
    errors = texts(at.sidebar.error)
    assert len(errors) == 1 and "shared server" in errors[0] and "typing a folder path" in errors[0], errors
    assert any("could not be loaded" in t for t in texts(at.sidebar.info))
    assert in_use(at) == DEFAULT  # still the default model
    assert {m.label: m.value for m in at.metric}["Layers"] == "6"
    # a run checkpoint's path typed into a link is a typed path too
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["model"] = f"run:{folder}"
    at.run()
    assert any("typing its path" in t for t in texts(at.sidebar.error))
    assert in_use(at) == DEFAULT
    # the operator's folder is offered by label and loads
    tiny_folder(tmp_path / "listed")
    at.sidebar.radio(key="model_kind").set_value("server").run()
    at.sidebar.button(key="model_server_use").click().run()
    assert not at.exception and not at.sidebar.error, texts(at.sidebar.error)
    assert in_use(at).label == "Listed tiny"
    assert {m.label: m.value for m in at.metric}["Layers"] == "2"


def test_another_sessions_run_can_be_watched_but_not_cancelled(shared, runs_root, sleeper):
    d = fake_run(runs_root, "20261122-100000-pretrain-live", state="running", pid=sleeper.pid, steps=())
    set_owner(d, OTHER)
    at = page("train", train_recipe="custom")
    assert not at.exception, at.exception
    assert "running" in at.get("progress")[0].proto.text and at.get("plotly_chart")  # watched: progress, curves
    assert "train_cancel" not in button_keys(at)
    assert any("started by another session" in t for t in texts(at.info))
    assert at.dataframe[0].value.to_dict("records")[0]["started by"] == "another session"
    assert sleeper.poll() is None
    # a run without an owner (started before the mode, or from the command line) is watch-only too
    set_owner(d, None)
    at.run()
    assert "train_cancel" not in button_keys(at) and sleeper.poll() is None
    # and a finished run of another session cannot be resumed
    runs.write_json(d / "status.json", {**runs.read_status(d), "state": "cancelled"})
    fake_run(runs_root, "20261122-090000-pretrain-done", state="cancelled", steps=(10,))
    at = page("train", train_recipe="custom", train_view=str(runs_root / "20261122-090000-pretrain-done"))
    assert not at.exception and "train_resume" not in button_keys(at)
    assert any("Only the session that started this run" in t for t in texts(at.caption))


def test_an_upload_over_the_limit_is_refused(shared, runs_root):
    """1 KB per file: a 1.2 KB CSV is refused with the limit in the message, and nothing is written anywhere."""
    at = page("train", train_recipe="custom")
    at.radio(key="train_task").set_value("finetune").run()
    at.selectbox(key="train_ft_data").set_value("upload").run()
    data = csv(40)
    assert 1048 < len(data) < 1572
    at.get("file_uploader")[0].set_value(("big.csv", data, "text/csv")).run()
    assert not at.exception
    errors = " ".join(texts(at.error)).replace("\\", "")
    assert f"big.csv is {len(data) / 1024:.1f} KB: uploads on this shared server are limited to 1.0 KB per file" \
        in errors, errors
    at.button(key="train_start").click().run()
    assert any("uploaded file was refused" in t for t in texts(at.error))
    assert [p for p in runs_root.rglob("*") if p.is_file()] == []
    assert [p for p in shared.session_root.rglob("*") if p.is_file()] == []


def test_the_overview_says_when_the_mode_is_on(shared, monkeypatch):
    at = open_page("overview")
    note = [t for t in texts(at.info) if "Shared server mode is on" in t]
    assert len(note) == 1 and "only the session that started a run can cancel" in note[0]
    assert "1.0 KB per file and 1.5 KB per session" in note[0] and "1 run(s) per session" in note[0]
    monkeypatch.delenv(shared_mode.ENV_FLAG)
    at = open_page("overview")
    assert not [t for t in texts(at.info) if "Shared server mode" in t]


# ----------------------------------------------------------------------------- the rest of the mode
def test_own_run_is_controlled_and_a_second_one_is_refused(shared, runs_root, sleeper, monkeypatch):
    """A launch records this session as the owner (runs.launch is replaced by a hand-written running run): its
    session cancels it; a second launch is over the per-session limit."""
    launched = []

    def fake_launch(task, args, *, device, queue, owner=None):
        launched.append({"queue": queue, "owner": owner})
        d = fake_run(runs_root, "20261122-110000-pretrain-mine", state="running", pid=sleeper.pid, steps=())
        set_owner(d, owner)
        return d

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = page("train", train_recipe="custom")
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    assert any("Started run" in t for t in texts(at.success)), texts(at.error) + texts(at.warning)
    assert launched == [{"queue": True, "owner": shared_mode.owner_token("test session id")}]  # AppTest's session
    assert at.dataframe[0].value.to_dict("records")[0]["started by"] == "you"
    at.button(key="train_start").click().run()
    assert any("a session may have 1 run(s) queued or running at a time" in t for t in texts(at.warning))
    assert len(launched) == 1
    at.button(key="train_cancel").click().run()
    assert sleeper.wait(timeout=10) == -signal.SIGTERM


def test_a_queued_run_shows_its_place_in_the_device_queue(shared, runs_root, sleeper):
    helpers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(2)]
    try:
        hold = runs.DeviceLock(runs_root, "cpu", "20261122-090000-pretrain-hold", pid=helpers[0].pid)
        assert hold.try_acquire() is None  # held while ``hold`` lives (the flock goes with the object)
        runs.DeviceLock(runs_root, "cpu", "20261122-090100-pretrain-first", pid=helpers[1].pid)._enqueue()
        d = fake_run(runs_root, "20261122-100000-pretrain-queued", state="queued", pid=sleeper.pid, steps=())
        runs.DeviceLock(runs_root, "cpu", d.name, pid=sleeper.pid)._enqueue()
        at = page("train", train_recipe="custom", train_view=str(d))
        assert not at.exception, at.exception
        info = " ".join(texts(at.info))
        assert "busy with run 20261122-090000-pretrain-hold" in info
        assert "number 2 of 2 in the cpu queue" in info, info
        helpers[1].kill()
        helpers[1].wait()  # the first waiter is gone: its ticket no longer counts
        at.run()
        assert "number 1 of 1 in the cpu queue" in " ".join(texts(at.info))
    finally:
        for h in helpers:
            h.kill()
            h.wait()


def test_accepted_uploads_go_to_the_session_folder_and_count_against_its_quota(shared, runs_root):
    at = page("train", train_recipe="custom")
    at.radio(key="train_task").set_value("finetune").run()
    at.selectbox(key="train_ft_data").set_value("upload").run()
    small = csv(24)
    assert 700 < len(small) < 1048
    at.get("file_uploader")[0].set_value(("a.csv", small, "text/csv")).run()
    assert not at.error, texts(at.error)
    [saved] = [p for p in shared.session_root.rglob("*") if p.is_file()]
    assert saved.parent.parent.parent == shared.session_root and saved.read_bytes() == small
    assert [p for p in runs_root.rglob("*") if p.is_file()] == []  # not in the runs folder
    # a second, different file of the same size goes past the 1.5 KB quota
    other = csv(30, "phrase")
    assert len(other) < 1048 and len(small) + len(other) > 1572
    at.get("file_uploader")[0].set_value(("b.csv", other, "text/csv")).run()
    assert any("past its upload quota of 1.5 KB" in t.replace("\\", "") for t in texts(at.error))
    # the session folder goes when the session's resources are released (what Streamlit does when it ends)
    folder = saved.parent.parent
    shared_mode._release(shared_mode._Folder(folder))
    assert not folder.exists()


def test_an_unusable_operator_file_stops_the_app_with_a_message(shared, tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text("max_upload_mb = 10\nallow_hubb = true\n", encoding="utf-8")
    monkeypatch.setenv(shared_mode.ENV_CONFIG, str(bad))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("unknown option(s) ['allow_hubb']" in t for t in texts(at.error))
    assert not at.metric  # no page was drawn
    monkeypatch.setenv(shared_mode.ENV_FLAG, "maybe")
    with pytest.raises(shared_mode.SharedConfigError, match="BERT_EXPLORER_SHARED='maybe'"):
        shared_mode.settings()


def test_refusals_by_source_kind(shared):
    refusal = shared_mode.source_refusal
    assert refusal("packaged", "mlm", s=shared) is None
    assert refusal("local", shared.folders["Listed tiny"], s=shared) is None
    assert "typing a folder path" in refusal("local", "/etc", s=shared)
    assert refusal("run", "/r/step-1", {"/r/step-1"}, s=shared) is None and refusal("run", "/x", s=shared)
    assert "Hugging Face Hub" in refusal("hub", "bert-base-uncased", s=shared)
    assert refusal("local", "/etc", s=shared_mode.SINGLE_USER) is None  # a single user opens anything


def test_the_settings_module_is_torch_free():
    """explorer.server.shared_mode imports neither torch nor transformers (app.py reads it before any model)."""
    import subprocess as sp

    from ..conftest import ROOT

    code = ("import sys, explorer.server.shared_mode\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers'}))")
    out = sp.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_corpus_search_uploads_are_limited_and_indexed_in_the_session_folder(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    at = page("corpus_search", cs_corpus="upload")
    at.get("file_uploader")[0].set_value(("big.txt", b"The bank of the river.\n\n" * 60, "text/plain")).run()
    assert not at.exception
    assert any("limited to 1.0 KB per file" in t.replace("\\", "") for t in texts(at.error))
    assert not at.dataframe
    at.get("file_uploader")[0].set_value(("small.txt", b"The bank of the river.\n\nShe sat on it.", "text/plain")).run()
    assert not at.exception and not at.error, texts(at.error)
    assert any("cosine" in d.value.columns for d in at.dataframe)
    [index] = list(shared.session_root.glob("session-*/corpus-index/*.npz"))  # the session's, not the shared cache
    assert not list((tmp_path / "cache").glob("corpus-index/*"))
    assert index.is_file()
