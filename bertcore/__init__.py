"""bertcore: a from-scratch, readable PyTorch BERT that is numerically Hugging Face's, with the interpretability
methods of the field on top. What a notebook needs is named here (``docs/library.md`` lists it with shapes)::

    import bertcore
    lm = bertcore.load()                                   # the packaged all-MiniLM-L6-v2 encoder (offline)
    enc = bertcore.encode(lm.tokenizer, "The keys to the cabinet [MASK] on the table.")
    iv = bertcore.Interventions(record=["blocks.3.attn.hook_pattern", "blocks.3.hook_mlp_out"])
    out = lm.model(**enc.tensors(), interventions=iv)      # iv.recorded[...]: (1, 12, 12, 12), (1, 12, 384)
    logits, cache = bertcore.run_with_cache(lm, "The keys [MASK] here.")   # TransformerLens's workflow and names
    from bertcore.analysis.causal import patching          # the analysis subpackages, one per question

Blocks and heads are numbered from 0 (HF's ``encoder.layer[i]``, TransformerLens's ``blocks.i``). Never imports
streamlit or plotly (the UI lives in ``explorer``).
"""

from importlib import import_module

#: every name is loaded on first use (``bertcore.load``, ``bertcore.encode``...): ``import bertcore`` imports no
#: torch, so ``bertcore.settings`` is read before any model
LAZY = {
    **{name: ("modeling.config", name) for name in ("PRESETS", "BertConfig", "ConfigError", "preset")},
    "InputError": ("modeling.embeddings", "InputError"),
    **{name: ("modeling.heads", name) for name in ("BertForMaskedLM", "BertForPreTraining",
                                                    "BertForSequenceClassification")},
    **{name: ("modeling.hooked", name) for name in ("ActivationCache", "HookPoint", "run_with_cache",
                                                     "run_with_hooks")},
    **{name: ("modeling.interventions", name) for name in ("Interventions", "act_name", "block_output_site",
                                                            "hidden_state_site", "site_names")},
    **{name: ("modeling.model", name) for name in ("BertModel", "BertModelOutput")},
    **{name: ("modeling.checkpoint", name) for name in ("CheckpointError", "LoadReport")},
    **{name: ("tokenization.tokenizer", name) for name in ("Encoding", "TextError", "TokenizerError", "encode",
                                                            "load_tokenizer")},
    "load": ("loading.sources", "load"), "ModelSource": ("loading.sources", "ModelSource"),
    "LoadedModel": ("loading.sources", "LoadedModel"), "SourceError": ("loading.sources", "SourceError"),
    "analysis": ("analysis", None), "sae": ("sae", None), "sources": ("loading.sources", None),
}

__all__ = list(LAZY)


def __getattr__(name: str):
    if name not in LAZY:
        raise AttributeError(f"module 'bertcore' has no attribute {name!r}")
    module, attr = LAZY[name]
    value = import_module(f".{module}", __name__)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value  # found directly from now on
    return value
