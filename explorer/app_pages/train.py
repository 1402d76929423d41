"""Train: launch a small BERT pretraining or fine-tuning run, watch it live, list and compare runs.

A run is its own process (``python -m bertcore.train``, started by :func:`bertcore.runs.launch`):
the page never trains, it only reads the run directory (``docs/CONTRACTS.md``). The live view is an
``st.fragment(run_every=...)`` that re-reads ``status.json`` and the new lines of ``metrics.jsonl``
and stops polling when the run has ended. Session-state keys start with ``train_``.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from bertcore import runs
from bertcore.config import PRESETS, BertConfig, ConfigError
from bertcore.sources import ModelSource, list_run_sources
from explorer import widgets
from explorer.figures import training as figs

POLL_S = 2.0  # seconds between two reads of a live run's files
TASKS = {"pretrain": "Pretraining (masked LM + next sentence prediction)",
         "finetune": "Fine-tuning (sentence classification, e.g. sentiment)"}
SCRATCH_PRESETS = ("nano", "tiny", "mini", "small", "medium", "base")
PRETRAIN_DATA = {"bbc": "BBC News, 2,225 articles (packaged, offline)",
                 "local": "Local .txt file or folder of .txt files",
                 "upload": "Upload a .txt file (documents separated by blank lines)",
                 "hub:wikitext:wikitext-2-raw-v1": "WikiText-2 from the Hugging Face Hub (needs internet)"}
FINETUNE_DATA = {"tweets": "Tweets, positive vs negative (packaged, offline)",
                 "bbc-topics": "BBC News topics, 5 classes (packaged, offline; easy)",
                 "local": "Local .csv file (columns: text, label)",
                 "upload": "Upload a .csv file (columns: text, label; optional text_pair)",
                 "hub:imdb": "IMDB reviews from the Hugging Face Hub (needs internet)",
                 "hub:sst2": "SST-2 from the Hugging Face Hub (needs internet)"}


UPLOAD_MAX_MB = 50  # largest upload this page accepts as training data (the server allows up to 200 MB)
UPLOAD_TYPES = {"pretrain": ".txt", "finetune": ".csv"}
MIN_LABELLED = 10  # as bertcore.data.build_classification_data
BINARY_MAGIC = {b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image",
                b"%PDF": "a PDF document", b"PK\x03\x04": "a ZIP archive (or .xlsx/.docx)",
                b"\x1f\x8b": "a gzip archive", b"\xd0\xcf\x11\xe0": "an old Office document (.xls/.doc)"}


# ----------------------------------------------------------------------------- helpers
def _devices() -> list[str]:
    """Devices this machine can train on, best first (CPU always last)."""
    import torch

    found = [f"cuda:{i}" if torch.cuda.device_count() > 1 else "cuda" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        found.append("mps")
    return found + ["cpu"]


def _run_device(info: runs.RunInfo) -> str | None:
    config = runs.read_config(info.path) or {}
    device = config.get("device") or (config.get("args") or {}).get("device")
    return None if device in (None, "", "auto") else str(device)


def task_of(info: runs.RunInfo) -> str:
    """A run's task; a run that has just been launched has no run.json yet, but its id names the task."""
    if info.task:
        return info.task
    return next((t for t in runs.TASKS if f"-{t}-" in info.run_id), "?")


def _view_task(run_dir: Path) -> str:
    info = runs.run_info(run_dir)
    task = task_of(info) if info is not None else "?"
    return task if task in runs.TASKS else "pretrain"


def waiting_for(run_dir: Path) -> dict[str, Any] | None:
    """The lock holder a queued run waits for (another run on one of this machine's devices), or None."""
    for device in _devices():
        holder = runs.lock_holder(run_dir.parent, device)
        if holder is not None and holder.get("run_id") != run_dir.name:
            return {**holder, "device": device}
    return None


def active_runs(device: str | None = None) -> list[runs.RunInfo]:
    """Runs queued or running (their process alive), on ``device`` or on an unknown device
    (a run that has just started has not written its ``run.json`` yet)."""
    out = []
    for info in runs.list_runs():
        if info.state in ("queued", "running"):
            dev = _run_device(info)
            if device is None or dev is None or runs.device_key(dev) == runs.device_key(device):
                out.append(info)
    return out


def device_user(device: str) -> str | None:
    """The run using ``device`` (holding its lock, or queued / running there), or None if it is free."""
    holder = runs.lock_holder(runs.runs_root(), device)
    if holder is not None:
        return str(holder.get("run_id"))
    busy = active_runs(device)
    return f"{busy[0].run_id} ({busy[0].state})" if busy else None


