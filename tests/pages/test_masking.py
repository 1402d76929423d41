"""AppTest of the Masking page: the draw equals bertcore.tokenization.masking's for the seed, rates and splits at their
bounds, whole-word masking, predictions equal bertcore.readouts.fill_mask's, models without an MLM head get a message
and a one-click switch to the packaged MiniLM-MLM; bad text gives a message, never a traceback."""

from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertcore.readouts import fill_mask
from bertcore.tokenization import masking
from bertcore.loading import sources
from bertcore.loading.sources import load
from bertcore.tokenization.tokenizer import encode

from .conftest import PAGES as ROOT_PAGES
from .conftest import assert_bad_texts_handled, assert_clean, dataframes, messages, page


def selected_table(at: AppTest):
    for df in dataframes(at):
        if "decision" in df.columns:
            return df
    return None


def test_bad_text_gets_a_message():
    msgs = assert_bad_texts_handled(page("masking"), "msk_text", own=("no_maskable_token",))
    assert any("no token that can be masked" in i for i in msgs["no_maskable_token"]["info"])


def test_masking_rate_zero_and_one():
    at = page("masking", msk_rate=0.0)
    assert_clean(at)
    assert any("rate is 0" in i for i in messages(at)["info"])
    assert at.metric[0].value.startswith("0 of ")
    at.slider(key="msk_rate").set_value(1.0).run()
    assert_clean(at)
    sel, _, elig = at.metric[0].value.partition(" of ")
    assert sel == elig and int(sel) > 0
    assert len(selected_table(at)) == int(sel)


def test_masking_split_all_mask_and_all_random():
    at = page("masking", msk_rate=1.0, msk_split=(1.0, 1.0))
    assert_clean(at)
    table = selected_table(at)
    assert set(table["decision"]) == {"[MASK]"} and set(table["model sees"]) == {"[MASK]"}
    at.slider(key="msk_split").set_value((0.0, 1.0)).run()
    table = selected_table(at)
    assert set(table["decision"]) == {"random token"}


def test_masking_matches_bertcore_for_the_seed_and_resample_changes_the_draw(packaged):
    at = page("masking", msk_rate=0.5)
    assert_clean(at)
    before = selected_table(at)
    tok = packaged.tokenizer
    enc = encode(tok, at.text_area(key="msk_text").value)
    t = enc.tensors()
    r = masking.mask_for_tokenizer(tok, t["input_ids"], t["attention_mask"], mlm_probability=0.5,
                                   generator=torch.Generator().manual_seed(0))
    assert list(before["position"]) == torch.nonzero(r.decision[0]).reshape(-1).tolist()
    at.button(key="msk_resample").click().run()
    assert at.number_input(key="msk_seed").value == 1
    after = selected_table(at)
    assert list(before["position"]) != list(after["position"]) or list(before["decision"]) != list(after["decision"])


def test_masking_whole_word_option_runs(packaged):
    at = page("masking", msk_wwm=True, msk_rate=0.5)
    at.text_area(key="msk_text").input("Unbelievably tokenization embeddings").run()
    assert_clean(at)
    table = selected_table(at)
    enc = encode(packaged.tokenizer, "Unbelievably tokenization embeddings")
    assert table is not None, "seed 0 at rate 0.5 selects some of the 3 words"
    chosen = {enc.word_ids[p] for p in table["position"]}
    expected = [p for p, w in enumerate(enc.word_ids) if w in chosen]
    assert sorted(table["position"]) == expected
    assert any(len([p for p, w in enumerate(enc.word_ids) if w == c]) > 1 for c in chosen), "a multi-piece word"


def test_masking_any_whole_number_is_a_seed():
    at = page("masking", msk_seed=-7)
    assert_clean(at)
    at.number_input(key="msk_seed").set_value(10**12).run()
    assert_clean(at)
    assert not messages(at)["error"] and not messages(at)["warning"]


