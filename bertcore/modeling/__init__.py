"""The model itself: BERT and the families built from its modules, one module per Hugging Face module.

    config.py         BertConfig (every family's options), the presets, ConfigError
    embeddings.py     word + position + token type embeddings (HF ``BertEmbeddings``), ELECTRA's projection
    rotary.py         rotary position embeddings (Su et al. 2021), ModernBERT's two bases
    attention.py      self-attention (HF ``BertSelfAttention``), head_mask, sliding windows, RoPE
    encoder.py        the layers: post-LN and pre-LN blocks, GELU and GeGLU feed-forward
    model.py          BertModel: embeddings, encoder, pooler; hidden_states and attentions
    heads.py          MLM, NSP and classification heads (``BertForPreTraining`` and the others)
    electra.py        ELECTRA's replaced-token-detection head
    families.py       RoBERTa, DistilBERT, ELECTRA, ModernBERT: configurations of these modules
    hf_format.py      each family's weight names in ``transformers``
    checkpoint.py     safetensors I/O, loading with a report of what matched
    interventions.py  per-call activation edits and recordings passed to one forward call

Nothing is imported here: ``bertcore.modeling.config`` is a foundation that torch-free code may import without
loading the model (``bertcore`` itself re-exports the model's main names).
"""