def start_model_config(init: str | None, preset: str) -> BertConfig | None:
    """The architecture a run will train: the preset, or the ``config.json`` of the starting model."""
    if init in (None, "scratch"):
        return PRESETS[preset]
    if init == "packaged":
        from bertcore.sources import packaged_model_dir

        folder = packaged_model_dir()
    else:
        folder = Path(init)
    try:
        return BertConfig.from_json_file(folder / "config.json")
    except ConfigError:
        return None


def safe_upload_name(name: str, suffix: str) -> str:
    """A file name safe to write: letters, digits, '.', '_' and '-' only, at most 80 characters, ending in ``suffix``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(name).replace("\\", "/")).name).strip("._-")
    stem = stem[:-len(suffix)] if stem.lower().endswith(suffix) else stem
    return (stem[:80] or "upload") + suffix


def check_upload(task: str, name: str, data: bytes,
                 root: Path | None = None) -> tuple[Path | None, str, str | None]:
    """Validate an uploaded training file and, if usable, save it under ``<runs root>/uploads/``.

    Returns ``(path, summary, text_pair column or None)`` when accepted and ``(None, message, None)``
    when refused (messages are Markdown-escaped, for st.error / st.success); a refused file leaves
    nothing on disk. After quick checks (size, binary content, UTF-8) the run's own loaders
    (``bertcore.data.load_labelled`` / ``load_documents``) read a temporary copy. An accepted file is
    written atomically to ``uploads/<sha256 prefix>-<safe name>``; the same content under the same
    name is reused, never overwritten.
    """
    from bertcore import data as bdata
    from bertcore.checkpoint import atomic_write

    suffix = UPLOAD_TYPES[task]
    shown = widgets.escape_md(Path(str(name).replace("\\", "/")).name)
    if len(data) > UPLOAD_MAX_MB * 1024 * 1024:
        return None, (f"{shown} is {len(data) / 2**20:,.1f} MB: uploads for training are limited to "
                      f"{UPLOAD_MAX_MB} MB. For bigger data choose the 'Local ...' data source and give "
                      "its path on this machine."), None
    if not data.strip():
        return None, f"{shown} is empty: it has no text.", None
    kind = next((k for magic, k in BINARY_MAGIC.items() if data.startswith(magic)), None)
    if kind is not None or b"\x00" in data[:8192]:
        return None, (f"{shown} is not a text file: it looks like {kind or 'binary data (it holds NUL bytes)'}. "
                      f"Upload a plain-text {suffix} file."), None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, (f"{shown} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start:,} is "
                      "invalid). Save it as UTF-8 (e.g. 'CSV UTF-8' in a spreadsheet) and upload it again."), None
    clean = text.encode("utf-8")  # without a BOM, which would rename the first CSV column
    pair = None
    with tempfile.TemporaryDirectory(prefix="bert-upload-") as tmp:
        probe = Path(tmp) / safe_upload_name(name, suffix)
        probe.write_bytes(clean)
        try:
            if task == "finetune":
                lines = text.splitlines()
                header = [c.strip().strip('"') for c in (lines[0] if lines else "").split(",")]
                pair = "text_pair" if "text_pair" in header else None
                ds = bdata.load_labelled(str(probe), text_pair_column=pair)
                labels = sorted(set(ds["label"]))
                if len(ds) < MIN_LABELLED:
                    return None, (f"{shown} has {len(ds)} usable labelled row(s) (non-empty text and label); "
                                  f"fine-tuning needs at least {MIN_LABELLED}."), None
                if len(labels) < 2:
                    return None, (f"{shown} has a single label ({widgets.escape_md(labels[0])}): classification "
                                  "needs at least 2 different labels."), None
                some = ", ".join(widgets.escape_md(x) for x in labels[:10]) + (" ..." if len(labels) > 10 else "")
                summary = f"{len(ds):,} labelled rows, {len(labels)} labels ({some})"
                if pair:
                    summary += ", sentence pairs (text_pair)"
            else:
                ds = bdata.load_documents(str(probe))
                summary = f"{len(ds):,} documents"
        except bdata.DataError as exc:
            reason = str(exc).replace(str(probe), probe.name).split(" Choose them with --")[0]  # no CLI hint here
            return None, f"{shown} cannot be used: {widgets.escape_md(reason)}", None
        except Exception as exc:  # noqa: BLE001 - any parser failure is a bad file, never a traceback
            return None, f"{shown} cannot be read: {widgets.escape_md(type(exc).__name__)}: {widgets.escape_md(exc)}", None
    folder = runs.runs_root(root) / "uploads"
    dest = folder / f"{hashlib.sha256(clean).hexdigest()[:16]}-{safe_upload_name(name, suffix)}"
    if dest.exists():
        if not dest.is_file() or dest.read_bytes() != clean:
            return None, f"Cannot save {shown}: {widgets.escape_md(dest)} already exists with other content.", None
    else:
        try:
            atomic_write(dest, lambda p: p.write_bytes(clean))
        except OSError as exc:
            return None, f"Cannot save {shown} under {widgets.escape_md(folder)}: {widgets.escape_md(exc)}", None
    return dest, summary, pair


def upload_input(task: str) -> tuple[str | None, str | None, str | None]:
    """The uploader; returns (saved path, text_pair column, problem). A file is checked once per content."""
    suffix = UPLOAD_TYPES[task]
    up = st.file_uploader(f"Your {suffix} file (at most {UPLOAD_MAX_MB} MB)", type=[suffix.lstrip(".")],
                          key=f"train_{task}_upload",
                          help="Pretraining: plain UTF-8 text, documents separated by blank lines. Fine-tuning: a "
                               "UTF-8 CSV with a header row and columns 'text' and 'label' (optional 'text_pair'). "
                               "Accepted files are kept in the runs folder, under uploads/.")
    if up is None:
        return None, None, "Upload a file first (or choose another data source)."
    raw = up.getvalue()
    cache_key = (task, up.name, hashlib.sha256(raw).hexdigest())
    cached = st.session_state.get("train_upload_checked")
    if cached and cached[0] == cache_key and (cached[1] is None or Path(cached[1]).is_file()):
        path, message, pair = cached[1:]
    else:
        with st.spinner("Checking the file ..."):
            saved, message, pair = check_upload(task, up.name, raw)
        path = None if saved is None else str(saved)
        st.session_state["train_upload_checked"] = (cache_key, path, message, pair)
    if path is None:
        st.error(message, icon=":material/error:")
        return None, None, "The uploaded file was refused (see the message under the uploader): fix it or upload another."
    st.success(f"Accepted: {message}. Saved as {widgets.escape_md(path)}.", icon=":material/check_circle:")
    return path, pair, None


def validate(task: str, opts: dict[str, Any]) -> list[str]:
    """Problems with a set of options that the bounded inputs cannot catch alone (messages for people)."""
    problems = []
    init = opts.get("init")
    if init == "":
        problems.append("Choose a starting model: no checkpoint or folder is selected.")
    elif init not in (None, "packaged", "scratch") and not (Path(init).expanduser() / "config.json").is_file():
        problems.append(f"No model at {init}: the folder must hold config.json and the weights "
                        "(model.safetensors or pytorch_model.bin) and the tokenizer files.")
    data = opts.get("corpus" if task == "pretrain" else "dataset")
    if data is not None and not str(data).startswith("hub:") and data not in ("bbc", "tweets", "bbc-topics"):
        path = Path(str(data)).expanduser()
        if not str(data).strip():
            problems.append("Give the path of your data file or folder.")
        elif not path.exists():
            problems.append(f"No file or folder at {path}.")
        elif task == "finetune" and path.suffix.lower() != ".csv":
            problems.append(f"{path.name} is not a .csv file: fine-tuning reads a CSV with text and label columns.")
    config = None if problems else start_model_config(init, opts.get("preset", "nano"))
    if config is not None and opts["max_seq_len"] > config.max_position_embeddings:
        problems.append(f"Sequence length {opts['max_seq_len']} is longer than the model's "
                        f"{config.max_position_embeddings} positions; choose at most {config.max_position_embeddings}.")
    steps = opts.get("max_steps")
    if steps is not None and opts.get("eval_every", 1) > steps:
        problems.append(f"Evaluate every {opts['eval_every']} steps is more than the {steps} steps of the run: "
                        "no validation point would be drawn; lower it.")
    return problems


def use_checkpoint(ref: str, label: str) -> None:
    """Callback: make a run checkpoint the model of every page (sets the sidebar picker's state)."""
    st.session_state[widgets.SOURCE_KEY] = ModelSource("run", ref, label)
    st.session_state["model_kind"] = "run"
    st.session_state["model_run_ref"] = ref
    st.session_state.pop(widgets.ERROR_KEY, None)
    st.session_state["train_used"] = label


def _tail_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """All metric records of ``run_dir``; only lines new since the last call are read and parsed."""
    tail = st.session_state.get("train_tail")
    if not tail or tail["run"] != str(run_dir):
        tail = {"run": str(run_dir), "seen": 0, "records": []}
    new, seen = runs.iter_new_metrics(run_dir, tail["seen"])
    records = new if seen < tail["seen"] or tail["seen"] == 0 else tail["records"] + new
    tail.update(seen=seen, records=records)
    st.session_state["train_tail"] = tail
    return records


def _last_lines(text: str, n: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-n:])