def test_masking_without_mlm_head_says_so():
    at = page("masking", sources.PACKAGED)
    info = " ".join(messages(at)["info"])
    assert "no MLM head" in info and "Train page" in info and "MiniLM-MLM" in info
    assert at.button(key="msk_switch").label.startswith("Use the packaged MiniLM-MLM")


def test_masking_predictions_with_an_mlm_model(mlm_source):
    at = page("masking", source=mlm_source, msk_rate=0.3)
    at.text_area(key="msk_text").input("The cat sat on the [MASK] near the warm fire place.").run()
    assert_clean(at)
    preds = [df for df in dataframes(at) if "top guess" in df.columns]
    assert len(preds) == 1
    table = preds[0]
    assert "(your [MASK])" in set(table["original"])
    assert table["probability"].between(0, 1).all()
    # the page shows what bertcore.readouts.fill_mask computes for the same draw
    loaded = load(mlm_source)
    tok = loaded.tokenizer
    enc = encode(tok, "The cat sat on the [MASK] near the warm fire place.")
    t = enc.tensors()
    r = masking.mask_for_tokenizer(tok, t["input_ids"], t["attention_mask"], mlm_probability=0.3,
                                   generator=torch.Generator().manual_seed(0))
    positions = sorted(set(torch.nonzero(r.decision[0]).reshape(-1).tolist()) |
                       set(fill_mask.mask_token_positions(tok, t["input_ids"])))
    expected = fill_mask.predict(loaded.model, tok, r.input_ids, positions, labels=r.labels,
                                 attention_mask=t["attention_mask"], token_type_ids=t["token_type_ids"])
    assert list(table["position"]) == positions
    assert list(table["top guess"]) == [p.tokens[0] for p in expected]
    assert list(table["recovered"]) == [p.recovered for p in expected]
    assert any(m.label.startswith("Original token recovered") for m in at.metric)


def test_masking_mlm_model_with_nothing_to_predict(mlm_source):
    at = page("masking", source=mlm_source, msk_rate=0.0)
    assert_clean(at)
    assert any("Nothing to predict" in i for i in messages(at)["info"])


def test_switches_to_the_packaged_mlm_in_one_click():
    at = page("masking", sources.PACKAGED)
    assert not at.exception
    at.button(key="msk_switch").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["model_source"] == sources.PACKAGED_MLM
    tables = [t.value for t in at.dataframe if "top guess" in t.value.columns]
    assert tables and len(tables[0]) > 0
    # what a new user sees with every default: the model gets the hidden words of the default sentence
    assert tables[0]["recovered"].sum() >= 2, tables[0][["original", "top guess"]]


LENS_TAB = "Layer by layer: the logit lens"


def test_the_logit_lens_decodes_every_layer_and_ends_at_the_prediction():
    """Default model (MiniLM-MLM, no click): the lens grid's last row is the model's own top-1 at every fed
    position, and its line chart ends at the top guess's probability at the typed [MASK]."""
    from bertcore.analysis.representations.logit_lens import logit_lens

    from .conftest import array, chart_specs

    text = "The keys to the cabinet [MASK] on the table."
    at = page("masking", msk_text=text, msk_rate=0.0, msk_panel=LENS_TAB)
    assert_clean(at)
    specs = chart_specs(at)
    grid = next(s for s in specs if "Logit lens" in str(s["layout"].get("title", "")))
    lm = load(sources.PACKAGED_MLM)
    enc = lm.tokenizer(text.replace("[MASK]", lm.tokenizer.mask_token), return_tensors="pt")
    lens = logit_lens(lm.model, enc["input_ids"])
    heat = grid["data"][0]
    assert len(heat["y"]) == lm.config.num_hidden_layers + 1 and heat["y"][0] == "embeddings"
    top_last = lm.tokenizer.convert_ids_to_tokens(lens.final_ids.tolist())
    from explorer.figures.tokens import _plain

    assert [str(w) for w in heat["text"][-1]] == [f"<b>{_plain(w)}</b>" for w in top_last]  # all final: bold
    lines = next(s for s in specs if "final guess" in str(s["layout"].get("title", "")))
    pos = int((enc["input_ids"][0] == lm.tokenizer.mask_token_id).nonzero())
    assert abs(array(lines["data"][0]["y"])[-1] - float(lens.final_prob[-1, pos])) < 1e-5


