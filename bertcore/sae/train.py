"""Training TopK SAEs on a model's hidden states, in a run directory (:class:`bertcore.runs.RunDir`: ``run.json``,
``status.json``, ``metrics.jsonl``, ``log.txt``, ``checkpoints/step-N/``), resumable after any stop.

One activation stream (:class:`~bertcore.sae.stream.ActivationStream`) feeds one SAE per layer asked for (one
forward pass of the model serves them all). Per step and SAE (Gao et al. 2024, sections 2 and A): the input
scaled by ``norm_scale`` (fixed from the first block: mean norm ``sqrt(d_in)``), ``b_dec`` initialised to that
block's mean, loss = MSE + ``aux_coef`` x AuxK on the latents not active in the last ``dead_tokens`` tokens, Adam,
the decoder gradient's component along each row removed before the step and the rows renormalised after it.

Layers are the 0-based blocks whose output the SAEs read (:mod:`bertcore.sae.io`); what is written names them by
:func:`bertcore.sae.io.label` (block + 1): folders ``layer-<l>/``, measures ``L<l>/...``, the states' keys.

A checkpoint ``checkpoints/step-N/`` holds one SAELens folder per layer (``layer-<l>/``, float32) and
``trainer_state.pt`` (step, stream position, optimizer states, each latent's last active token, training time
used): written into a dot-named temporary folder, then renamed, so a SIGKILL at any moment leaves the last
complete checkpoint, and ``resume`` recomputes exactly the batches that followed it (the stream is seeded per
block). At the end each SAE is written to ``sae/layer-<l>/`` with its held-out measures.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import torch

from ..device import resolve as resolve_device
from ..loading.shipped_file import model_hash
from ..runs import RunDir, RunWriter, now_iso
from ..runs.distributed import Dist, init_distributed
from . import io as sae_io
from . import distributed as ranks
from .config import SAETrainConfig
from . import transcoder
from .metrics import reconstruction
from .model import TopKSAE, aux_k_loss, mse, resample
from .start import check_layers, load_model, start_from
from .stream import ActivationStream, Position, corpus_chunks

STATE_FILE = "trainer_state.pt"
FINAL_DIR = "sae"


def _key(layer: int) -> str:
    """The key of block ``layer`` in what a run writes (measures, trainer state): its label, block + 1."""
    return str(sae_io.label(layer))


def lr_at(cfg: SAETrainConfig, step: int, used_s: float = 0.0) -> float:
    """Linear warmup, then constant; linear decay to 0 over the last ``cfg.decay`` share (default 20%) of the steps
    (``max_steps``) or, with only a time budget, of the minutes (``used_s``: seconds of training so far; the steps
    then depend on the machine)."""
    lr = cfg.lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
    if cfg.max_steps:
        start = int((1.0 - cfg.decay) * cfg.max_steps)
        if step >= start:
            lr *= max(0.0, (cfg.max_steps - step) / max(1, cfg.max_steps - start))
    elif cfg.max_time:
        left = 1.0 - used_s / (60 * cfg.max_time)
        lr *= min(1.0, max(0.0, left) / cfg.decay)
    return lr


class Trainer:
    """``Trainer(cfg, run_dir).run()`` trains (or resumes, if ``run_dir`` has a checkpoint) and returns the exit
    code (0 done, 143 stopped by SIGTERM with a checkpoint saved)."""

    def __init__(self, cfg: SAETrainConfig, run_dir: str | Path) -> None:
        problems = cfg.check()
        if problems:
            raise ValueError("; ".join(problems))
        self.cfg, self.rundir = cfg, RunDir(run_dir)
        self.writer: RunWriter | None = None  # made by _join: under torchrun only rank 0 writes
        self.stop_requested = False
        self.dist = Dist()

    def _join(self) -> None:
        """Under ``torchrun``: join the process group (rank 0 alone writes the run's files)."""
        self.dist = init_distributed(self.cfg.device)
        self.writer = RunWriter(self.rundir.path, enabled=self.dist.main)

    # -- setup
    def _setup(self) -> None:
        cfg = self.cfg
        torch.set_num_threads(max(1, cfg.threads))
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and self.dist.enabled:  # one GPU per rank (more ranks than GPUs share them)
            self.device = torch.device("cuda", self.dist.local_rank % torch.cuda.device_count())
        self.model, self.tokenizer, self.folder = load_model(cfg.model, self.device)
        cfg_model = self.model.config
        check_layers(cfg.layers, cfg_model.num_hidden_layers)
        world = self.dist.world_size
        self.shards = cfg.shards or world
        if self.shards % world:
            raise ValueError(f"--shards {self.shards} cannot be dealt evenly to {world} processes")
        per_rank = self.shards // world
        self.own = list(range(self.dist.rank * per_rank, (self.dist.rank + 1) * per_rank))  # this rank's shards
        self.chunks = corpus_chunks(cfg.corpus, self.tokenizer, cfg.seq_len)
        self.streams = [self._stream(shard) for shard in self.own]
        self.transcoders = cfg.kind == "transcoder"
        if self.transcoders and cfg.init_from:
            raise ValueError("--init-from starts SAEs only; a transcoder run starts from the data")
        self.heldout = corpus_chunks(cfg.heldout, self.tokenizer, cfg.seq_len, allow_held_out=True)

    def _stream(self, shard: int) -> ActivationStream:
        cfg = self.cfg
        return ActivationStream(self.model, self.tokenizer, self.chunks, cfg.layers, cfg.batch_size, cfg.block_size,
                                cfg.seed, cfg.mlm_probability, cfg.passes, kind=cfg.kind, shard=shard,
                                shards=self.shards,
                                autocast=None if cfg.autocast == "none" else getattr(torch, cfg.autocast))

    def _fresh(self) -> None:
        cfg = self.cfg
        # every rank starts from shard 0's first block: the same dictionaries everywhere
        first = (self.streams[0] if self.own[0] == 0 else self._stream(0)).block(0)
        self.saes: dict[int, TopKSAE] = {}
        for layer in cfg.layers:
            x = first[layer]
            if self.transcoders:
                self.saes[layer] = self._new_transcoder(layer, x)
                continue
            if cfg.init_from:
                sae = start_from(Path(cfg.init_from).expanduser(), layer, x.shape[1], cfg)
                if sae.d_sae < cfg.d_sae:
                    # a wider dictionary: the started SAE's latents, then new ones pointed where it errs most on
                    # the first block's tokens (Bricken et al.'s resampling)
                    narrow = sae.d_sae
                    sae = sae.widened(cfg.d_sae, seed=cfg.seed + sae_io.label(layer))
                    sae.to(self.device)
                    new = torch.arange(cfg.d_sae, device=self.device) >= narrow
                    with torch.no_grad():
                        out = sae(x[:cfg.batch_size])
                        resample(sae, new, out, generator=torch.Generator().manual_seed(cfg.seed + layer))
                self.saes[layer] = sae.to(self.device)
                continue
            c = math.sqrt(x.shape[1]) / float(x.norm(dim=1).mean())
            seed = cfg.seed + sae_io.label(layer)  # the label, as runs were seeded when layers counted from 1
            sae = TopKSAE(x.shape[1], cfg.d_sae, cfg.k, norm_scale=c, seed=seed).to(self.device)
            with torch.no_grad():
                sae.b_dec.copy_((x * c).mean(0))
                # decoder rows start as centred training vectors (distinct tokens of the first block, seeded), the
                # encoder as their transpose: each latent starts where data is, which speeds up a short CPU run
                # and keeps latents alive (Gao et al. 2024 start from random directions, section A.1)
                gen = torch.Generator().manual_seed(seed)
                n = x.shape[0] // max(1, cfg.passes)
                rows = x[torch.randperm(n, generator=gen, device="cpu")[:cfg.d_sae].to(x.device)] * c - sae.b_dec
                if rows.shape[0] == cfg.d_sae:
                    sae.W_dec.copy_(rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-6))
                    sae.W_enc.copy_(sae.W_dec.T / cfg.k)  # k latents add up: each gets 1/k of the norm
            self.saes[layer] = sae
        self._optimizers()
        self.step, self.tokens, self.elapsed = 0, 0, 0.0
        self.positions = [Position() for _ in self.own]
        self.last_fired = {layer: torch.zeros(cfg.d_sae, dtype=torch.long, device=self.device)
                           for layer in cfg.layers}
        self.resampled = {layer: 0 for layer in cfg.layers}

    def _new_transcoder(self, layer: int, pairs: torch.Tensor) -> transcoder.Transcoder:
        """A transcoder of block ``layer`` started from the first block's ``(N, d_in + d_out)`` pairs: each side's scale
        to mean norm ``sqrt(d)``, ``b_dec`` the mean output, decoder rows centred outputs of distinct tokens and
        encoder columns those tokens' inputs over ``k`` (as the SAEs start where the data is)."""
        cfg = self.cfg
        d_in = self.model.config.hidden_size
        x, y = pairs[:, :d_in], pairs[:, d_in:]
        c_in, c_out = (math.sqrt(v.shape[1]) / float(v.norm(dim=1).mean()) for v in (x, y))
        seed = cfg.seed + sae_io.label(layer)
        tc = transcoder.Transcoder(d_in, y.shape[1], cfg.d_sae, cfg.k, c_in, c_out, skip=cfg.skip, seed=seed)
        tc.to(pairs.device)
        with torch.no_grad():
            tc.b_dec.copy_((y * c_out).mean(0))
            picked = torch.randperm(x.shape[0] // max(1, cfg.passes), generator=torch.Generator().manual_seed(seed),
                                    device="cpu")
            picked = picked[:cfg.d_sae].to(pairs.device)
            if len(picked) == cfg.d_sae:
                rows, cols = y[picked] * c_out - tc.b_dec, x[picked] * c_in
                tc.W_dec.copy_(rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-6))
                tc.W_enc.copy_((cols / cols.norm(dim=1, keepdim=True).clamp_min(1e-6)).T / cfg.k)
        return tc

    def _save_one(self, module, folder: Path, layer: int, **kw) -> None:
        """Write one SAE or transcoder in SAELens's layout."""
        if self.transcoders:
            transcoder.save(module, folder, layer, pre_layer_norm=self.model.config.pre_layer_norm, **kw)
        else:
            sae_io.save(module, folder, layer, num_layers=self.model.config.num_hidden_layers, **kw)

    def _forward(self, layer: int, acts: torch.Tensor):
        """One training forward pass (through DDP under ``torchrun``): an SAE on the hidden states, a transcoder on
        its ``(input, output)`` pairs."""
        module, d_in = self.modules[layer], self.saes[layer].d_in
        if self.transcoders:
            if self.dist.enabled:
                return module(acts[:, :d_in], acts[:, d_in:], batch_topk=ranks.GlobalBatchTopK(self.dist))
            return module(acts[:, :d_in], acts[:, d_in:])
        return module(acts)

    def _optimizers(self) -> None:
        self.optimizers = {layer: torch.optim.Adam(sae.parameters(), lr=self.cfg.lr, betas=(0.9, 0.999),
                                                   eps=6.25e-10) for layer, sae in self.saes.items()}
        self.modules = {layer: ranks.wrap(sae, self.dist, self.device) for layer, sae in self.saes.items()}

    def _restore(self, folder: Path) -> None:
        state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
        self.saes = {}
        for layer in self.cfg.layers:
            sae, _ = (transcoder.load if self.transcoders else sae_io.load)(folder / sae_io.folder_name(layer))
            sae.train()
            self.saes[layer] = sae.to(self.device)
        self._optimizers()  # the saved moments load onto the SAEs' device (Optimizer.load_state_dict)
        for layer, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][_key(layer)])
        self.step, self.tokens, self.elapsed = state["step"], state["tokens"], state["elapsed"]
        saved = state.get("positions") or [state["position"]]  # one per shard (older checkpoints: one)
        if len(saved) != self.shards:
            raise ValueError(f"{folder} was written by a run of {len(saved)} shard(s): resume it with --shards "
                             f"{len(saved)} or as many torchrun processes")
        self.positions = [Position(*saved[shard]) for shard in self.own]
        self.last_fired = {layer: state["last_fired"][_key(layer)].to(self.device) for layer in self.cfg.layers}
        self.resampled = {layer: int(state.get("resampled", {}).get(_key(layer), 0)) for layer in self.cfg.layers}

    # -- checkpoints
    def _save(self, positions: list[list[int]]) -> Path:
        final = self.rundir.checkpoint_dir(self.step)
        if final.is_dir():
            return final
        tmp = self.rundir.temp_checkpoint_dir(self.step)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for layer, sae in self.saes.items():
            self._save_one(sae, tmp / sae_io.folder_name(layer), layer, model_name=self.folder.name)
        state = {"step": self.step, "tokens": self.tokens, "elapsed": self.elapsed,
                 "position": positions[0], "positions": positions,
                 "optimizers": {_key(layer): opt.state_dict() for layer, opt in self.optimizers.items()},
                 "last_fired": {_key(layer): t for layer, t in self.last_fired.items()},
                 "resampled": {_key(layer): n for layer, n in self.resampled.items()}}
        torch.save(state, tmp / STATE_FILE)
        os.replace(tmp, final)
        for old in checkpoints(self.rundir)[:-max(1, self.cfg.keep_checkpoints)]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    # -- one step
    def _train_step(self, batch: dict[int, torch.Tensor]) -> dict[str, Any]:
        cfg = self.cfg
        local = next(iter(batch.values())).shape[0]
        n = ranks.total(local, self.dist, self.device)  # the global batch's tokens
        # both losses are means over this rank's tokens; DDP averages the ranks' gradients: weighted so, they are
        # the gradient of the mean over the global batch (ranks' batches may differ by a few tokens)
        weight = local * self.dist.world_size / n
        lr = lr_at(cfg, self.step, self._used())
        record: dict[str, Any] = {"step": self.step + 1, "split": "train", "lr": lr, "tokens": self.tokens + n}
        for layer, sae in self.saes.items():
            opt = self.optimizers[layer]
            for group in opt.param_groups:
                group["lr"] = lr
            out = self._forward(layer, batch[layer])
            dead = (self.tokens - self.last_fired[layer]) >= cfg.dead_tokens
            main = mse(out.target, out.x_hat)
            aux = (transcoder.aux_k_loss if self.transcoders else aux_k_loss)(sae, out, dead, cfg.k_aux)
            loss = (main + cfg.aux_coef * aux) * weight if self.dist.enabled else main + cfg.aux_coef * aux
            opt.zero_grad(set_to_none=True)
            loss.backward()
            sae.remove_parallel_grad()
            opt.step()
            sae.normalise_decoder()
            with torch.no_grad():
                self.last_fired[layer][ranks.fired_anywhere(out, sae.d_sae, self.dist)] = self.tokens + n
                every = cfg.resample_every
                if every and (self.tokens + n) // every > self.tokens // every:
                    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + self.step * 31 + sae_io.label(layer))
                    self.resampled[layer] += resample(sae, dead, ranks.global_rows(out, self.dist), opt, gen)
                    self.last_fired[layer][dead] = self.tokens + n  # a new latent gets dead_tokens to find its use
                total = (out.target - out.target.mean(0)).pow(2).sum(-1).mean()
                name = f"L{_key(layer)}"
                record[f"{name}/fvu"] = float(main / total)
                record[f"{name}/l0"] = out.l0()
                record[f"{name}/dead"] = float(dead.float().mean())
                record[f"{name}/aux"] = float(aux)
                if every:
                    record[f"{name}/resampled"] = self.resampled[layer]  # so far in the run
        self.tokens += n
        self.step += 1
        return record

    def _evaluate(self) -> dict[str, Any]:
        for sae in self.saes.values():
            sae.eval()
        with torch.no_grad():
            rec = reconstruction(self.model, self.tokenizer, self.saes, self.heldout, self.cfg.eval_tokens)
        for sae in self.saes.values():
            sae.train()
        out: dict[str, Any] = {"step": self.step, "split": "val", "tokens": self.tokens}
        for layer, r in rec.items():
            name = f"L{_key(layer)}"
            out.update({f"{name}/fvu": r.fvu, f"{name}/l0": r.l0, f"{name}/dead": r.dead})
        return out

    # -- the loop
    def _used(self) -> float:
        """Seconds of training so far, earlier processes of the run included."""
        return self.elapsed + time.monotonic() - self._clock

    def _done(self) -> bool:
        """The step budget spent, the time budget spent or a stop asked for (under ``torchrun``: on any rank, so
        every rank stops after the same step)."""
        cfg = self.cfg
        if cfg.max_steps is not None and self.step >= cfg.max_steps:
            return True
        over = self.stop_requested or (cfg.max_time is not None and self._used() >= cfg.max_time * 60)
        return self.dist.any_flag(over, self.device)

    def run(self) -> int:
        cfg = self.cfg
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        threads = torch.get_num_threads()  # _setup sets the run's own; the caller's process gets its own back
        try:
            self._join()
            self.writer.set_status(state="running", started=now_iso(), error=None)
            self._setup()
            last = checkpoints(self.rundir)
            if last:
                self._restore(last[-1])
                self.writer.truncate_logs_after(self.step)
                self.writer.update_config(args=cfg.to_dict())  # a resume may change the budget
            else:
                self._fresh()
                self.writer.write_config({**(self.rundir.read_config() or {}), "task": "sae", "args": cfg.to_dict(),
                                          "model_folder": str(self.folder), "created": now_iso(),
                                          "chunks": len(self.chunks)})
            if self.dist.main:
                self.rundir.remove_litter()
            for sae in self.saes.values():
                sae.train()
            self._clock = time.monotonic()
            window = (self._clock, self.tokens)
            streams = [s.batches(p) for s, p in zip(self.streams, self.positions)]
            while not self._done():
                parts = [next(it) for it in streams]  # this rank's shards, side by side
                self.positions = [position for _, position in parts]
                batch = parts[0][0] if len(parts) == 1 else {
                    layer: torch.cat([b[layer] for b, _ in parts]) for layer in cfg.layers}
                record = self._train_step(batch)
                if self.step % cfg.log_every == 0:
                    now = time.monotonic()
                    record["tokens_per_s"] = (self.tokens - window[1]) / max(now - window[0], 1e-9)
                    window = (now, self.tokens)
                    self.writer.log_metrics(record)
                    self.writer.set_status(step=self.step, total_steps=cfg.max_steps, tokens=self.tokens,
                                           tokens_per_s=record["tokens_per_s"],
                                           elapsed_s=self._used())
                if cfg.eval_every and self.step % cfg.eval_every == 0 and self.dist.main:
                    self.writer.log_metrics(self._evaluate())
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self._snapshot()
            self._snapshot()
            self.stop_requested = self.dist.any_flag(self.stop_requested, self.device)
            if self.stop_requested:
                self.writer.set_status(state="cancelled", step=self.step)
                return 143
            if self.dist.main:
                self._finish()
            self.dist.barrier()
            self.writer.set_status(state="done", step=self.step, ended=now_iso())
            return 0
        except Exception as exc:
            if self.writer is not None:
                self.writer.set_status(state="failed", error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
            torch.set_num_threads(threads)
            if self.dist.enabled and torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()

    def _snapshot(self) -> None:
        now = time.monotonic()
        self.elapsed, self._clock = self.elapsed + now - self._clock, now
        positions = ranks.all_positions([[p.block, p.offset] for p in self.positions], self.dist)
        if self.dist.main:
            self._save(positions)
        self.dist.barrier()

    def _finish(self) -> None:
        final = self._evaluate()
        self.writer.log_metrics(final)
        for layer, sae in self.saes.items():
            sae.eval()
            metrics = {k.split("/", 1)[1]: v for k, v in final.items() if k.startswith(f"L{_key(layer)}/")}
            self._save_one(sae, self.rundir.path / FINAL_DIR / sae_io.folder_name(layer), layer,
                           model_name=self.folder.name,
                           metadata={"bert_explorer": {"layer": sae_io.label(layer), "steps": self.step,
                                                       "tokens": self.tokens, "model_hash": model_hash(self.folder),
                                                       "corpus": self.cfg.corpus, "run": self.rundir.name,
                                                       "init_from": self.cfg.init_from}},
                           metrics={"heldout_during_training": metrics, "eval_tokens": self.cfg.eval_tokens})

    def _on_sigterm(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.stop_requested = True


def checkpoints(run: RunDir) -> list[Path]:
    """Complete SAE checkpoints of a run, oldest first (a folder ``step-N`` with ``trainer_state.pt``)."""
    folder = run.checkpoints_dir
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.name.startswith("step-") and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def read_args(run_dir: str | Path) -> SAETrainConfig:
    """The options a run was started with (its ``run.json``).

    Raises:
        ValueError: not an SAE run directory.
    """
    config = RunDir(run_dir).read_config()
    if not config or config.get("task") != "sae":
        raise ValueError(f"{run_dir} is not an SAE run directory (no run.json with task 'sae')")
    return SAETrainConfig.from_dict(config["args"])


def final_saes(run_dir: str | Path) -> list[Path]:
    """The SAE folders a finished run wrote (``sae/layer-<l>/``)."""
    folder = Path(run_dir) / FINAL_DIR
    return sorted(p for p in folder.glob("layer-*") if (p / sae_io.CFG_FILE).is_file()) if folder.is_dir() else []


def dumps(record: dict) -> str:
    return json.dumps(record, sort_keys=True)