# ----------------------------------------------------------------------------- views of one run
CURVES_HELP = {
    "pretrain": "Solid: training batches; dotted: held-out documents (validation). The MLM loss starts near "
                "ln(30,522) ≈ 10.3, a uniform guess over the vocabulary, and falls as the model learns which words "
                "fit; the NSP loss starts at ln 2 ≈ 0.69 (a coin flip). MLM accuracy is the share of masked "
                "tokens guessed exactly.",
    "finetune": "Solid: training batches; dotted: the validation split. The loss starts near ln(classes) and "
                "should fall; accuracy and macro F1 (the mean of the per-class F1, which a majority-class "
                "guess cannot fake) should rise above the share of the most frequent class.",
}


def show_curves(records: list[dict[str, Any]], task: str, total: int | None, key: str) -> None:
    st.caption(CURVES_HELP[task])
    c1, c2 = st.columns(2)
    widgets.plotly_chart(where=c1, fig=figs.loss_figure(records, task, total), key=f"train_loss_{key}")
    widgets.plotly_chart(where=c2, fig=figs.accuracy_figure(records, task, total), key=f"train_acc_{key}")


def show_probe(run_dir: Path, key: str) -> None:
    probes = runs.read_probe(run_dir)
    if not probes:
        st.caption("The probe sentence's predictions appear after the first evaluation.")
        return
    latest = max(probes, key=lambda r: r["step"])
    probe_text = str(latest.get("text", "")).replace("`", "'")
    st.markdown(f"**Probe sentence** (fixed, predicted at each evaluation): `{probe_text}`")
    try:
        widgets.plotly_chart(figs.probe_figure(latest, top_k=5), key=f"train_probe_{key}")
        if len(probes) > 1:
            with st.expander("How the guesses changed"):
                st.dataframe(figs.probe_rows(probes, last=12), hide_index=True)
    except ValueError as exc:
        widgets.show_error(exc, "Unreadable probe record")