def test_a_long_input_shows_the_predicted_positions_in_the_lens_grid():
    """Over 32 tokens the grid's columns are the positions the model predicts (readable cells), each labelled by
    its position; the toggle brings every position back."""
    from .conftest import chart_specs

    text = " ".join(["The keys to the cabinet [MASK] on the table."] * 6)  # 62 tokens with 6 typed [MASK]
    at = page("masking", msk_text=text, msk_rate=0.0, msk_panel=LENS_TAB)
    assert_clean(at)
    predicted = [int(p) for p in next(df for df in dataframes(at) if "position" in df.columns)["position"]]

    def columns():
        grid = next(s for s in chart_specs(at) if "Logit lens" in str(s["layout"].get("title", "")))
        return [int(str(c).split(":")[0]) for c in grid["data"][0]["x"]]

    assert columns() == predicted and len(predicted) == 6
    at.toggle(key="msk_lens_all").set_value(True).run()
    assert_clean(at)
    assert columns() == list(range(62))


def test_first_visit_shows_predictions_with_no_click():
    """A fresh session opened as a user opens the app: the default model fills [MASK] on the Masking page, and
    the panels below the fold (the explanations, the logit lens) wait for their tab: nothing of theirs is drawn."""
    from .conftest import chart_specs, open_page

    at = open_page("masking")
    assert_clean(at)
    assert not any("no MLM head" in i for i in messages(at)["info"])
    assert "msk_switch" not in [b.key for b in at.button]
    titles = [str(s["layout"].get("title", "")) for s in chart_specs(at)]
    assert not any("Logit lens" in t or "DecompX" in t for t in titles)
    assert at.session_state["msk_panel"] == "About these panels"
    assert any(df.columns.tolist()[:3] == ["position", "original", "model sees"] for df in dataframes(at))


def test_the_tuned_lens_is_read_from_disk_and_drawn(monkeypatch, tmp_path):
    """A lens fitted for the model (here a short fit, saved where the page looks) is used when the toggle is
    on: the grid's title says so, its last row is still the model's prediction, and the KL chart appears."""
    from bertcore.analysis.representations import logit_lens as LL
    from explorer import resources

    from .conftest import chart_specs

    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    lm = load(sources.PACKAGED_MLM)
    text = "The keys to the cabinet [MASK] on the table."
    enc = lm.tokenizer([text.replace("[MASK]", lm.tokenizer.mask_token), "Bees make honey from nectar."],
                       return_tensors="pt", padding=True)
    encodings = [{k: v[i:i + 1] for k, v in enc.items()} for i in range(2)]
    lens = LL.train_tuned_lens(lm.model, encodings, steps=3, positions_per_step=16)
    LL.save_tuned_lens(lens, LL.tuned_lens_path(repr(resources.source_key(sources.PACKAGED_MLM))))
    at = page("masking", msk_text=text, msk_rate=0.0, msk_tuned=True, msk_panel=LENS_TAB)
    assert_clean(at)
    specs = chart_specs(at)
    titles = [str(s["layout"].get("title", "")) for s in specs]
    assert any("Tuned lens" in t for t in titles) and any("KL(final" in str(s["layout"]) for s in specs)
    grid = next(s for s in specs if "Tuned lens" in str(s["layout"].get("title", "")))
    final = LL.logit_lens(lm.model, encodings[0]["input_ids"][:, :int(encodings[0]["attention_mask"].sum())])
    from explorer.figures.tokens import _plain

    assert [str(w) for w in grid["data"][0]["text"][-1]] == [
        f"<b>{_plain(w)}</b>" for w in lm.tokenizer.convert_ids_to_tokens(final.final_ids.tolist())]


