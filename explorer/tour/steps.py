"""The guided tour's steps, as data: which page each step opens, the inputs it sets there, and the words around
the numbers (the numbers themselves are measured by :mod:`explorer.tour.facts`).

A step's ``state`` is the session state it sets on its page (widget keys, e.g. ``att_layer``); ``shared`` are the
keys of ``state`` the page itself keeps in the URL (:func:`explorer.server.share.shareable`), so a step's link carries
them; ``inputs`` are the keys its measurement reads (the student may edit them on the page: the text follows).
The page texts below repeat some pages' defaults on purpose: the tour must not change when a page's default does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    """One stop of the tour.

    Attributes:
        slug: names its measurement in :data:`explorer.tour.facts.FACTS` (and its screenshot).
        title: short heading ("One attention head").
        page: file stem under ``explorer/app_pages`` ("attention").
        what: two sentences on what this part of BERT does (static: no number in it).
        look: where on the page to look (may name ``{layer}``/``{head}``: filled from the step's focus).
        state: session state set when the step opens (the page's widget keys).
        shared: the keys of ``state`` the page keeps in its URL.
        inputs: the keys of ``state`` the measurement reads (what the student may edit).
    """

    slug: str
    title: str
    page: str
    what: str
    look: str
    state: dict = field(default_factory=dict)
    shared: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()


TOKENS_TEXT = "Unbelievably, the Café's naïve chatbot tokenized hyperparameterization!"
EMB_A, EMB_B = "The bank raised interest rates.", "We sat on the river bank."
ATT_A, ATT_B = "The animal didn't cross the street because it was too tired.", "It lay down on the pavement and slept."
FILL_TEXT = "The capital of France is [MASK]."
MASK_TEXT = "The film won the award for best actor at the ceremony in London on Sunday night."
NSP_A = "The company said its profits rose by 20% last year."
NSP_NEXT = "Its shares rose 5% in early trading after the results were announced."
NSP_RANDOM = "The striker scored twice in the second half to win the match."
SENSE_PRESET = "bank: river vs money"  # an option of the Word senses page's "Example" box
SENSE_TARGET = "bank"
SENSE_SENTENCES = """river | We had a picnic on the bank of the river.
river | The boat drifted toward the muddy bank.
river | Fishermen lined the bank at dawn.
money | She deposited the check at the bank.
money | The bank raised its interest rates.
money | He asked the bank for a loan."""
SYNTAX_TEXT = "The old man gave the young girl a red apple from the tree in the garden."
PATCH_CLEAN = "The keys to the cabinet [MASK] on the table."
PATCH_CORRUPT = "The key to the cabinet [MASK] on the table."
PATCH_GOOD, PATCH_BAD = "are", "is"
TRAIN_RECIPE = "phase-change"

_TEXT = ("_text", "_pair_on", "_text_b")  # the keys explorer.widgets.text_or_pair keeps in the URL


def _text_keys(prefix: str) -> tuple[str, ...]:
    return tuple(prefix + suffix for suffix in _TEXT)


def _attention(tab: str, text: str = ATT_A, pair: bool = False, **extra) -> dict:
    """The Attention page's inputs: ``text`` (and sentence B when ``pair``), the open tab, toggles off unless
    ``extra`` sets them."""
    return {"att_text": text, "att_pair_on": pair, "att_text_b": ATT_B, "att_hide": False, "att_words": False,
            "att_pos": False, "att_tab": tab, **extra}


_ATT_SHARED = _text_keys("att") + ("att_layer", "att_head", "att_hide", "att_words", "att_pos")

STEPS: tuple[Step, ...] = (
    Step("tokens", "WordPiece tokens", "tokenization",
         "BERT never reads letters or whole words: its tokenizer cuts the text into **WordPiece** tokens of a fixed "
         "vocabulary, and a piece that continues a word starts with `##`. `[CLS]` opens every input and `[SEP]` "
         "closes each sentence.",
         "the grid of tokens: one cell per token, its id below; the pieces of one word share a colour.",
         {"tok_text": TOKENS_TEXT, "tok_pair_on": False}, _text_keys("tok"), _text_keys("tok")),
    Step("embeddings", "Token + position + segment embeddings", "embeddings",
         "Each token becomes one vector: the sum of three learned vectors, its **token** embedding (looked up by "
         "its id), its **position** embedding and its **segment** embedding (sentence A or B). **LayerNorm** then "
         "rescales the sum.",
         "*One token, step by step* at the bottom of the page: the strips of the selected token.",
         {"emb_text": EMB_A, "emb_pair_on": True, "emb_text_b": EMB_B}, _text_keys("emb"), _text_keys("emb")),
    Step("positions", "Where a token is: position vectors", "positions",
         "Attention by itself ignores word order, so BERT learns one vector per position and adds it to the token's. "
         "The original Transformer used fixed sinusoids instead; both are drawn side by side.",
         "the *Cosine similarity* tab: the bright band along the diagonal is neighbouring positions looking alike.",
         {"pos_start": 0, "pos_end": 127}),
    Step("query_key", "One attention head: queries, keys, softmax", "attention",
         "In a head, every token sends a **query** q and offers a **key** k; the score q·k/√d says how well they "
         "match, and **softmax** turns one query's scores into weights that sum to 1.",
         "the *Neuron view* tab (layer {layer}, head {head}): q, every k, and the score and softmax rows at the "
         "bottom.",
         _attention("Neuron view"), _ATT_SHARED, _text_keys("att")),
    Step("one_head", "One head's pattern: the weighted sum", "attention",
         "The head's output for a token is the **weighted sum** of every token's value vector v, with those "
         "weights. One row of the heatmap is one token's weights: where it gathers information from. A weight is not "
         "what arrives, though: what arrives is the weight × the size of the value vector ([Kobayashi et al. 2020]"
         "(https://arxiv.org/abs/2004.10102); the *What flows* tab).",
         "the *One head* heatmap of layer {layer}, head {head}: the bright line just below the diagonal.",
         _attention("One head"), _ATT_SHARED, _text_keys("att")),
    Step("layer_heads", "All heads of a layer", "attention",
         "A layer runs several heads side by side, each with its own Q, K and V weights; their outputs are "
         "concatenated and projected back to the hidden size. Heads specialise.",
         "*All heads of a layer* (layer {layer}): vertical stripes are heads that park their attention on [CLS] or "
         "[SEP] when they have nothing better to do.",
         _attention("All heads of a layer", pair=True), _ATT_SHARED, _text_keys("att")),
    Step("all_layers", "All layers and heads", "attention",
         "BERT stacks its layers: each reads the previous layer's output, so higher layers mix vectors that are "
         "already mixed. Kovaleva et al. (2019) sorted the patterns heads draw into five types.",
         "*All layers × heads*: every head as a thumbnail, one row per layer.",
         _attention("All layers × heads", pair=True), _ATT_SHARED, _text_keys("att")),
    Step("feed_forward", "The feed-forward block and the residual stream", "anatomy",
         "After attention, every token goes alone through a two-layer **feed-forward** network (hidden size → "
         "intermediate size → hidden size, with GELU). Each of the two blocks adds its output to its input (the "
         "**residual** connection) and applies LayerNorm.",
         "the parameter table of *encoder layer 0*: the feed-forward in and out rows beside the attention rows.",
         {"ana_group": "encoder layer 0"}),
    Step("fill_mask", "The MLM head fills in [MASK]", "masking",
         "The **MLM head** turns the last layer's vector at a `[MASK]` into a probability for every word of the "
         "vocabulary (dense, GELU, LayerNorm, then the token-embedding matrix again).",
         "*What the model predicts*: the bars of the typed [MASK].",
         {"msk_text": FILL_TEXT, "msk_pair_on": False, "msk_rate": 0.0},
         _text_keys("msk") + ("msk_rate",), _text_keys("msk")),
    Step("masking", "How pretraining hides words", "masking",
         "Pretraining **selects 15%** of the ordinary tokens; of those, 80% become `[MASK]`, 10% a random token and "
         "10% stay unchanged, so the model cannot count on seeing `[MASK]` and must model every token.",
         "the coloured grid *What the model is fed* and the counts against the recipe below it.",
         {"msk_text": MASK_TEXT, "msk_pair_on": False, "msk_rate": 0.15, "msk_split": (0.8, 0.9),
          "msk_wwm": False, "msk_seed": 0},
         _text_keys("msk") + ("msk_rate", "msk_wwm", "msk_seed"),
         _text_keys("msk") + ("msk_rate", "msk_split", "msk_wwm", "msk_seed")),
    Step("next_sentence", "Next-sentence prediction", "next_sentence",
         "BERT's second task: does sentence B really follow sentence A? The answer is read from the last layer's "
         "`[CLS]` vector alone (the pooler, then a 2-way classifier), so `[CLS]` must gather both sentences.",
         "the *P(IsNext)* number, and *Where [CLS] looks* in each layer.",
         {"nsp_a": NSP_A, "nsp_b": NSP_NEXT}, ("nsp_a", "nsp_b"), ("nsp_a", "nsp_b")),
    Step("word_senses", "One word, many vectors: word senses", "word_senses",
         "A static embedding gives *bank* one vector; BERT gives it a new one in every sentence, built from its "
         "context. Cosine similarity shows whether the model separates the meanings, and from which layer.",
         "the similarity matrix at layer {layer}, and the lines by layer under it.",
         {"ws_preset": SENSE_PRESET, "ws_target": SENSE_TARGET, "ws_sentences": SENSE_SENTENCES},
         (), ("ws_target", "ws_sentences")),
    Step("syntax", "What the layers know: syntax heads", "attention",
         "Some heads follow grammar nobody taught them: Clark et al. (2019) found heads in which a word attends to "
         "its syntactic head. Here a parser (spaCy) labels the words, and the head that links them best is chosen.",
         "*One head*, layer {layer} head {head}, with words merged and parts of speech on the labels: the rows of "
         "the determiners (DET) light up on their nouns.",
         _attention("One head", SYNTAX_TEXT, att_words=True, att_pos=True, att_hide=True),
         _ATT_SHARED, _text_keys("att")),
    Step("logit_lens", "What the layers know: the logit lens", "masking",
         "What would the model answer if it stopped after layer k? The **logit lens** decodes every layer's vector "
         "with the MLM head: it shows when the final answer becomes readable.",
         "*Layer by layer: the logit lens*, lower on the page: the column of the [MASK].",
         {"msk_text": FILL_TEXT, "msk_pair_on": False, "msk_rate": 0.0, "msk_tuned": False},
         _text_keys("msk") + ("msk_rate", "msk_tuned"), _text_keys("msk")),
    Step("patching", "Why the model answered: activation patching", "patching",
         "Attention shows where the model looks; **patching** shows what causes the answer. Run a corrupted input "
         "(*key*) with one activation copied from the clean run (*keys*), and measure how much of the clean "
         "answer comes back (1 = all of it).",
         "the *Residual stream* heatmap: where the restoring positions sit, layer by layer.",
         {"pat_clean": PATCH_CLEAN, "pat_corrupt": PATCH_CORRUPT, "pat_good": PATCH_GOOD, "pat_bad": PATCH_BAD},
         ("pat_clean", "pat_corrupt", "pat_good", "pat_bad"), ("pat_clean", "pat_corrupt", "pat_good", "pat_bad")),
    Step("train", "Watch a model learn", "train",
         "Everything above was learned from text. The *phase-change* recipe trains a tiny BERT from random weights "
         "on a generated language, on this machine, in about two minutes.",
         "the selected recipe *Watch a phase change*: press **Launch** and watch the held-out loss fall to the "
         "dashed unigram line, wait there, then drop below it.",
         {"train_task": "pretrain", "train_recipe": TRAIN_RECIPE}),
    Step("quiz", "Quiz: test yourself on this model", "tour",
         "Each answer below is measured on the model in the sidebar, right now: another model can give other "
         "answers.",
         "the questions under *Quiz*: pick an answer and press *Check*."),
)


def step_number(value) -> int | None:
    """A 1-based step number from a URL or session value, or None when it is not one (junk, out of range)."""
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return n if 1 <= n <= len(STEPS) else None
