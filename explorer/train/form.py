"""The Train page's launch form: task, starting model, data (packaged, a path or an upload), run
length and the advanced options. Every default, range and help text comes from
:class:`bertcore.runs.config.TrainConfig` (the CLI reads the same), the checks before a launch
from ``bertcore.training.models.validate`` and ``bertcore.data.check_upload``.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from bertcore import data as D
from bertcore import runs
from bertcore.loading.sources import list_run_sources
from bertcore.runs.config import default_lr, field_info
from bertcore.training.models import validate
from bertcore.training.recipes import DEFAULT_RECIPE, RECIPES
from explorer import as_code, widgets
from explorer.server import shared_mode
from explorer.train import uploads as train_uploads

TASKS = {"pretrain": "Pretraining (masked LM + next sentence prediction)",
         "finetune": "Fine-tuning (sentence classification, e.g. sentiment)"}
SCRATCH_PRESETS = ("nano", "tiny", "mini", "small", "medium", "base")
PRETRAIN_DATA = {"bbc": "BBC News, 2,225 articles (packaged, offline)",
                 **{name: f"{c.description} (offline)" for name, c in D.CORPORA.items() if name != "bbc"},
                 "local": "Local .txt file or folder of .txt files",
                 "upload": "Upload a .txt file (documents separated by blank lines)",
                 "hub:wikitext:wikitext-2-raw-v1": "WikiText-2 from the Hugging Face Hub (needs internet)"}
FINETUNE_DATA = {"tweets": "Tweets, positive vs negative (packaged, offline)",
                 "bbc-topics": "BBC News topics, 5 classes (packaged, offline; easy)",
                 "local": "Local .csv file (columns: text, label)",
                 "upload": "Upload a .csv file (columns: text, label; optional text_pair)",
                 "hub:imdb": "IMDB reviews from the Hugging Face Hub (needs internet)",
                 "hub:sst2": "SST-2 from the Hugging Face Hub (needs internet)"}
POOLING = {"auto": "Auto: what the model declares",
           "cls": "The [CLS] vector (BERT's pooler)",
           "mean": "The mean of the token vectors"}


KEYS = {"max_steps": "steps", "epochs": "epochs", "batch_size": "batch", "max_seq_len": "seqlen", "eval_every": "eval",
        "log_every": "log", "save_every": "save", "keep_checkpoints": "keep", "seed": "seed"}  # widget keys


def recipe_options(opts: dict[str, Any]) -> None:
    """Pretraining knobs: NSP on/off and its weight, the corruption split, the sequence-length schedule,
    early checkpoints and TensorBoard (defaults from TrainConfig: BERT's recipe)."""
    with st.expander("Pretraining recipe (MLM, NSP, sequence length)"):
        st.caption("BERT's recipe is the default: NSP on, 80% [MASK] / 10% random / 10% unchanged, one sequence "
                   "length. RoBERTa (Liu et al. 2019) drops NSP; Wettig et al. 2023 find 100% [MASK] works as well; "
                   "BERT trained 90% of its steps at 128 tokens, then 512.")
        r1, r2, r3 = st.columns(3)
        opts["nsp"] = r1.toggle("Next sentence prediction", value=field_info("nsp")["default"], key="train_nsp",
                                help=option_help("nsp"))
        if opts["nsp"]:
            with r1:
                opts["nsp_weight"] = number("nsp_weight", "pretrain", "NSP loss weight", step=0.1)
                opts["nsp_balance"] = st.checkbox("Balance IsNext / NotNext",
                                                  value=field_info("nsp_balance")["default"],
                                                  key="train_nsp_balance", help=option_help("nsp_balance"))
        split = r2.slider("Selected tokens: [MASK] | random | unchanged", 0.0, 1.0,
                          (field_info("mask_replace_prob")["default"],
                           field_info("mask_replace_prob")["default"] + field_info("random_replace_prob")["default"]),
                          0.05, key="train_split", help="Left handle: share replaced by [MASK]; between the handles: "
                          "share replaced by a random token; the rest stays unchanged (BERT: 80 | 10 | 10).")
        opts["mask_replace_prob"] = round(float(split[0]), 4)
        opts["random_replace_prob"] = round(float(split[1]) - float(split[0]), 4)
        short = r3.number_input("Short sequences first (tokens, 0: off)", min_value=0, max_value=4096, value=0, step=16,
                                key="train_short_len", help=option_help("short_seq_len"))
        if short:
            opts["short_seq_len"] = int(short)
            opts["short_seq_fraction"] = float(r3.slider("Share of the run at that length", 0.0, 1.0, 0.5, 0.05,
                                                         key="train_short_frac"))
        st.caption("Agreement supervision: counterfactual subject-verb number pairs mined from the training text "
                   "(spaCy + inflect; parsing takes minutes the first time, then it is cached), their verb always "
                   "[MASK]ed, and a margin loss at that verb. Corpus weights repeat parts of a mixture.")
        g1, g0, g2, g3, g4 = st.columns(5)
        with g1:
            opts["agreement_pairs"] = number("agreement_pairs", "pretrain", "Agreement pairs (0: off)", step=1000)
        with g0:
            opts["agreement_attractor_repeat"] = number("agreement_attractor_repeat", "pretrain",
                                                        "Attractor pairs, times", step=1)
        with g2:
            opts["agreement_margin_weight"] = number("agreement_margin_weight", "pretrain", "Margin loss weight",
                                                     step=0.1)
        with g3:
            opts["agreement_margin"] = number("agreement_margin", "pretrain", "Margin (logits)", step=0.5)
        weights = g4.text_input("Corpus weights", key="train_corpus_weights", placeholder="wiki=2,fortunes=3",
                                help=option_help("corpus_weights"))
        if weights.strip():
            opts["corpus_weights"] = weights.strip()
        opts["save_early"] = r1.checkbox("Early checkpoints (0, 10, 20, 50, 100, ...)", key="train_save_early",
                                         help=option_help("save_early"))
        opts["tensorboard"] = r2.checkbox("TensorBoard event files", key="train_tensorboard",
                                          help=option_help("tensorboard"))


def option_help(name: str, extra: str = "") -> str:
    """The TrainConfig help of ``name`` as a sentence (the page's tooltip), plus ``extra``."""
    text = field_info(name)["help"]
    return text[:1].upper() + text[1:] + "." + (" " + extra if extra else "")


def number(name: str, task: str, label: str, *, value: Any = None, step: Any = None, fmt: str | None = None,
           key: str | None = None, extra: str = "") -> Any:
    """A ``st.number_input`` for the TrainConfig option ``name``: its default (or ``value``), its range and
    its help text; returns an int or a float as the option's default is."""
    info = field_info(name, task)
    default = info["default"] if value is None else value
    cast = float if isinstance(default, float) or isinstance(step, float) else int
    lo, hi = info["min"], info["max"]
    if lo is not None and hi is not None:
        rng = f"{lo:g} to {hi:g}. "
    else:
        rng = f"at least {lo:g}. " if lo is not None else ""
    out = st.number_input(label, min_value=None if lo is None else cast(lo), max_value=None if hi is None else cast(hi),
                          value=cast(default), step=None if step is None else cast(step), format=fmt,
                          key=key or f"train_{task}_{KEYS.get(name, name)}", help=rng + option_help(name, extra))
    return cast(out)


# ----------------------------------------------------------------------------- the launch form
def recipe_form() -> dict[str, Any] | None:
    """The one-click recipes (bertcore.training.recipes): choose one, set its minutes; None = custom."""
    names = [*RECIPES, "custom"]
    name = st.radio("Recipe", names, index=names.index(DEFAULT_RECIPE), key="train_recipe",
                    format_func=lambda n: RECIPES[n].label if n in RECIPES else "Custom: every option",
                    help="A recipe fills every option with values measured to work on a CPU; 'Custom' shows the "
                         "whole form.")
    if name == "custom":
        return None
    recipe = RECIPES[name]
    st.caption(recipe.description)
    c1, c2, c3 = st.columns(3)
    minutes = c1.number_input("Minutes", min_value=0.5, max_value=1000.0, value=recipe.minutes, step=1.0,
                              key=f"train_recipe_minutes_{name}", help=option_help("max_time"))
    opts = {**recipe.options, "max_time": float(minutes)}
    opts["device"] = c2.selectbox("Device", runs.devices(), key="train_device",
                                  help="One run at a time per device; a second one is refused or queued.")
    with c3.popover("All options of this recipe"):
        st.json({k: v for k, v in opts.items() if k != "device"})
    return opts


def launch_form() -> None:
    st.subheader("Start a run")
    task = st.radio("Task", list(TASKS), format_func=TASKS.__getitem__, key="train_task", horizontal=True)
    shared = shared_mode.settings()
    if task == "pretrain":
        opts = recipe_form()
        if opts is not None:
            queue = queue_input(shared)
            launch_controls(task, opts, validate(task, opts), None, queue)
            return
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
            data_options = allowed(PRETRAIN_DATA, shared)
            data = st.selectbox("Corpus", list(data_options), format_func=data_options.__getitem__,
                                key="train_pt_data")
        else:
            st.caption("Fine-tuning adds a classifier on the sentence's vector (the [CLS] vector in BERT; the mean "
                       "of the token vectors for the packaged MiniLM, which was trained that way: Advanced options) "
                       "and trains everything on labelled sentences. Default: the packaged MiniLM on tweets "
                       "(positive / negative).")
            starts = {"packaged": "Packaged MiniLM (offline)",
                      "checkpoint": "A run's checkpoint (e.g. your pretrained model)",
                      "local": "Local Hugging Face folder",
                      "scratch": "From scratch (a preset; shows what pretraining adds)"}
            if shared.enabled:  # no typed folder on a shared server; the operator's models instead
                starts = {k: v for k, v in starts.items() if k != "local"}
                if shared.models:
                    starts = {**dict(list(starts.items())[:2]), "server": widgets.SERVER_LABEL,
                              **dict(list(starts.items())[2:])}
            start = st.selectbox("Starting model", list(starts), key="train_ft_start", format_func=starts.__getitem__)
            data_options = allowed(FINETUNE_DATA, shared)
            data = st.selectbox("Data set", list(data_options), format_func=data_options.__getitem__,
                                key="train_ft_data")
        preset = "nano"
        if start == "scratch":
            preset = st.selectbox("Preset", SCRATCH_PRESETS, key=f"train_{task}_preset",
                                  help="nano: 2 layers x 256 (CPU, minutes); tiny/mini/small: Turc et al.'s "
                                       "miniatures; base: BERT-base (needs a GPU).")
            opts["preset"] = preset
            if task == "finetune":
                opts["init"] = "scratch"
            else:
                vocab = st.selectbox("Vocabulary", ["packaged", "corpus"], key="train_pretrain_vocab",
                                     format_func={"packaged": "bert-base-uncased's (30,522 WordPiece tokens)",
                                                  "corpus": "WordPiece trained on the corpus"}.__getitem__,
                                     help="A smaller vocabulary trained on the corpus (the tokenizers library's "
                                          "WordPiece trainer, cached per corpus and size) makes the embedding and "
                                          "output layers smaller; the checkpoints carry it.")
                if vocab == "corpus":
                    opts["vocab_size"] = number("vocab_size", task, "Vocabulary size", step=1000,
                                                extra="Trained once per corpus and size (seconds to a minute)")
                opts["tokenizer"] = vocab
        elif start == "checkpoint":
            if not ckpt_labels:
                st.warning("No run checkpoint yet: pretrain a model first, or choose another start.")
                opts["init"] = ""
            else:
                opts["init"] = st.selectbox("Checkpoint", list(ckpt_labels), format_func=ckpt_labels.__getitem__,
                                            key=f"train_{task}_ckpt")
        elif start == "server":
            folders = shared.folders
            opts["init"] = folders[st.selectbox("Model", list(folders), key="train_ft_server")]
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
            data, pair_column, upload_problem = train_uploads.upload_input(task)
            if pair_column:
                opts["text_pair_column"] = pair_column
        if str(data).startswith("hub:"):
            st.caption("This data set is downloaded from the Hugging Face Hub: without internet the run fails "
                       "with a message saying so.")
        opts["corpus" if task == "pretrain" else "dataset"] = data

    with c2:
        scratch = start == "scratch"
        length = st.radio("Length in", ["steps", "minutes", "epochs"], key=f"train_{task}_length", horizontal=True,
                          help="An optimizer step processes one batch; minutes is a time budget (the run first "
                               "measures this machine's steps per second for a few seconds, then fixes the number "
                               "of steps and follows a step schedule, so the same seed gives the same run; the run "
                               "view says what the budget became); an epoch is one pass over the training split.")
        if length == "steps":
            opts["max_steps"] = number("max_steps", task, "Steps", step=50)
        elif length == "minutes":
            opts["max_time"] = number("max_time", task, "Minutes", step=1.0, key=f"train_{task}_minutes")
        else:
            opts["epochs"] = number("epochs", task, "Epochs", step=0.5)
        opts["batch_size"] = number("batch_size", task, "Batch size", step=8)
        opts["max_seq_len"] = number("max_seq_len", task, "Sequence length (tokens)", step=16,
                                     extra="At most the model's positions; attention costs grow with its square.")
        opts["lr"] = number("lr", task, "Peak learning rate", value=default_lr(task, scratch), fmt="%.1e", step=1e-5,
                            key=f"train_{task}_lr_{'scratch' if scratch else 'init'}")
        devices = runs.devices()
        opts["device"] = st.selectbox("Device", devices, key="train_device",
                                      help="One run at a time per device; a second one is refused or queued.")
        queue = queue_input(shared)

    with st.expander("Advanced options"):
        a1, a2, a3 = st.columns(3)
        steps = opts.get("max_steps") or field_info("max_steps")["default"]
        with a1:
            opts["eval_every"] = number("eval_every", task, "Evaluate every (steps)",
                                        value=min(field_info("eval_every")["default"], steps))
            opts["log_every"] = number("log_every", task, "Log train metrics every (steps)")
        with a2:
            opts["save_every"] = number("save_every", task, "Checkpoint every (steps)",
                                        extra="The Evolution page compares checkpoints.")
            opts["keep_checkpoints"] = number("keep_checkpoints", task, "Checkpoints kept (0: all)")
        with a3:
            opts["seed"] = number("seed", task, "Seed")
        if task == "pretrain":
            docs = int(a3.number_input("Documents to use (0: all)", min_value=0, max_value=1_000_000, value=0,
                                       key="train_pretrain_docs",
                                       help="0 to 1,000,000 documents of the corpus (fewer: faster start)."))
            opts["max_docs"] = docs or None
            probe = st.text_input("Probe sentence (with [MASK])", key="train_probe",
                                  value=field_info("probe")["default"],
                                  help="Its [MASK] predictions are logged at each evaluation. Several "
                                       "sentences: separate them with ' | '. 'auto': 4 held-out sentences whose "
                                       "hidden word its two neighbours predict in the training text.")
            opts["probe"] = probe.strip() or None
        else:
            with a1:
                opts["head_lr"] = number("head_lr", task, "Peak learning rate of the new head", fmt="%.1e",
                                         step=1e-4, extra="The classifier starts from random weights: it needs a "
                                         "higher rate than the pretrained layers under it.")
                opts["pooling"] = st.selectbox(
                    "Classifier reads", list(POOLING), format_func=POOLING.__getitem__, key="train_ft_pooling",
                    help=option_help("pooling", "The packaged MiniLM was trained as a mean-pooled sentence "
                                     "encoder: its [CLS] vector was never the sentence's summary."))
            n = int(a3.number_input("Training examples (0: all)", min_value=0, max_value=10_000_000, value=0,
                                    key="train_finetune_examples",
                                    help="0 to 10,000,000: subsample the training split (seeded) for a quicker run."))
            opts["max_train_examples"] = n or None

    if task == "pretrain":
        recipe_options(opts)
    launch_controls(task, opts, validate(task, opts), upload_problem, queue)


def allowed(options: dict[str, str], shared: shared_mode.Settings) -> dict[str, str]:
    """The data sources a visitor may pick: all for a single user; on a shared server no typed path (``local``)
    and no Hub data set unless the operator allows the hub."""
    if not shared.enabled:
        return options
    return {k: v for k, v in options.items() if k != "local" and (shared.allow_hub or not k.startswith("hub:"))}


def queue_input(shared: shared_mode.Settings) -> bool:
    """'Queue if the device is busy' (a single user chooses); a shared server always queues, first come first
    served."""
    if shared.enabled:
        st.caption("On this shared server a run waits in the device's queue while the device is busy (first come, "
                   "first served); the run view shows its place.")
        return True
    return st.checkbox("Queue if the device is busy", value=False, key="train_queue",
                       help="Otherwise a launch while another run uses the device is refused.")


def session_runs() -> list[runs.RunInfo]:
    """Shared mode: this session's runs that are queued or running."""
    mine = shared_mode.session_owner()
    return [i for i in runs.list_runs() if i.state in ("queued", "running") and mine and i.owner == mine]


def launch_controls(task: str, opts: dict[str, Any], problems: list[str], upload_problem: str | None,
                    queue: bool) -> None:
    """The busy notice, the Start button, the checks and the launch (``opts`` holds ``device``). On a shared
    server the run is owned by this session, queued when the device is busy, and refused past the session's
    limit of concurrent runs."""
    if upload_problem:
        problems.insert(0, upload_problem)
    shared = shared_mode.settings()
    busy_with = runs.device_user(opts["device"])
    if busy_with and not queue:
        st.info(f"{opts['device']} is busy with run {busy_with}. Cancel it, wait, or tick "
                "'Queue if the device is busy'.")
    elif busy_with and shared.enabled:
        waiting = len(runs.lock_queue(runs.runs_root(), opts["device"]))
        st.info(f"{opts['device']} is busy with run {busy_with}: a new run joins its queue"
                + (f" behind {waiting} waiting run(s)." if waiting else "."), icon=":material/hourglass_top:")
    if not problems:
        as_code.run_expander(task, opts)  # the run below as a command line and a Python call
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
        owner = None
        if shared.enabled:
            owner = shared_mode.session_owner()
            mine = session_runs()
            if len(mine) >= shared.max_runs_per_session:
                st.warning(f"Not started: on this shared server a session may have {shared.max_runs_per_session} "
                           f"run(s) queued or running at a time, and yours has {len(mine)} "
                           f"({', '.join(i.run_id for i in mine)}). Wait for it to end or cancel it.",
                           icon=":material/block:")
                return
        args = {k: v for k, v in opts.items() if k != "device"}
        try:
            for key in ("corpus", "dataset"):
                if isinstance(args.get(key), str):
                    args[key] = train_uploads.run_copy(args[key])
            run_dir = runs.launch(task, args, device=opts["device"], queue=queue,
                                  **({"owner": owner} if shared.enabled else {}))
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