COMPARED = ("acc", "f1", "accuracy", "macro_f1")  # scores in [0, 1] shown beside the baseline's


def _block(data: dict[str, Any], name: str) -> dict[str, Any]:
    block = data.get(name)
    return block if isinstance(block, dict) else {}


def show_results(run_dir: Path) -> None:
    """Fine-tuning results (``results.json``): test scores beside the TF-IDF baseline's, both
    confusion matrices and both classification reports."""
    results = runs.read_results(run_dir)
    if not results:
        st.caption("The test results appear when the run ends.")
        return
    test, base = _block(results, "test"), _block(results, "baseline")
    labels = results.get("labels")
    st.subheader("Test set")
    n = test.get("n")
    st.caption(f"Scores on the held-out test split{f' ({n:,} examples)' if isinstance(n, int) else ''}, which "
               "training never saw. The baseline is a TF-IDF + logistic regression model trained on the same "
               "training split: a fine-tuned BERT should beat it. The dashed line is the share of the most "
               "frequent class (what always guessing it would score).")
    if base.get("error"):
        st.warning("The baseline could not be computed: " + widgets.escape_md(base["error"]))
    elif not base:
        st.caption("No baseline in this run (it was skipped).")
    try:
        model_scores = {k: test[k] for k in COMPARED if k in test}
        base_scores = {k: base[k] for k in COMPARED if k in base}
        if set(model_scores) & set(base_scores):
            widgets.plotly_chart(figs.baseline_comparison_figure(
                model_scores, base_scores, names=("fine-tuned BERT", base.get("name") or "TF-IDF + logistic regression"),
                majority=results.get("majority_fraction")), key="train_baseline")
        elif model_scores:
            st.dataframe([model_scores], hide_index=True)
        cm = results.get("confusion_matrix", test.get("confusion_matrix"))
        base_cm = base.get("confusion_matrix")
        cols = st.columns(2 if base_cm is not None else 1)
        if cm is not None:
            widgets.plotly_chart(where=cols[0], fig=figs.confusion_matrix_figure(cm, labels, title="Fine-tuned BERT: confusion matrix"),
                                 key="train_cm")
        if base_cm is not None:
            widgets.plotly_chart(where=cols[-1], fig=figs.confusion_matrix_figure(base_cm, labels, title="Baseline: confusion matrix"),
                                  key="train_cm_base")
        report = results.get("classification_report", test.get("classification_report"))
        base_report = base.get("classification_report")
        rc = st.columns(2 if base_report else 1)
        if report:
            rc[0].markdown("**Classification report: fine-tuned BERT**")
            rc[0].dataframe(figs.report_rows(report), hide_index=True)
        if base_report:
            rc[-1].markdown("**Classification report: baseline**")
            rc[-1].dataframe(figs.report_rows(base_report), hide_index=True)
    except ValueError as exc:
        widgets.show_error(exc, "Unreadable results.json")


