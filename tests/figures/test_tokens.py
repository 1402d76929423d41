"""explorer.figures.tokens: the token grid groups word pieces, marks special tokens, escapes markup."""

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import tokens as ft


def test_token_grid_groups_pieces_and_marks_specials():
    tokens = ["[CLS]", "un", "##bel", "##ievable", "cat", "[SEP]", "dog", "[SEP]"]
    ids = list(range(100, 108))
    word_ids = [None, 0, 0, 0, 1, None, 2, None]
    special = [1, 0, 0, 0, 0, 1, 0, 1]
    types = [0, 0, 0, 0, 0, 0, 1, 1]
    codes = ft.token_codes(word_ids, special, types)
    assert codes[0] == codes[5] == codes[7] == ft.SPECIAL
    assert codes[1] == codes[2] == codes[3] != codes[4]  # one word, one colour; the next word differs
    assert codes[6] in (ft.B_EVEN, ft.B_ODD)
    fig = ft.token_grid(tokens, ids, word_ids, special, types, per_row=3)
    heat = fig.data[0]
    assert isinstance(fig, go.Figure) and np.asarray(heat.z).shape == (3, 3)
    assert "107" in heat.text[2][1] and "[SEP]" in heat.text[2][1]
    assert "segment 1" in heat.customdata[2][0] and "attention mask 1" in heat.customdata[2][0]


def test_token_grid_escapes_markup_in_tokens():
    fig = ft.token_grid(["[CLS]", "<b>", "[SEP]"], [1, 2, 3], [None, 0, None], [1, 0, 1], [0, 0, 0])
    assert "&lt;b&gt;" in fig.data[0].text[0][1] and "<b>" not in fig.data[0].text[0][1]


@pytest.mark.parametrize("kwargs, message", [
    ({"input_ids": [1, 2]}, "input_ids has 2 entries"),
    ({"word_ids": [None]}, "word_ids has 1 entries"),
    ({"per_row": 0}, "per_row"),
])
def test_token_grid_validates(kwargs, message):
    args = {"tokens": ["[CLS]", "a", "[SEP]"], "input_ids": [1, 2, 3], "word_ids": [None, 0, None],
            "special_mask": [1, 0, 1], "token_type_ids": [0, 0, 0]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ft.token_grid(**args)
    with pytest.raises(ValueError, match="no tokens"):
        ft.token_grid([], [], [], [], [])
