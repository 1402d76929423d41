"""bertcore: a from-scratch, readable PyTorch BERT that is numerically Hugging Face's.

Never imports streamlit or plotly (the UI lives in ``explorer``).
"""

from .config import PRESETS, BertConfig, ConfigError, preset
from .embeddings import InputError
from .heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from .model import BertModel, BertModelOutput
from .checkpoint import CheckpointError, LoadReport
from .tokenizer import Encoding, TextError, TokenizerError, encode, load_tokenizer

__all__ = [
    "PRESETS", "BertConfig", "ConfigError", "preset", "InputError", "BertModel", "BertModelOutput",
    "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification", "CheckpointError",
    "LoadReport", "Encoding", "TextError", "TokenizerError", "encode", "load_tokenizer",
]
