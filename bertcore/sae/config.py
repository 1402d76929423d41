"""The options of an SAE training run, in one place (torch-free: the UI and the run machinery read them cheaply).

Defaults follow Gao et al. 2024 ("Scaling and evaluating sparse autoencoders") scaled to MiniLM (hidden 384):
16x expansion (6,144 latents), k = 32, Adam at ``2e-4 / sqrt(d_sae / 2**14)`` (section A.4's rule, 3.3e-4 here,
rounded to 4e-4), AuxK with ``k_aux`` = 256 (a power of two near d/2) and coefficient 1/32 (section A.2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CORPUS = "everyday"
KINDS = ("sae", "transcoder")
#: what ``autocast`` may name: no autocast, or a torch dtype
AUTOCAST = ("none", "bfloat16")
#: written beside ``layers`` by :meth:`SAETrainConfig.to_dict`: a run.json without it counted layers from 1
LAYERS_ARE_BLOCKS = "layers_are_blocks"


@dataclass
class SAETrainConfig:
    """Every option of ``python -m bertcore.sae train`` (the CLI flags are the names with ``-``)."""

    model: str = "shipped"  #: a model folder (a run's checkpoint too), or "shipped" (models/minilm-mlm)
    #: "sae": SAEs of each block's output; "transcoder": transcoders of each block's feed-forward sub-layer
    #: (:mod:`bertcore.sae.transcoder`, BatchTopK with ``k`` latents per token on average)
    kind: str = "sae"
    skip: bool = True  #: a transcoder's linear skip path ``W_skip``
    #: the 0-based blocks whose output the SAEs read (transformers' ``bert.encoder.layer.{l}``; folders ``layer-{l+1}``)
    layers: tuple[int, ...] = field(default=(1,), metadata={
        "help": "the 0-based blocks whose output to read, comma-separated (e.g. 1,3,5: bert.encoder.layer.1 / .3 / "
                ".5, written to layer-2/ layer-4/ layer-6/)"})
    corpus: str = DEFAULT_CORPUS  #: any corpus name of bertcore.data, a .txt file or a folder; never 'sotu'
    heldout: str = "sotu"  #: the held-out text of the measures logged during training
    d_sae: int = 6144  #: latents per SAE (more than ``init_from``'s: those SAEs are widened, their latents kept)
    k: int = 32  #: latents kept per token
    batch_size: int = 4096  #: tokens per optimizer step
    lr: float = 4e-4
    warmup_steps: int = 100
    max_steps: int | None = None  #: stop after this many steps
    max_time: float | None = None  #: stop after this many minutes of training (with no max_steps, the decay's clock)
    #: the share of the steps (or of max_time) over which the lr decays linearly to 0 at the end; constant before
    #: (warmup-stable-decay, Hu et al. 2024, section 4)
    decay: float = 0.2
    seq_len: int = 128
    block_size: int = 128  #: chunks per forward pass of the model
    mlm_probability: float = 0.15  #: the training text is masked as in pretraining
    passes: int = 1  #: SAE updates per token of a block (each pass shuffled anew; saves forward passes)
    dead_tokens: int = 1_000_000  #: a latent not active in this many training tokens counts as dead (AuxK)
    k_aux: int = 256
    aux_coef: float = 1 / 32
    log_every: int = 10
    eval_every: int = 200
    eval_tokens: int = 32_768  #: held-out (sotu) tokens of the evaluation logged during training
    save_every: int = 100
    keep_checkpoints: int = 2
    seed: int = 0
    threads: int = 2
    #: where the model's forward passes and the SAEs' steps run (:func:`bertcore.device.resolve`: auto takes CUDA
    #: when there is one); tokenisation and masking stay on the CPU
    device: str = "auto"
    #: the corpus's blocks are dealt into this many shards, each read by its own stream, all of them side by side in
    #: every step (a global batch of ``shards x batch_size`` tokens); under ``torchrun`` each rank reads its share of
    #: them and DDP averages the gradients. 0: one shard per rank. One process with ``shards=N`` computes what N
    #: ranks do.
    shards: int = 0
    #: the frozen model's forward passes that make the training activations under ``torch.autocast`` in this dtype
    #: ("bfloat16"), or "none" (the model's float32); the held-out measures always run in float32
    autocast: str = field(default="none", metadata={
        "choices": AUTOCAST, "help": "the frozen model's forward passes for the training activations under "
                                     "torch.autocast in this dtype (default none: float32)"})
    #: start from the SAEs in this folder (``layer-<l>/`` SAELens folders, e.g. ``models/minilm-mlm/sae``) instead
    #: of the data initialisation: their weights and input scale, this run's ``k`` and a fresh optimizer; with fewer
    #: latents than ``d_sae`` they are widened (:meth:`bertcore.sae.model.TopKSAE.widened`, the new latents resampled)
    init_from: str | None = None
    #: every this many training tokens, resample the latents dead by ``dead_tokens`` (0: never; Bricken et al. 2023)
    resample_every: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> list[str]:
        """Problems with the options, as sentences (empty when they are usable)."""
        problems = []
        if not self.layers or any(int(layer) < 0 for layer in self.layers):
            problems.append(f"layers are 0-based blocks, 0..L-1 (0: the output of the first block); "
                            f"got {list(self.layers)}")
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.autocast not in AUTOCAST:
            problems.append(f"autocast must be one of {', '.join(AUTOCAST)}; got {self.autocast!r}")
        if self.shards < 0:
            problems.append(f"shards must be 0 (one per rank) or more; got {self.shards}")
        if not 1 <= self.k <= self.d_sae:
            problems.append(f"k must be between 1 and d_sae ({self.d_sae}); got {self.k}")
        if self.batch_size < 1 or self.seq_len < 8 or self.block_size < 1:
            problems.append("batch_size and block_size must be positive and seq_len at least 8")
        if self.max_steps is None and self.max_time is None:
            problems.append("give max_steps or max_time (minutes), or both")
        if self.max_time is not None and self.max_time <= 0:
            problems.append(f"max_time must be a positive number of minutes; got {self.max_time}")
        if not 0 < self.decay <= 1:
            problems.append(f"decay is a share of the run, above 0 and at most 1; got {self.decay}")
        if not self.lr > 0:
            problems.append(f"lr must be positive; got {self.lr}")
        return problems

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["layers"] = list(self.layers)
        d[LAYERS_ARE_BLOCKS] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SAETrainConfig":
        """From :meth:`to_dict` (unknown keys are ignored, so older run.json files still read; their layers, counted
        from 1, become 0-based blocks)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in d.items() if k in names}
        if "layers" in kept:
            shift = 0 if d.get(LAYERS_ARE_BLOCKS) else 1
            kept["layers"] = tuple(int(x) - shift for x in kept["layers"])
        return cls(**kept)

    def to_argv(self) -> list[str]:
        """CLI words (after ``train``) that rebuild these options."""
        words: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is None or value == f.default:
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):  # argparse.BooleanOptionalAction: --skip / --no-skip
                words.append(flag if value else "--no-" + f.name.replace("_", "-"))
                continue
            words += [flag, ",".join(str(x) for x in value) if f.name == "layers" else str(value)]
        return words
