"""The Train page's views of runs: the runs table, one run live (a polling fragment) or finished
(curves, probe, fine-tuning results, error and log), resume, "use this checkpoint", and the
"Use this checkpoint in Python" box (also on the Evolution page) with the re-export of older pre-LN folders.

Reads only the run directory (``bertcore.runs``, ``docs/CONTRACTS.md``); figures come from
``explorer.figures.training``. Session-state keys start with ``train_``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from bertcore.loading import hf_export
from bertcore import runs
from bertcore.modeling import hf_format
from bertcore.modeling.checkpoint import CheckpointError
from bertcore.modeling.config import ConfigError
from bertcore.loading.sources import ModelSource, SourceError
from explorer.train import run_notes as notes
from explorer.server import shared_mode
from explorer import widgets
from explorer.train.finetune_results import show_results
from explorer.figures import probe as probe_figs
from explorer.figures import training as figs

POLL_S = 2.0  # seconds between two reads of a live run's files


def view_task(run_dir: Path) -> str:
    """The task of a run to draw its views (``pretrain`` when it cannot be told yet)."""
    info = runs.run_info(run_dir)
    task = runs.task_of(info) if info is not None else "?"
    return task if task in runs.TASKS else "pretrain"


def use_checkpoint(ref: str, label: str) -> None:
    """Callback: make a run checkpoint the model of every page (the sidebar's keys are set by
    ``widgets.use_source``)."""
    if widgets.use_source(ModelSource("run", ref, label)):
        st.session_state["train_used"] = label


def can_control(run_dir: Path) -> bool:
    """May this session cancel, resume or rewrite the run? Always for a single user; on a shared server only the
    session that started it (``run.json`` ``owner``, :func:`explorer.server.shared_mode.can_control`)."""
    if not shared_mode.enabled():
        return True
    return shared_mode.can_control((runs.read_config(run_dir) or {}).get("owner"))


WATCH_ONLY = ("This run was started by another session: you can watch it, and only that session can cancel or "
              "resume it (this is a shared server).")


def queue_text(run_dir: Path, holder: dict[str, Any] | None) -> str:
    """A queued run's notice: what the device is busy with, and on a shared server its place in the device's
    queue (:func:`bertcore.runs.queue_position`)."""
    device = (runs.read_config(run_dir) or {}).get("device") or (holder or {}).get("device") or "cpu"
    text = (f"Queued: {holder['device']} is busy with run {holder.get('run_id')}; this run starts by itself when "
            "that one ends." if holder is not None else "")
    if shared_mode.enabled():
        place = runs.queue_position(run_dir.parent, device, run_dir.name)
        if place is not None:
            text = (text + " " if text else "Queued. ") + (f"It is number {place[0]} of {place[1]} in the {device} "
                                                          "queue (first come, first served).")
    return text


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
                "ln(vocabulary size) (a uniform guess, ≈ 10.3 for 30,522 tokens) and first falls to the dashed "
                "unigram line: the model learns which tokens are frequent and copies the unchanged ones, "
                "without using context. Leaving that plateau, often as a sudden drop, is when it starts to use "
                "the context (Chen et al. 2023, \"Sudden drops in the loss\"). The headline accuracy is the one at "
                "[MASK] positions, to compare with the dashed line of always guessing the most frequent token; the "
                "mix over all selected tokens is higher because unchanged tokens only need copying. NSP accuracy "
                "must rise above its 50% chance line to mean anything.",
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
    sentences = latest.get("sentences") if isinstance(latest.get("sentences"), list) else None
    if sentences:
        answers = latest.get("answers") if isinstance(latest.get("answers"), list) else []
        st.markdown("**Probe sentences**, predicted at each evaluation" + (
            " (held-out sentences whose hidden word the two neighbouring words predict in the training text: "
            "a model that uses its context at all should find them first; the hidden word in brackets)"
            if answers else "") + ":\n" + "\n".join(
                f"{i + 1}. `{str(text).replace('`', chr(39))}`" + (f" ({widgets.escape_md(answers[i])})"
                                                                  if i < len(answers) else "")
                for i, text in enumerate(sentences)))
    else:
        probe_text = str(latest.get("text", "")).replace("`", "'")
        st.markdown(f"**Probe sentence** (fixed, predicted at each evaluation): `{probe_text}`")
    try:
        top_k = 3 if len(latest.get("predictions") or []) > 2 else 5
        widgets.plotly_chart(probe_figs.probe_figure(latest, top_k=top_k), key=f"train_probe_{key}")
        if len(probes) > 1:
            with st.expander("How the guesses changed"):
                st.dataframe(probe_figs.probe_rows(probes, last=12), hide_index=True)
    except ValueError as exc:
        widgets.show_error(exc, "Unreadable probe record")


def show_status_line(status: dict[str, Any], run_dir: Path | None = None) -> figs.Progress:
    progress = figs.progress_summary(status)
    st.progress(progress.fraction, text=progress.text)
    config = runs.read_config(run_dir) if run_dir is not None else None
    text, busy = notes.budget_text(config, status), notes.busy_text(config)
    if text:
        st.caption(text)
    if busy:
        st.warning(busy, icon=":material/speed:")
    return progress


def show_plateau_note(run_dir: Path, records: list[dict[str, Any]]) -> None:
    text = notes.plateau_text(runs.read_config(run_dir), records)
    if text:
        st.info(text, icon=":material/hourglass_empty:")


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
    task = view_task(run_dir)
    show_status_line(status, run_dir)
    if status["state"] == "queued":
        text = queue_text(run_dir, runs.waiting_for(run_dir))
        if text:
            st.info(text, icon=":material/hourglass_top:")
        else:
            st.info("Starting: loading the libraries, the data and the model (10-30 s on a CPU) ...",
                    icon=":material/hourglass_top:")
    elif status.get("step", 0) == 0:
        st.caption("Preparing the data and the model; the first steps follow shortly.")
    elif status.get("total_steps") and status["step"] >= status["total_steps"]:
        st.caption("Last step done: saving the final checkpoint" + (
            ", evaluating on the test split and fitting the TF-IDF baseline ..." if task == "finetune" else " ..."))
    c1, c2 = st.columns([1, 4])
    if not can_control(run_dir):
        c2.info(WATCH_ONLY, icon=":material/visibility:")
    elif c1.button("Cancel run", key="train_cancel", type="secondary", icon=":material/stop:",
                   help="Stops the run cleanly: it saves a checkpoint and ends as 'cancelled'."):
        if runs.cancel(run_dir):
            c2.info("Cancelling: the run saves a checkpoint and stops ..." if status.get("step", 0) else
                    "Cancelling: the run stops before its first step (nothing to save) ...")
        else:
            c2.warning("The run is not running any more.")
    records = _tail_metrics(run_dir)
    show_curves(records, task, status.get("total_steps"), "live")
    if task == "pretrain":
        show_plateau_note(run_dir, records)
        show_probe(run_dir, "live")


def static_view(run_dir: Path, status: dict[str, Any] | None) -> None:
    """A finished (or unreadable) run: final curves, probe, results, error and log."""
    task = view_task(run_dir)
    if status is None:
        st.warning("This run has no status.json: it never started, or its folder is incomplete.")
        return
    show_status_line(status, run_dir)
    ckpts = runs.checkpoints(run_dir)
    if status["state"] == "failed":
        st.error("The run failed: " + widgets.escape_md(status.get("error") or "no error message"),
                 icon=":material/error:")
        log = runs.read_log(run_dir, 4000)
        if log:
            st.code(_last_lines(log), language=None)
    elif status["state"] == "cancelled" and ckpts:
        st.info(f"The run was cancelled; its last checkpoint (step {runs.checkpoint_step(ckpts[-1])}) is kept: it "
                "can be resumed or used as a model.")
    elif status["state"] == "cancelled":
        st.info("The run was cancelled before its first checkpoint, so it left no model: start a new run above.")
    records = runs.read_metrics(run_dir)
    show_curves(records, task, status.get("total_steps"), "final")
    if task == "pretrain":
        show_plateau_note(run_dir, records)
        show_probe(run_dir, "final")
    else:
        show_results(run_dir)
    control = can_control(run_dir)
    if ckpts and status["state"] in ("cancelled", "failed") and not control:
        st.caption("Only the session that started this run can resume it (this is a shared server).")
    elif ckpts and status["state"] in ("cancelled", "failed"):
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
    if ckpts:
        probe = ((runs.read_config(run_dir) or {}).get("args") or {}).get("probe")
        checkpoint_in_python(checkpoint_picker(ckpts, f"train_py_step_{run_dir.name}"), "train_py", probe)



# ----------------------------------------------------------------------------- a checkpoint in Python
LEGACY_NOTICE = ("This checkpoint was written before pre-LayerNorm runs were saved in a format transformers "
                 "understands. BERT Explorer loads it exactly, but **transformers would load it wrongly, without an "
                 "error**: its Bert classes are post-LayerNorm, ignore `pre_layer_norm` and drop the final "
                 "LayerNorm, so they compute a different model. Re-export it to save it as RobertaPreLayerNorm, "
                 "which transformers computes exactly (the NSP head goes to `nsp_head.safetensors`).")


def _reexport(folder_s: str, key: str) -> None:
    """Callback: rewrite an older checkpoint in the current format, with a new model card."""
    from bertcore.training.card import model_card

    folder = Path(folder_s)
    run = folder.parent.parent
    card = (lambda tmp: model_card(tmp, run, code_folder=folder)) if runs.read_config(run) is not None else None
    try:
        hf_export.reexport_checkpoint(folder, card)
    except (CheckpointError, SourceError, ConfigError, OSError) as exc:
        st.session_state[f"{key}_msg"] = ("error", f"Not re-exported: {exc}")
    else:
        st.session_state[f"{key}_msg"] = ("success", f"Re-exported {folder.name}: transformers now loads it as "
                                                     f"{hf_format.folder_format(folder)}, with the same logits.")


def checkpoint_in_python(ckpt: Path, key: str, text: str | None = None, can_rewrite: bool = True) -> None:
    """The "Use this checkpoint in Python" box: the code that loads ``ckpt`` (transformers where it computes the
    model exactly, bertcore otherwise; :func:`bertcore.loading.hf_export.usage_code`), copyable; for an older pre-LN
    folder
    a notice and a one-click re-export (``can_rewrite`` False while its run writes checkpoints, and on a shared server
    for another session's run). A folder that cannot be read gets a message, not a traceback."""
    can_rewrite = can_rewrite and can_control(ckpt.parent.parent)
    with st.container(border=True):
        st.markdown(f"**Use this checkpoint in Python** · `{ckpt.parent.parent.name}/{ckpt.name}`")
        kind, msg = st.session_state.pop(f"{key}_msg", (None, None))
        if kind == "success":
            st.success(widgets.escape_md(msg), icon=":material/check:")
        elif kind == "error":
            st.error(widgets.escape_md(msg), icon=":material/error:")
        fmt = hf_format.folder_format(ckpt)
        if fmt is None:
            st.error(f"Cannot read {ckpt.name}/config.json: the folder is incomplete or not a checkpoint.",
                     icon=":material/error:")
            return
        if fmt == hf_format.LEGACY_PRELN:
            st.warning(LEGACY_NOTICE, icon=":material/warning:")
            st.button("Re-export in the format transformers loads exactly", key=f"{key}_reexport",
                      icon=":material/sync:", on_click=_reexport, args=(str(ckpt), key), disabled=not can_rewrite,
                      help="Rewrites this checkpoint folder (weights, config.json, README.md model card) as "
                           "RobertaPreLayerNorm; the old folder stays until the new one is complete."
                           + ("" if can_rewrite else " Not while the run is writing checkpoints, nor on a shared "
                                                     "server for another session's run."))
        try:
            code = hf_export.usage_code(ckpt, text)
            head = hf_format_head(ckpt)
        except (CheckpointError, SourceError, ConfigError, OSError) as exc:
            widgets.show_error(CheckpointError(str(exc)), "This checkpoint cannot be loaded")
            return
        st.caption(hf_export.usage_note(fmt, head, ckpt))
        st.code(code, language="python")


def hf_format_head(ckpt: Path) -> str:
    """The head a checkpoint has (``pretraining``, ``mlm``, ``classification``, ``base``)."""
    from bertcore.loading.sources import detect_head

    return detect_head(ckpt)


def checkpoint_picker(ckpts: list[Path], key: str) -> Path:
    """A choice among a run's checkpoints (the last by default); no widget for a single one."""
    if len(ckpts) == 1:
        return ckpts[0]
    steps = [runs.checkpoint_step(c) for c in ckpts]
    step = st.selectbox("Checkpoint (step)", steps, index=len(steps) - 1, key=key)
    return ckpts[steps.index(step)]


# ----------------------------------------------------------------------------- the list of runs
def runs_table(infos: list[runs.RunInfo]) -> None:
    """The runs: state, task, step / total, start time, checkpoints, and why failed runs failed (on a shared
    server also who started each: this session or another)."""
    rows = []
    mine = shared_mode.session_owner() if shared_mode.enabled() else None
    for i in infos:
        total = i.total_steps or (i.args or {}).get("max_steps")
        started = i.created or (runs.read_status(i.path) or {}).get("started") or ""
        rows.append({"state": i.state, "task": runs.task_of(i),
                     "step": f"{i.step:,} / {total:,}" if total else f"{i.step:,}",
                     "started": started.replace("T", " ").removesuffix("Z"),
                     "checkpoints": i.n_checkpoints, "run": i.run_id,
                     "error": (i.error or "")[:120]})
        if mine is not None:  # shared server: whose run it is (never the owner's id)
            rows[-1]["started by"] = "you" if i.owner == mine else "another session"
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