def show_status_line(status: dict[str, Any]) -> figs.Progress:
    progress = figs.progress_summary(status)
    st.progress(progress.fraction, text=progress.text)
    return progress


@st.fragment(run_every=POLL_S)
def live_view(run_dir_s: str) -> None:
    """The selected run while it is queued or running; re-reads only status.json and new metric lines.

    When the run ends it asks for a full rerun: the page then draws the static view, which does
    not poll (this fragment is not called for a finished run)."""
    run_dir = Path(run_dir_s)
    status = runs.read_status(run_dir)
    if status is not None and status.get("state") in runs.FINAL_STATES:
        st.rerun()  # stop polling: the next full run shows the finished run
    if status is None:
        st.info("Starting ...")
        return
    task = _view_task(run_dir)
    show_status_line(status)
    if status["state"] == "queued":
        holder = waiting_for(run_dir)
        if holder is not None:
            st.info(f"Queued: {holder['device']} is busy with run {holder.get('run_id')}; this run starts by itself "
                    "when that one ends.", icon=":material/hourglass_top:")
        else:
            st.info("Starting: loading the libraries, the data and the model (10-30 s on a CPU) ...",
                    icon=":material/hourglass_top:")
    elif status.get("step", 0) == 0:
        st.caption("Preparing the data and the model; the first steps follow shortly.")
    elif status.get("total_steps") and status["step"] >= status["total_steps"]:
        st.caption("Last step done: saving the final checkpoint" + (
            ", evaluating on the test split and fitting the TF-IDF baseline ..." if task == "finetune" else " ..."))
    c1, c2 = st.columns([1, 4])
    if c1.button("Cancel run", key="train_cancel", type="secondary", icon=":material/stop:",
                 help="Stops the run cleanly: it saves a checkpoint and ends as 'cancelled'."):
        if runs.cancel(run_dir):
            c2.info("Cancelling: the run saves a checkpoint and stops ...")
        else:
            c2.warning("The run is not running any more.")
    records = _tail_metrics(run_dir)
    show_curves(records, task, status.get("total_steps"), "live")
    if task == "pretrain":
        show_probe(run_dir, "live")


def static_view(run_dir: Path, status: dict[str, Any] | None) -> None:
    """A finished (or unreadable) run: final curves, probe, results, error and log."""
    task = _view_task(run_dir)
    if status is None:
        st.warning("This run has no status.json: it never started, or its folder is incomplete.")
        return
    show_status_line(status)
    if status["state"] == "failed":
        st.error("The run failed: " + widgets.escape_md(status.get("error") or "no error message"),
                 icon=":material/error:")
        log = runs.read_log(run_dir, 4000)
        if log:
            st.code(_last_lines(log), language=None)
    elif status["state"] == "cancelled":
        st.info("The run was cancelled; its last checkpoint is kept and can be used as a model.")
    records = runs.read_metrics(run_dir)
    show_curves(records, task, status.get("total_steps"), "final")
    if task == "pretrain":
        show_probe(run_dir, "final")
    else:
        show_results(run_dir)
    ckpts = runs.checkpoints(run_dir)
    if ckpts and status["state"] in ("cancelled", "failed"):
        if st.button(f"Resume from step {runs.checkpoint_step(ckpts[-1])}", key="train_resume",
                     icon=":material/resume:", help="Continue this run from its last checkpoint (same options, same "
                                                   "run directory); refused while its device is busy."):
            try:
                runs.resume(run_dir)
            except runs.RunBusyError as exc:
                st.warning(f"Not resumed: {widgets.escape_md(exc)}", icon=":material/block:")
            except (runs.RunError, OSError) as exc:
                st.error(f"Cannot resume: {widgets.escape_md(exc)}", icon=":material/error:")
            else:
                st.session_state.pop("train_tail", None)
                st.rerun()
    if ckpts:
        last = ckpts[-1]
        label = f"run {run_dir.name} @ step {runs.checkpoint_step(last)}"
        st.button("Use its last checkpoint as the model of every page", key="train_use", icon=":material/hub:",
                  on_click=use_checkpoint, args=(str(last), label),
                  help="The sidebar's model becomes this checkpoint (Attention, Masking, Positions, Word senses ...). "
                       "The Evolution page compares all its checkpoints.")
    if st.session_state.get("train_used"):
        st.success(f"Model in use: {widgets.escape_md(st.session_state['train_used'])}")