def test_a_rewritten_tuned_lens_file_is_used(monkeypatch, tmp_path):
    """The lens drawing is cached per tuned-lens file version: replacing the file (here by an untrained lens,
    which is the plain logit lens) changes the grid to the new lens's decoding."""
    from bertcore.analysis.representations import logit_lens as LL
    from explorer import resources
    from explorer.figures.tokens import _plain

    from .conftest import chart_specs

    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path))
    lm = load(sources.PACKAGED_MLM)
    text = "The keys to the cabinet [MASK] on the table."
    enc = lm.tokenizer(text.replace("[MASK]", lm.tokenizer.mask_token), return_tensors="pt")
    path = LL.tuned_lens_path(repr(resources.source_key(sources.PACKAGED_MLM)))
    LL.save_tuned_lens(LL.train_tuned_lens(lm.model, [dict(enc)], steps=20, positions_per_step=16, lr=1e-2), path)
    at = page("masking", msk_text=text, msk_rate=0.0, msk_tuned=True, msk_panel=LENS_TAB)
    first = next(s for s in chart_specs(at) if "Tuned lens" in str(s["layout"].get("title", "")))["data"][0]["text"]
    untrained = LL.TunedLens(lm.config.num_hidden_layers, lm.config.hidden_size)
    untrained.kl_logit, untrained.kl_tuned = torch.zeros(7), torch.zeros(7)
    LL.save_tuned_lens(untrained, path)
    at.run()
    assert_clean(at)
    second = next(s for s in chart_specs(at) if "Tuned lens" in str(s["layout"].get("title", "")))["data"][0]["text"]
    plain = LL.logit_lens(lm.model, enc["input_ids"])
    tokens = [lm.tokenizer.convert_ids_to_tokens(row) for row in plain.top_ids[..., 0].tolist()]
    expected = [[_plain(t, 14) for t in row] for row in tokens]
    strip = lambda rows: [[str(c).replace("<b>", "").replace("</b>", "") for c in row] for row in rows]  # noqa: E731
    assert strip(second) == expected and strip(first) != expected


# ----------------------------------------------------------------------------- decoding controls
DECODE_TEXT = "The film won the [MASK] for best actor at the [MASK] in London."


def _decode_page(**state) -> AppTest:
    at = page("masking", msk_rate=0.0, **state)  # rate 0: the typed [MASK]s are the only positions
    at.text_area(key="msk_text").input(DECODE_TEXT).run()
    assert_clean(at)
    return at


def _expected_logits():
    loaded = load(sources.PACKAGED_MLM)
    ids = encode(loaded.tokenizer, DECODE_TEXT).tensors()["input_ids"]
    pos = fill_mask.mask_token_positions(loaded.tokenizer, ids)
    return loaded.tokenizer, pos, fill_mask.mlm_logits_at(loaded.model, ids, pos)


def _bars(at: AppTest) -> list[list[float]]:
    from .conftest import array, chart_specs

    spec = next(s for s in chart_specs(at) if any(t.get("orientation") == "h" for t in s["data"]))
    return [array(t["x"]).tolist() for t in spec["data"]]


def test_the_bars_are_the_softmax_at_the_chosen_temperature_and_follow_the_slider():
    at = _decode_page()
    tok, pos, logits = _expected_logits()
    plain = _bars(at)
    for temperature in (0.5, 2.0):
        at.slider(key="msk_temp").set_value(temperature).run()
        assert_clean(at)
        expected = torch.softmax(logits / temperature, -1).topk(5, dim=-1).values  # (2, 5)
        bars = _bars(at)
        torch.testing.assert_close(torch.tensor(bars), expected, atol=1e-6, rtol=1e-4)
        assert bars != plain
        table = next(df for df in dataframes(at) if "top guess" in df.columns)
        assert list(table["probability"]) == pytest.approx(expected[:, 0].tolist(), abs=1e-6)
    assert dict(at.query_params)["msk_temp"] in (["2.0"], "2.0")


