"""How many torch threads the app's own computations should use: 1 against every core, idle and beside busy cores.

    python bench/bench_app_threads.py                # idle, then 1 core busy (a spinning process, as a training run
                                                     # or the browser is on a student's laptop)
    python bench/bench_app_threads.py --busy 0 1 2   # which numbers of busy cores to try

Each computation is what a page runs on the packaged MiniLM-MLM: one forward pass with attentions and hidden states of
a 40-word sentence (Attention, One forward pass), the pseudo-log-likelihood of a 20-word sentence (Grammar), and 20
pairs of the minimal-pair suite. For each number of busy cores, both thread counts are timed in the same minute
(interleaved, median of ``--reps``), so the ratio ``all / 1`` cancels the machine's drift: above 1, one thread is
faster. Prints one JSON line per (busy, computation) and the load average before the run (time nothing else then).
"""

from __future__ import annotations

import harness

import json
import os
import subprocess
import sys
import time

import torch

from bertcore.loading import sources
from bertcore.analysis.grammar import minimal_pairs as MP
from bertcore.analysis.grammar.scoring import pseudo_log_likelihood
from bertcore.tokenization.tokenizer import encode_batch

SENTENCE = ("The old farmer who lives near the river said that his two dogs were happy to run across the fields, "
            "and the children laughed as they watched them chase the birds along the muddy bank until sunset.")
PLL_SENTENCE = "The old farmer who lives near the river said that his two dogs were happy to run across the fields."
SPIN = "import time\nt = time.time()\nwhile time.time() - t < 3600: pass"


def computations(lm) -> dict:
    batch = encode_batch(lm.tokenizer, [SENTENCE])
    pairs = MP.generate(10)[:20]

    def forward():
        with torch.no_grad():
            lm.model(**batch, output_attentions=True, output_hidden_states=True)

    return {"forward with attentions (40 words)": forward,
            "PLL of a 20-word sentence": lambda: pseudo_log_likelihood(lm.model, lm.tokenizer, PLL_SENTENCE),
            "20 minimal pairs": lambda: list(MP.score(lm.model, lm.tokenizer, pairs, "within_word_l2r"))}


def main() -> None:
    def options(ap):
        ap.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="numbers of spinning processes to try")
        ap.add_argument("--reps", type=int, default=5)

    a = harness.parse(__doc__, options)
    cores = os.cpu_count() or 1
    print(json.dumps({"cores": cores, "load_average_before": harness.load_average()}), flush=True)
    lm = sources.load(sources.PACKAGED_MLM)
    todo = computations(lm)
    for busy in a.busy:
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
        try:
            time.sleep(1)
            for name, fn in todo.items():
                ms = {1: [], cores: []}
                for _ in range(a.reps):  # interleaved: both counts see the same minute of the machine
                    for n in ms:  # a warm-up call after each switch of the thread count, then one timed call
                        torch.set_num_threads(n)
                        ms[n].append(harness.median_ms(fn, 1, warmup=1,
                                                       name=f"{name}, {busy} busy, {n} thread(s)"))
                one, every = sorted(ms[1])[a.reps // 2], sorted(ms[cores])[a.reps // 2]
                print(json.dumps({"busy_cores": busy, "computation": name, "ms_1_thread": round(one, 1),
                                  f"ms_{cores}_threads": round(every, 1), "ratio_all_over_1": round(every / one, 2)}),
                      flush=True)
        finally:
            for s in spinners:
                s.kill()
                s.wait()
    harness.save(a.json)


if __name__ == "__main__":
    main()
