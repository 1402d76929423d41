"""bertcore.analysis.representations.edits: the one-click edits of the what-if views (number, tense, not, the
model's own guesses), each returning the whole text with the rest untouched."""

from __future__ import annotations

import pytest

from bertcore.analysis.representations import edits
from bertcore.readouts.fill_mask import FillMaskError
from bertcore.modeling.heads import BertForMaskedLM
from bertcore.modeling.model import BertModel
from bertcore.loading.sources import packaged_model_dir
from bertcore.tokenization.tokenizer import TextError, load_tokenizer

from tests.conftest import tiny_bert


def by_label(text: str) -> dict[str, edits.Edit]:
    return {e.label: e for e in edits.grammatical_edits(text)}


def test_number_tense_and_not():
    found = by_label("The keys to the cabinet are on the table.")
    assert found["keys → key"].text == "The key to the cabinet are on the table."
    assert found["are → is"].text == "The keys to the cabinet is on the table."
    assert found["are → were"].kind == "tense"
    assert found["are → are not"].text == "The keys to the cabinet are not on the table."
    found = by_label("She baked a cake and stopped.")
    assert found["baked → bakes"].text == "She bakes a cake and stopped."
    assert found["baked → did not bake"].text == "She did not bake a cake and stopped."
    found = by_label("They were not happy.")
    assert found["were → are"].text == "They are not happy." and found["remove “not”"].text == "They were happy."
    assert by_label("He goes home.")["goes → went"].text == "He went home."
    assert by_label("Cats sleep all day.")["Cats → Cat"].text == "Cat sleep all day."  # capitals kept


def test_tense_rules():
    assert [edits.past_of(b) for b in ("bake", "try", "stop", "walk", "go")] == [
        "baked", "tried", "stopped", "walked", "went"]
    assert edits.present_of("go", plural=False) == "goes" and edits.present_of("go", plural=True) == "go"


def test_bad_text():
    with pytest.raises(TextError):
        edits.grammatical_edits("  ")
    assert edits.grammatical_edits("😀 مرحبا \u200b") == []


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(packaged_model_dir())


def test_model_edits_are_whole_words_in_place(tok):
    model = tiny_bert(BertForMaskedLM, 0, max_position_embeddings=64)
    text = "The keys, unbelievably, are here."
    assert [w for _, _, w in edits.words(tok, text)][:3] == ["The", "keys", ","]
    out = edits.model_edits(model, tok, text, 1, k=4)
    assert len(out) == 4 and all(e.kind == "model" for e in out)
    for e in out:
        new = e.text[4:-len(", unbelievably, are here.")]
        assert e.text.startswith("The ") and e.text.endswith(", unbelievably, are here.")
        assert new.isalpha() and not new.startswith("##") and new != "keys"
    with pytest.raises(TextError, match="no word 99"):
        edits.model_edits(model, tok, text, 99)
    with pytest.raises(FillMaskError):
        edits.model_edits(tiny_bert(BertModel, 0, max_position_embeddings=64), tok, text, 1)
    assert edits.model_edits(model, tok, "word " * 80, 75) == []  # beyond the model's 64 positions
