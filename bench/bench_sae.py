"""SAE training throughput (docs/sae.md): tokens per second of the two parts of a training step at a fixed thread
count, on the shipped MiniLM-MLM, measured in the same run.

    python bench/bench_sae.py [--threads 2] [--layers 1 3 5] [--blocks 2] [--steps 8]

Prints, as JSON: the model's forward pass up to the deepest layer (``bertcore.sae.stream.ActivationStream.block``:
masking, the forward stopped after that layer, the shuffle; tokens per second), one SAE update of 6,144 latents,
k = 32, batch 1,024 (forward, AuxK, backward, Adam, decoder renormalisation; tokens per second per layer), what a
training run of these layers with ``--passes P`` does per *corpus* token (the forward once, P updates per layer),
and the 1-minute load average before and after (the machine may be shared: compare rows of one run only).
"""

from __future__ import annotations

import harness

import json

import torch

from bertcore.sae.model import TopKSAE, aux_k_loss, mse
from bertcore.sae.stream import ActivationStream, corpus_chunks
from bertcore.sae.start import load_model


def main() -> None:
    def options(ap):
        ap.add_argument("--layers", type=int, nargs="+", default=[1, 3, 5],
                        help="0-based blocks whose output the SAEs read (1 3 5: the shipped layer-2/4/6)")
        ap.add_argument("--blocks", type=int, default=2)
        ap.add_argument("--steps", type=int, default=8)
        ap.add_argument("--passes", type=int, default=3)

    args = harness.parse(__doc__, options)
    load_before = harness.load_average()
    model, tok, _ = load_model("shipped")
    stream = ActivationStream(model, tok, corpus_chunks("everyday", tok), args.layers, block_size=128)
    stream.block(0)  # warm-up
    n = 0
    with harness.stopwatch(f"forward to block {max(args.layers)}, {args.blocks} blocks of 128") as sw:
        for b in range(1, args.blocks + 1):
            n += next(iter(stream.block(b).values())).shape[0]
    forward = n / sw.seconds
    x = stream.block(0)[args.layers[0]][:1024]
    sae = TopKSAE(x.shape[1], 6144, 32)
    opt = torch.optim.Adam(sae.parameters(), lr=4e-4)
    dead = torch.arange(6144) % 10 == 0
    with harness.stopwatch(f"SAE updates, {args.steps} steps of {x.shape[0]} tokens") as sw:
        for _ in range(args.steps):
            out = sae(x)
            loss = mse(out.x, out.x_hat) + aux_k_loss(sae, out, dead, 256) / 32
            opt.zero_grad()
            loss.backward()
            sae.remove_parallel_grad()
            opt.step()
            sae.normalise_decoder()
    update = args.steps * x.shape[0] / sw.seconds
    per_token = 1 / forward + args.passes * len(args.layers) / update
    print(json.dumps({"threads": torch.get_num_threads(), "layers": args.layers, "forward_tokens_per_s": round(forward),
                      "sae_update_tokens_per_s_per_layer": round(update), "passes": args.passes,
                      "run_corpus_tokens_per_s": round(1 / per_token),
                      "load_1min_before_after": [round(load_before, 2), round(harness.load_average(), 2)]}))
    harness.save(args.json)


if __name__ == "__main__":
    main()