def test_top_k_and_top_p_cut_and_renormalise_the_bars():
    at = _decode_page(msk_topk=2)
    bars = torch.tensor(_bars(at))
    assert (bars[:, 2:] == 0).all() and torch.allclose(bars.sum(-1), torch.ones(2), atol=1e-6)
    at.slider(key="msk_topk").set_value(0).run()
    at.slider(key="msk_topp").set_value(0.5).run()
    _, _, logits = _expected_logits()
    expected = fill_mask.decoded_probs(logits, fill_mask.Decoding(top_p=0.5)).topk(5, dim=-1).values
    torch.testing.assert_close(torch.tensor(_bars(at)), expected, atol=1e-6, rtol=1e-4)


def test_sample_draws_repeatably_with_its_seed():
    at = _decode_page(msk_temp=1.5, msk_topk=10)
    assert not any(c.startswith("drawn") for df in dataframes(at) for c in df.columns)
    tok, pos, logits = _expected_logits()
    decoding = fill_mask.Decoding(1.5, 10)

    def drawn(seed):
        table = next(df for df in dataframes(at) if "top guess" in df.columns)
        assert f"drawn (seed {seed})" in table.columns, table.columns
        return list(table[f"drawn (seed {seed})"])

    at.button(key="msk_sample").click().run()
    assert_clean(at)
    first = drawn(0)
    assert first == tok.convert_ids_to_tokens(fill_mask.sample(logits, decoding, 0))
    at.button(key="msk_sample").click().run()  # the next press: the next seed
    assert at.number_input(key="msk_sample_seed").value == 1
    assert drawn(1) == tok.convert_ids_to_tokens(fill_mask.sample(logits, decoding, 1))
    at.number_input(key="msk_sample_seed").set_value(0).run()  # back to seed 0: the same words
    assert drawn(0) == first
    qp = {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}
    assert qp["msk_sampled"] == "1" and qp["msk_sample_seed"] == "0" and qp["msk_topk"] == "10"


def test_a_link_reopens_the_decoding_controls():
    at = AppTest.from_file(str(ROOT_PAGES / "masking.py"), default_timeout=240)
    for k, v in {"msk_text": DECODE_TEXT, "msk_rate": "0", "msk_temp": "0.5", "msk_topk": "3", "msk_topp": "0.9",
                 "msk_sample_seed": "7", "msk_sampled": "1"}.items():
        at.query_params[k] = v
    at.run()
    assert_clean(at)
    assert at.slider(key="msk_temp").value == 0.5 and at.slider(key="msk_topk").value == 3
    tok, _, logits = _expected_logits()
    table = next(df for df in dataframes(at) if "top guess" in df.columns)
    assert list(table["drawn (seed 7)"]) == tok.convert_ids_to_tokens(
        fill_mask.sample(logits, fill_mask.Decoding(0.5, 3, 0.9), 7))


def test_a_repaint_encodes_its_text_once(monkeypatch):
    """Every view of the page reads views.masking.encoding: the grid, the guesses, the candidates and the
    explanations of one text cost one encoding, however many of them the page draws (explanations tab open)."""
    from explorer.views import core
    from explorer.views import masking as views

    calls = []
    real = views.encode
    monkeypatch.setattr(views, "encode", lambda *a, **k: calls.append(a[1:3]) or real(*a, **k))
    core.clear()
    try:
        at = page("masking", sources.PACKAGED_MLM, msk_text="The keys to the cabinet [MASK] on the table.",
                  msk_panel="Which words made this prediction")
        assert_clean(at)
        assert calls == [("The keys to the cabinet [MASK] on the table.", None)], calls
    finally:
        core.clear()
