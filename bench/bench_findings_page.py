"""Time the Findings page under AppTest: the first render (runs the model on the held-out segments)
and a render after the forward passes are cached, for the packaged MiniLM, a tiny random model and
a run checkpoint (a tiny random BertForPreTraining saved as step 0 of a run), in one run.

    OMP_NUM_THREADS=1 python bench/bench_findings_page.py [--segments 150]

Prints seconds per render and, as the reference measured in the same run, the render time of the
Overview page (a page with no model computation): the ratio cached-Findings / Overview says what the
Findings page costs beyond any page once its forward passes are cached (the target is <= 3 s).
"""

from __future__ import annotations

import harness

import shutil
import tempfile
from pathlib import Path

import torch
from streamlit.testing.v1 import AppTest

from bertcore.modeling.config import BertConfig
from bertcore.modeling.heads import BertForPreTraining
from bertcore.modeling.model import BertModel
from bertcore.loading.sources import PACKAGED, ModelSource, packaged_model_dir

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "explorer" / "app_pages"


def render(at: AppTest, name: str) -> float:
    """Seconds of one ``at.run()`` (kept as a harness timing named ``name``); raises if the page raised."""
    with harness.stopwatch(name) as sw:
        at.run()
        if at.exception:
            raise RuntimeError([e.value for e in at.exception])
    return sw.seconds


def tiny(folder: Path, cls) -> Path:
    torch.manual_seed(0)
    cls(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   max_position_embeddings=128)).save_pretrained(folder)
    shutil.copy(packaged_model_dir() / "vocab.txt", folder / "vocab.txt")
    return folder


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--segments", type=int, default=150))
    tmp = Path(tempfile.mkdtemp())
    run_ckpt = tiny(tmp / "runs" / "bench" / "checkpoints" / "step-000000", BertForPreTraining)
    torch.save({"step": 0}, run_ckpt / "trainer_state.pt")
    sources = {"packaged MiniLM": PACKAGED,
               "tiny random model": ModelSource("local", str(tiny(tmp / "tiny", BertModel)), "tiny"),
               "run checkpoint (step 0)": ModelSource("run", str(run_ckpt), "bench step 0")}
    overview = AppTest.from_file(str(PAGES / "overview.py"), default_timeout=600)
    render(overview, "Overview render (warm-up)")
    reference = min(render(overview, "Overview render") for _ in range(3))
    print(f"reference: Overview page render {reference:.3f} s")
    for name, source in sources.items():
        at = AppTest.from_file(str(PAGES / "findings.py"), default_timeout=900)
        at.session_state["model_source"] = source
        at.session_state["find_segments"] = args.segments
        first = render(at, f"Findings, {name}: first render")
        cached = min(render(at, f"Findings, {name}: cached render") for _ in range(3))
        print(f"{name:26s} first render {first:6.1f} s   cached render {cached:5.2f} s   "
              f"cached / Overview = {cached / reference:5.1f}x")
    shutil.rmtree(tmp, ignore_errors=True)
    harness.save(args.json)


if __name__ == "__main__":
    main()