# ----------------------------------------------------------------------------- the launch form
def launch_form() -> None:
    st.subheader("Start a run")
    task = st.radio("Task", list(TASKS), format_func=TASKS.__getitem__, key="train_task", horizontal=True)
    opts: dict[str, Any] = {}
    upload_problem = None
    run_sources = list_run_sources()
    ckpt_labels = {s.ref: s.name for s in run_sources}
    c1, c2 = st.columns(2)
    with c1:
        if task == "pretrain":
            st.caption("Masked-LM + NSP from scratch: the nano preset on BBC News makes the loss fall visibly within "
                       "minutes on a CPU. Continuing from a checkpoint keeps its weights (and heads, if it has them).")
            start = st.selectbox("Starting model", ["scratch", "checkpoint", "packaged"], key="train_pt_start",
                                 format_func={"scratch": "From scratch (a preset)",
                                              "checkpoint": "Continue a run's checkpoint",
                                              "packaged": "Packaged MiniLM (fresh MLM/NSP heads)"}.__getitem__)
            data = st.selectbox("Corpus", list(PRETRAIN_DATA), format_func=PRETRAIN_DATA.__getitem__,
                                key="train_pt_data")
        else:
            st.caption("Fine-tuning adds a classifier on the [CLS] vector and trains everything on labelled "
                       "sentences. Default: the packaged MiniLM on tweets (positive / negative).")
            start = st.selectbox("Starting model", ["packaged", "checkpoint", "local", "scratch"], key="train_ft_start",
                                 format_func={"packaged": "Packaged MiniLM (offline)",
                                              "checkpoint": "A run's checkpoint (e.g. your pretrained model)",
                                              "local": "Local Hugging Face folder",
                                              "scratch": "From scratch (a preset; shows what pretraining adds)"}.__getitem__)
            data = st.selectbox("Data set", list(FINETUNE_DATA), format_func=FINETUNE_DATA.__getitem__,
                                key="train_ft_data")
        preset = "nano"
        if start == "scratch":
            preset = st.selectbox("Preset", SCRATCH_PRESETS, key=f"train_{task}_preset",
                                  help="nano: 2 layers x 256 (CPU, minutes); tiny/mini/small: Turc et al.'s "
                                       "miniatures; base: BERT-base (needs a GPU).")
            opts["preset"] = preset
            if task == "finetune":
                opts["init"] = "scratch"
        elif start == "checkpoint":
            if not ckpt_labels:
                st.warning("No run checkpoint yet: pretrain a model first, or choose another start.")
                opts["init"] = ""
            else:
                opts["init"] = st.selectbox("Checkpoint", list(ckpt_labels), format_func=ckpt_labels.__getitem__,
                                            key=f"train_{task}_ckpt")
        elif start == "local":
            opts["init"] = st.text_input("Model folder", key="train_ft_local", placeholder="/path/to/bert-folder",
                                         help="A Hugging Face BERT folder: config.json, weights, vocab.txt.").strip()
        else:
            opts["init"] = "packaged"
        if data == "local":
            path = st.text_input("Path", key=f"train_{task}_path",
                                 placeholder="/path/to/corpus.txt" if task == "pretrain" else "/path/to/data.csv",
                                 help="Pretraining: a .txt file (documents separated by blank lines) or a folder of "
                                      ".txt files. Fine-tuning: a CSV with 'text' and 'label' columns.").strip()
            data = path
        elif data == "upload":
            data, pair_column, upload_problem = upload_input(task)
            if pair_column:
                opts["text_pair_column"] = pair_column
        if str(data).startswith("hub:"):
            st.caption("This data set is downloaded from the Hugging Face Hub: without internet the run fails "
                       "with a message saying so.")
        opts["corpus" if task == "pretrain" else "dataset"] = data

    with c2:
        scratch = start == "scratch"
        length = st.radio("Length in", ["steps", "epochs"], key=f"train_{task}_length", horizontal=True,
                          help="An optimizer step processes one batch; an epoch is one pass over the training split.")
        if length == "steps":
            opts["max_steps"] = int(st.number_input(
                "Steps", min_value=1, max_value=100_000, value=300, step=50, key=f"train_{task}_steps",
                help="1 to 100,000 optimizer steps. A few hundred show the loss falling on a CPU."))
        else:
            opts["epochs"] = float(st.number_input(
                "Epochs", min_value=0.1, max_value=50.0, value=1.0, step=0.5, key=f"train_{task}_epochs",
                help="0.1 to 50 passes over the training split (fractions allowed)."))
        opts["batch_size"] = int(st.number_input(
            "Batch size", min_value=1, max_value=512, value=16 if task == "pretrain" else 32, step=8,
            key=f"train_{task}_batch", help="1 to 512 sequences per step. Larger is steadier but slower per step."))
        opts["max_seq_len"] = int(st.number_input(
            "Sequence length (tokens)", min_value=16, max_value=512, value=128 if task == "pretrain" else 64, step=16,
            key=f"train_{task}_seqlen",
            help="16 to 512 tokens per sequence, [CLS]/[SEP] included; at most the model's positions. "
                 "Attention costs grow with its square."))
        default_lr = 1e-3 if (task == "pretrain" and scratch) else (3e-4 if scratch else 5e-5)
        opts["lr"] = float(st.number_input(
            "Peak learning rate", min_value=1e-6, max_value=1e-2, value=default_lr, format="%.1e", step=1e-5,
            key=f"train_{task}_lr_{'scratch' if scratch else 'init'}",
            help="1e-6 to 1e-2. AdamW with linear warmup and decay. From scratch ~1e-3; fine-tuning a pretrained "
                 "model 2e-5 to 1e-4 (BERT paper)."))
        devices = _devices()
        opts["device"] = st.selectbox("Device", devices, key="train_device",
                                      help="One run at a time per device; a second one is refused or queued.")
        queue = st.checkbox("Queue if the device is busy", value=False, key="train_queue",
                            help="Otherwise a launch while another run uses the device is refused.")

    with st.expander("Advanced options"):
        a1, a2, a3 = st.columns(3)
        steps_for_eval = opts.get("max_steps", 300)
        opts["eval_every"] = int(a1.number_input(
            "Evaluate every (steps)", min_value=1, max_value=100_000, value=max(1, min(50, steps_for_eval)),
            key=f"train_{task}_eval", help="1 to 100,000: validation loss/accuracy (and the probe) every N steps."))
        opts["log_every"] = int(a1.number_input(
            "Log train metrics every (steps)", min_value=1, max_value=10_000, value=10, key=f"train_{task}_log",
            help="1 to 10,000 steps between two points of the train curves."))
        opts["save_every"] = int(a2.number_input(
            "Checkpoint every (steps)", min_value=1, max_value=100_000, value=100, key=f"train_{task}_save",
            help="1 to 100,000; one is also saved at the end. The Evolution page compares checkpoints."))
        opts["keep_checkpoints"] = int(a2.number_input(
            "Checkpoints kept (0: all)", min_value=0, max_value=100, value=6, key=f"train_{task}_keep",
            help="0 to 100 newest checkpoints kept on disk (each holds weights and optimizer state)."))
        opts["seed"] = int(a3.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, key=f"train_{task}_seed",
                                           help="0 to 2^31-1: data split, masks, initialisation and dropout."))
        if task == "pretrain":
            docs = int(a3.number_input("Documents to use (0: all)", min_value=0, max_value=1_000_000, value=0,
                                       key="train_pretrain_docs",
                                       help="0 to 1,000,000 documents of the corpus (fewer: faster start)."))
            opts["max_docs"] = docs or None
            probe = st.text_input("Probe sentence (with [MASK])", key="train_probe",
                                  value="The government said it would [MASK] the new law next [MASK].",
                                  help="Its [MASK] predictions are logged at each evaluation.")
            opts["probe"] = probe.strip() or None
        else:
            n = int(a3.number_input("Training examples (0: all)", min_value=0, max_value=10_000_000, value=0,
                                    key="train_finetune_examples",
                                    help="0 to 10,000,000: subsample the training split (seeded) for a quicker run."))
            opts["max_train_examples"] = n or None

    problems = validate(task, opts)
    if upload_problem:
        problems.insert(0, upload_problem)
    if task == "pretrain" and opts.get("probe") and "[MASK]" not in opts["probe"]:
        problems.append("The probe sentence needs at least one [MASK].")
    busy_with = device_user(opts["device"])
    if busy_with and not queue:
        st.info(f"{opts['device']} is busy with run {busy_with}. Cancel it, wait, or tick 'Queue if the device is busy'.")
    if st.button("Start training", key="train_start", type="primary", icon=":material/play_arrow:"):
        if problems:
            for p in problems:
                st.error(widgets.escape_md(p), icon=":material/error:")
            return
        if busy_with and not queue:
            st.warning(f"Not started: only one run at a time per device, and {opts['device']} is busy with run "
                       f"{busy_with}. Cancel it, wait for it to end, or tick 'Queue if the device is busy'.",
                       icon=":material/block:")
            return
        args = {k: v for k, v in opts.items() if k != "device"}
        try:
            run_dir = runs.launch(task, args, device=opts["device"], queue=queue)
        except runs.RunBusyError as exc:
            st.warning(f"Not started: {widgets.escape_md(exc)}", icon=":material/block:")
            return
        except (runs.RunError, OSError) as exc:
            st.error(f"Cannot start the run: {widgets.escape_md(exc)}", icon=":material/error:")
            return
        st.session_state["train_view"] = str(run_dir)
        st.session_state.pop("train_tail", None)
        st.success(f"Started run {run_dir.name}" + (" (queued until the device is free)" if busy_with else "") + ".",
                   icon=":material/rocket_launch:")
    elif problems:
        for p in problems:
            st.warning(widgets.escape_md(p), icon=":material/edit_note:")


