"""One-click edits of a sentence for the what-if views (:mod:`.whatif`): each returns the whole edited text, the
rest of the text left exactly as typed.

- **Other number** of a noun or a present verb (and was / were): :func:`bertcore.data.inflection.other_noun` /
  ``other_verb`` (inflect, checked both ways), on the words spaCy tags NN / NNS / VBZ / VBP (``keys -> key``,
  ``are -> is``). A word inflect has no checked form for gets no edit.
- **Other tense**, present <-> past, of finite verbs (spaCy tags VBZ / VBP / VBD / MD) by a small rule: spaCy's
  rule lemmatizer gives the base form; a table of common irregular verbs, else the spelling rule (``bake ->
  baked``, ``try -> tried``, ``stop -> stopped``); a past verb gets the present of its subject's number
  (``She baked -> She bakes``, ``They were -> They are``). Irregular verbs missing from the table get the
  regular rule, so a rare one can come out wrong ("weaved"): the edit is a suggestion the user sees in box B.
- **not**: inserted after the first finite auxiliary (``are -> are not``), with do-support where there is none
  (``goes -> does not go``); removed where it is already there.
- **The model's guess**: the word replaced by the MLM head's top-k whole words at its position (the word masked
  as one ``[MASK]``), :func:`bertcore.readouts.fill_mask.mlm_logits_at`.

spaCy's pipeline is :func:`bertcore.tokenization.spacy_pipeline.parser` (its lemmatizer, loaded but disabled there,
is run
on the parsed document here). Never imports streamlit or plotly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...data.inflection import PLURAL, SINGULAR, other_noun, other_verb
from ...readouts.fill_mask import mlm_logits_at
from ...tokenization.spacy_pipeline import SyntaxUnavailable, parser
from ...tokenization.tokenizer import TextError, check_text, encode

KINDS = {"number": "Other number", "tense": "Other tense", "not": "not", "model": "The model's guess"}
MAX_EDITS = 12  # grammatical edits offered at once (a long text has many words)

# base form -> (past, 3rd person singular present) of common irregular verbs
IRREGULAR = {
    "have": ("had", "has"), "do": ("did", "does"), "go": ("went", "goes"), "say": ("said", "says"),
    "make": ("made", "makes"), "get": ("got", "gets"), "know": ("knew", "knows"), "take": ("took", "takes"),
    "see": ("saw", "sees"), "come": ("came", "comes"), "think": ("thought", "thinks"), "give": ("gave", "gives"),
    "find": ("found", "finds"), "tell": ("told", "tells"), "become": ("became", "becomes"),
    "leave": ("left", "leaves"), "feel": ("felt", "feels"), "bring": ("brought", "brings"),
    "begin": ("began", "begins"), "keep": ("kept", "keeps"), "hold": ("held", "holds"),
    "write": ("wrote", "writes"), "stand": ("stood", "stands"), "hear": ("heard", "hears"), "let": ("let", "lets"),
    "mean": ("meant", "means"), "set": ("set", "sets"), "meet": ("met", "meets"), "run": ("ran", "runs"),
    "pay": ("paid", "pays"), "sit": ("sat", "sits"), "speak": ("spoke", "speaks"), "lead": ("led", "leads"),
    "read": ("read", "reads"), "grow": ("grew", "grows"), "lose": ("lost", "loses"), "fall": ("fell", "falls"),
    "send": ("sent", "sends"), "build": ("built", "builds"), "understand": ("understood", "understands"),
    "draw": ("drew", "draws"), "break": ("broke", "breaks"), "spend": ("spent", "spends"), "cut": ("cut", "cuts"),
    "rise": ("rose", "rises"), "drive": ("drove", "drives"), "buy": ("bought", "buys"), "wear": ("wore", "wears"),
    "choose": ("chose", "chooses"), "win": ("won", "wins"), "eat": ("ate", "eats"), "put": ("put", "puts"),
    "sell": ("sold", "sells"), "teach": ("taught", "teaches"), "catch": ("caught", "catches"),
    "fly": ("flew", "flies"), "sleep": ("slept", "sleeps"), "sing": ("sang", "sings"), "swim": ("swam", "swims"),
    "drink": ("drank", "drinks"), "forget": ("forgot", "forgets"), "hit": ("hit", "hits"),
    "throw": ("threw", "throws"), "fight": ("fought", "fights"), "hide": ("hid", "hides"), "feed": ("fed", "feeds"),
    "shake": ("shook", "shakes"), "steal": ("stole", "steals"), "wake": ("woke", "wakes"),
}
MODALS = {"can": "could", "will": "would", "may": "might", "shall": "should"}
PLURAL_PRONOUNS = {"i", "you", "we", "they"}
NEGATIONS = {"not", "n't"}


@dataclass(frozen=True)
class Edit:
    """One edit: ``kind`` (a key of :data:`KINDS`), ``label`` (``"keys → key"``), ``text`` (the edited text)."""

    kind: str
    label: str
    text: str


def _cased(new: str, old: str) -> str:
    """``new`` with ``old``'s capitalisation (``Keys`` -> ``Key``, ``ARE`` -> ``IS``)."""
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + _cased(new, text[start:end]) + text[end:]


