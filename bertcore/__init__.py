"""bertcore: a from-scratch, readable PyTorch BERT that is numerically Hugging Face's.

Never imports streamlit or plotly (the UI lives in ``explorer``).
"""

from .modeling.config import PRESETS, BertConfig, ConfigError, preset
from .modeling.embeddings import InputError
from .modeling.heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from .modeling.model import BertModel, BertModelOutput
from .modeling.checkpoint import CheckpointError, LoadReport
from .tokenizer import Encoding, TextError, TokenizerError, encode, load_tokenizer

__all__ = [
    "PRESETS", "BertConfig", "ConfigError", "preset", "InputError", "BertModel", "BertModelOutput",
    "BertForMaskedLM", "BertForPreTraining", "BertForSequenceClassification", "CheckpointError",
    "LoadReport", "Encoding", "TextError", "TokenizerError", "encode", "load_tokenizer",
]