# ----------------------------------------------------------------------------- the list of runs
def runs_table(infos: list[runs.RunInfo]) -> None:
    """The runs: state, task, step / total, start time, checkpoints, and why failed runs failed."""
    rows = []
    for i in infos:
        total = i.total_steps or (i.args or {}).get("max_steps")
        started = i.created or (runs.read_status(i.path) or {}).get("started") or ""
        rows.append({"state": i.state, "task": task_of(i),
                     "step": f"{i.step:,} / {total:,}" if total else f"{i.step:,}",
                     "started": started.replace("T", " ").removesuffix("Z"),
                     "checkpoints": i.n_checkpoints, "run": i.run_id,
                     "error": (i.error or "")[:120]})
    st.dataframe(rows, hide_index=True)
    failed = [i for i in infos if i.state == "failed"][:5]
    for i in failed:
        with st.expander(f"{i.run_id}: why it failed", icon=":material/error:"):
            st.markdown(widgets.escape_md(i.error or "no error message"))
            log = runs.read_log(i.path, 4000)
            st.code(_last_lines(log) if log else "(log.txt is empty)", language=None)


@st.fragment(run_every=POLL_S)
def runs_table_live() -> None:
    """The runs table while some run is queued or running: re-read every few seconds; when none is
    active any more, one full rerun draws the static table (and this stops polling)."""
    infos = runs.list_runs()
    if not any(i.state in ("queued", "running") for i in infos):
        st.rerun()
    runs_table(infos)