# ----------------------------------------------------------------------------- tense rules
def past_of(base: str) -> str:
    """The simple past of a verb's base form: the irregular table, else the spelling rule."""
    if base in IRREGULAR:
        return IRREGULAR[base][0]
    if base.endswith("e"):
        return base + "d"
    if len(base) > 1 and base.endswith("y") and base[-2] not in "aeiou":
        return base[:-1] + "ied"
    vowels = sum(c in "aeiou" for c in base)
    if len(base) <= 4 and vowels == 1 and base[-1] not in "aeiouwxy" and base[-2] in "aeiou":
        return base + base[-1] + "ed"  # stop -> stopped, plan -> planned
    return base + "ed"


def present_of(base: str, plural: bool) -> str | None:
    """The present of a verb's base form for a plural (the base) or singular subject (3rd person), or None
    where inflect has no checked singular."""
    if plural:
        return base
    if base in IRREGULAR:
        return IRREGULAR[base][1]
    return other_verb(base, PLURAL)


def _subject_plural(verb) -> bool:
    """Whether the subject of a spaCy verb token is plural (no subject found: singular)."""
    for head in (verb, verb.head):
        for child in head.children:
            if child.dep_ in ("nsubj", "nsubjpass", "expl"):
                if child.lower_ in PLURAL_PRONOUNS:
                    return True
                return child.tag_ in ("NNS", "NNPS") or any(c.dep_ == "conj" for c in child.children)
    return False


def _tense_edit(tok) -> str | None:
    """The other tense of one finite verb token, or None."""
    word = tok.lower_
    if tok.tag_ == "MD":
        back = {v: k for k, v in MODALS.items()}
        return MODALS.get(word) or back.get(word)
    if word in ("is", "am"):
        return "was"
    if word == "are":
        return "were"
    if word == "was":
        return "am" if any(c.lower_ == "i" for c in tok.children) else "is"
    if word == "were":
        return "are"
    base = tok.lemma_.lower()
    if not base.isalpha():
        return None
    if tok.tag_ in ("VBZ", "VBP"):
        return past_of(base)
    return present_of(base, _subject_plural(tok))  # VBD


# ----------------------------------------------------------------------------- spaCy-based edits
def _parse(text: str):
    nlp = parser()
    doc = nlp(text)
    if "lemmatizer" in nlp.component_names:
        doc = nlp.get_pipe("lemmatizer")(doc)
    return doc


def grammatical_edits(text: str) -> list[Edit]:
    """The number, tense and ``not`` edits of ``text`` (at most :data:`MAX_EDITS`, in text order per kind).

    Raises:
        bertcore.tokenization.tokenizer.TextError: empty or over-long text.
        bertcore.tokenization.spacy_pipeline.SyntaxUnavailable: spaCy or its English model is missing.
    """
    text = check_text(text)
    doc = _parse(text)
    number, tense = [], []
    for tok in doc:
        start, end = tok.idx, tok.idx + len(tok.text)
        other = None
        if not (tok.text.isascii() and tok.text.isalpha()):
            continue  # English words only (inflect answers anything with something)
        if tok.tag_ in ("NN", "NNS"):
            other = other_noun(tok.text, SINGULAR if tok.tag_ == "NN" else PLURAL)
        elif (tok.tag_ in ("VBZ", "VBP") and tok.lower_ != "am") or tok.lower_ in ("was", "were"):
            other = other_verb(tok.text, SINGULAR if tok.tag_ == "VBZ" or tok.lower_ == "was" else PLURAL)
        if other:
            number.append(Edit("number", f"{tok.text} → {_cased(other, tok.text)}", _replace(text, start, end, other)))
        if tok.tag_ in ("VBZ", "VBP", "VBD", "MD"):
            new = _tense_edit(tok)
            if new and new != tok.lower_:
                tense.append(Edit("tense", f"{tok.text} → {_cased(new, tok.text)}", _replace(text, start, end, new)))
    negation = _not_edit(doc, text)
    return (number + tense)[:MAX_EDITS - len(negation)] + negation


