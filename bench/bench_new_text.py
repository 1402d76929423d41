"""What a student's new sentence costs the server: the script run of a page after its text box changes.

    python bench/bench_new_text.py [--root CHECKOUT] [--threads 2] [--reps 3]

Each page runs in Streamlit's AppTest (the server's own script runner, no browser), first with every default (to
warm the model and imports), then ``--reps`` times with a new sentence typed into its text box (a sentence no cache
has seen: the run computes what the page shows first, as after a student's Ctrl+Enter). Reported per page: the
median seconds of that rerun, and its ratio to a plain forward of the same sentence measured in the same process
(the reference, so machine noise cancels). ``--root`` runs another checkout's pages (a worktree of an older commit:
the before of a before/after), in a subprocess with that checkout on ``PYTHONPATH``.
"""

from __future__ import annotations

import harness

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = harness.ROOT

# page file stem -> its main text box's session-state key
PAGES = {"masking": "msk_text", "attention": "att_text", "tokenization": "tok_text", "embeddings": "emb_text",
         "forward_pass": "fp_text", "anatomy": "ana_text", "next_sentence": "nsp_a"}
SENTENCES = ["The students opened the [MASK] and started to read number {i}.",
             "A quiet river ran past the old mill where {i} ducks were [MASK].",
             "After the match the coach said the {i} players had [MASK] well."]


def measure(root: Path, reps: int) -> dict:
    # the checkout measured takes the place on sys.path that the harness gave this one (another checkout's pages
    # import that checkout's bertcore)
    sys.path[:] = [str(root), *(p for p in sys.path if p != str(ROOT))]
    import torch
    from streamlit.testing.v1 import AppTest

    from bertcore.loading import sources

    lm = sources.load(sources.PACKAGED_MLM)
    out = {}
    for stem, key in PAGES.items():
        path = root / "explorer" / "app_pages" / f"{stem}.py"
        if not path.is_file():
            continue
        at = AppTest.from_file(str(path), default_timeout=600).run()  # defaults: model, imports, warm caches
        if key not in at.session_state:
            out[stem] = {"skipped": f"no text box {key}"}
            continue
        texts = [SENTENCES[r % len(SENTENCES)].format(i=time.time_ns() % 10**6) for r in range(reps)]
        encs = [lm.tokenizer(t.replace("[MASK]", lm.tokenizer.mask_token), return_tensors="pt") for t in texts]
        turn = iter(range(reps))
        now: dict = {}

        def rerun():  # a new sentence in the box, the page's run
            now["i"] = next(turn)
            at.session_state[key] = texts[now["i"]]
            at.run()

        def forward():  # the reference, right after: a plain forward of the same sentence
            with torch.no_grad():
                lm.model(**encs[now["i"]])

        # in turn, rerun then forward, rep after rep (no warm-up: the default run above warmed the page)
        timed = harness.interleaved({f"{stem}: rerun with a new text": rerun,
                                     f"{stem}: forward of that text": forward}, reps, warmup=0)
        rerun_s, forward_s = (bench.median() for bench in timed.values())
        errors = [e.value for e in at.exception]
        out[stem] = {"rerun_s": rerun_s, "forward_s": forward_s, "ratio": rerun_s / forward_s,
                     "exceptions": len(errors)}
    return out


def main() -> None:
    def options(ap):
        ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose pages run")
        ap.add_argument("--reps", type=int, default=3)
        ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)

    args = harness.parse(__doc__, options)
    if args.child or args.root.resolve() == ROOT:
        result = measure(args.root.resolve(), args.reps)
    else:  # the child times the pages, and saves the timings where --json says
        env = {**os.environ, "PYTHONPATH": str(args.root.resolve())}
        common = [*(["--threads", str(args.threads)] if args.threads else []),
                  *(["--json", str(args.json.resolve())] if args.json else [])]
        proc = subprocess.run([sys.executable, __file__, "--root", str(args.root), "--reps", str(args.reps), *common,
                               "--child"], cwd=args.root, env=env, capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    if args.child:
        harness.save(args.json)
        print(json.dumps(result))
        return
    print(f"{'page':14s} {'new text (s)':>13s} {'forward (s)':>12s} {'ratio':>7s}")
    for stem, r in result.items():
        if "skipped" in r:
            print(f"{stem:14s} {r['skipped']}")
        else:
            print(f"{stem:14s} {r['rerun_s']:13.2f} {r['forward_s']:12.3f} {r['ratio']:7.0f}"
                  + (f"  ({r['exceptions']} exceptions)" if r["exceptions"] else ""))
    print(json.dumps({"root": str(args.root), "threads": args.threads, "pages": result}))
    harness.save(args.json)


if __name__ == "__main__":
    main()