# ----------------------------------------------------------------------------- page
st.title("Train a small BERT")
st.caption("Pretrain a tiny BERT from scratch with masked-language modelling and next-sentence prediction, or "
           "fine-tune one on labelled sentences. Each run is a separate process writing to "
           f"`{runs.runs_root()}/<run id>/`: it keeps going if you close the browser or restart the app, and its "
           "checkpoints become models for every other page.")

launch_form()

st.divider()
st.subheader("Runs")
infos = runs.list_runs()
if not infos:
    st.info("No run yet: start one above.")
    st.stop()
if any(i.state in ("queued", "running") for i in infos):
    runs_table_live()
else:
    runs_table(infos)

by_path = {str(i.path): i for i in infos}
if st.session_state.get("train_view") not in by_path:  # a refresh, or a run deleted: show the most relevant one
    active = [i for i in infos if i.state in ("queued", "running")]
    st.session_state["train_view"] = str((active or infos)[0].path)
view = st.selectbox("Show run", list(by_path), key="train_view",
                    format_func=lambda p: f"{by_path[p].run_id} ({task_of(by_path[p])})")
run_path = Path(view)
status = runs.read_status(run_path)
if status is not None and status.get("state") in ("queued", "running"):
    live_view(str(run_path))
else:
    static_view(run_path, status)