def _not_edit(doc, text: str) -> list[Edit]:
    """Insert ``not`` after the first finite auxiliary (or with do-support), or remove the first ``not``."""
    for tok in doc:
        if tok.lower_ in NEGATIONS and tok.i > 0:
            prev = doc[tok.i - 1]
            cut = text[:prev.idx + len(prev.text)] + text[tok.idx + len(tok.text):]
            return [Edit("not", f"remove “{tok.text}”", cut)]
    for tok in doc:
        if tok.pos_ == "AUX" and tok.tag_ in ("VBZ", "VBP", "VBD", "MD"):
            end = tok.idx + len(tok.text)
            return [Edit("not", f"{tok.text} → {tok.text} not", text[:end] + " not" + text[end:])]
    for tok in doc:
        if tok.pos_ == "VERB" and tok.tag_ in ("VBZ", "VBP", "VBD") and tok.lemma_.isalpha():
            do = {"VBZ": "does", "VBP": "do", "VBD": "did"}[tok.tag_]
            new = f"{do} not {tok.lemma_.lower()}"
            return [Edit("not", f"{tok.text} → {_cased(new, tok.text)}",
                         _replace(text, tok.idx, tok.idx + len(tok.text), new))]
    return []


def grammatical_edits_or_none(text: str) -> list[Edit] | None:
    """:func:`grammatical_edits`, or None without spaCy (a page then offers the model's guesses only)."""
    try:
        return grammatical_edits(text)
    except SyntaxUnavailable:
        return None


# ----------------------------------------------------------------------------- the model's own guesses
def words(tokenizer, text: str) -> list[tuple[int, int, str]]:
    """BERT's words of ``text`` (its pre-tokenizer: whitespace and punctuation) as ``(start, end, word)``
    character spans. Raises ``TextError`` for an empty text."""
    enc = encode(tokenizer, text)
    return [(enc.offsets[p[0]][0], enc.offsets[p[-1]][1], text[enc.offsets[p[0]][0]:enc.offsets[p[-1]][1]])
            for p in enc.words]


def model_edits(model: torch.nn.Module, tokenizer, text: str, word: int, k: int = 5,
                text_pair: str | None = None) -> list[Edit]:
    """Replace word number ``word`` of :func:`words` with each of the model's k most probable whole words there.

    The word (all its WordPieces) becomes one ``[MASK]``; the MLM head's distribution at it is read; WordPieces
    that continue a word (``##``), special tokens, non-alphabetic tokens and the word itself are skipped.

    Returns:
        up to k :class:`Edit` of kind ``"model"``, most probable first, labelled ``"keys → doors (31%)"``;
        empty where the word lies beyond the model's maximum length.
    Raises:
        bertcore.tokenization.tokenizer.TextError: empty text, or ``word`` not a word of it.
        bertcore.readouts.fill_mask.FillMaskError: the model has no MLM head.
    """
    spans = words(tokenizer, text)
    if not 0 <= word < len(spans):
        raise TextError(f"there is no word {word} in this text ({len(spans)} words)")
    start, end, old = spans[word]
    masked = text[:start] + tokenizer.mask_token + text[end:]
    base = model.base_model
    limit = min(int(base.config.max_sequence_length), int(tokenizer.model_max_length))
    enc = encode(tokenizer, masked, text_pair, max_length=limit)
    pos = [i for i, (tid, off, seq) in enumerate(zip(enc.input_ids, enc.offsets, enc.sequence_ids))
           if tid == tokenizer.mask_token_id and seq == 0 and off[0] == start]
    if not pos:
        return []
    t = enc.tensors(next(model.parameters()).device)
    logits = mlm_logits_at(model, t["input_ids"], pos, t["attention_mask"], t["token_type_ids"])[0]  # (V,)
    probs = logits.float().softmax(-1).cpu()
    special = set(tokenizer.all_special_ids)
    out = []
    for p, i in zip(*probs.topk(min(200, probs.numel()))):  # the first k whole words among the top 200
        w = tokenizer.convert_ids_to_tokens(int(i))
        if int(i) in special or w.startswith("##") or not w.isalpha() or w == old.lower():
            continue
        new = _cased(w, old)
        share = f"{float(p):.0%}" if float(p) >= 0.005 else "<1%"
        out.append(Edit("model", f"{old} → {new} ({share})", text[:start] + new + text[end:]))
        if len(out) == k:
            break
    return out
