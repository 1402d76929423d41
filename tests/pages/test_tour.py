"""The guided tour (explorer.tour.banner, explorer/app_pages/tour.py) through app.py: every step opens its page with its
inputs set and a banner whose numbers are measured on the model in use; Back/Next/Leave; a link's step number
(junk falls back to step 1); bad input in a step's URL parameters; a model without an MLM head; the quiz checks
right and wrong answers against the measured ones."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertcore.analysis.attention import activations
from bertcore.analysis.papers import findings as F
from bertcore.loading.sources import DEFAULT, PACKAGED, load
from explorer.server import share
from explorer.tour import quiz as tour_quiz
from explorer.resources import source_key
from explorer.tour.steps import ATT_A, STEPS

from .conftest import APP, TIMEOUT, assert_clean, messages

N = len(STEPS)
ODD = "zero\u200bwidth \u202eRLO مرحبا 😀👍🏽 \x07bell <b>x</b> **md** [mask] `tick`"
BAD = {"empty": "", "600 tokens": "word " * 600, "odd unicode": ODD}


def app(page: str | None = None, **params) -> AppTest:
    """app.py opened on ``page`` (file stem; default: the default page) with the URL's query ``params``."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    if page:
        return goto(at, page)
    return at.run()


def goto(at: AppTest, page: str) -> AppTest:
    """Open ``page`` as a sidebar click does. AppTest keeps a ``switch_page`` destination for every later run,
    where the browser follows the app's own ``st.switch_page``: forget it after this run, as the browser does."""
    at.switch_page(f"explorer/app_pages/{page}.py").run()
    at._page_hash = ""
    return at


def banner(at: AppTest) -> list[str]:
    """The markdown of the tour's banner: its heading, the measured sentence and where to look."""
    return [str(m.value) for m in at.markdown if str(m.value).startswith(
        ("**:material/tour: Guided tour", "**Measured on this model", "**Not measured here", "**Look at**"))]


def measured(at: AppTest) -> str:
    """The banner's measured sentence (or the reason nothing was measured)."""
    found = [t for t in banner(at) if t.startswith(("**Measured", "**Not measured"))]
    assert len(found) == 1, banner(at)
    return found[0]


def query(at: AppTest) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}


def assert_step(at: AppTest, n: int) -> None:
    """At step ``n``: no exception or error; the banner names the step; the step's inputs are set on the page and
    in the URL; a number was measured."""
    step = STEPS[n - 1]
    assert_clean(at)
    assert not messages(at)["error"], (n, messages(at)["error"])
    assert at.session_state["tour_step"] == n
    assert any(f"step {n} of {N}: {step.title}" in t for t in banner(at)), (n, banner(at))
    for key, value in step.state.items():
        got = at.session_state[key]
        assert (tuple(got) if isinstance(got, list) else got) == value, (n, key)
    q = query(at)
    assert q["tour"] == str(n)
    for key in step.shared:
        if key in step.state:
            assert q[key] == share.url_value(step.state[key]), (n, key)
    assert "Measured on this model" in measured(at), (n, measured(at))


def walk(at: AppTest, check=assert_step) -> AppTest:
    """From the Start page: Start, then Next through every step (each checked)."""
    at.button(key="tour_start").click().run()
    for n in range(1, N + 1):
        check(at, n)
        if n < N:
            at.button(key="tour_next").click().run()
    return at


def test_every_step_opens_its_page_with_its_inputs_and_measured_numbers():
    at = walk(app("tour"))
    assert at.title[0].value.startswith("Start here")  # the quiz step is the Start page
    at.button(key="tour_finish").click().run()
    assert "tour_step" not in at.session_state and "tour" not in query(at)
    assert_clean(at)


def test_steps_point_at_the_measured_head():
    """The One head step selects the head that attends most to the previous token, measured here from scratch."""
    at = app("tour")
    at.button(key="tour_open_5").click().run()
    lm = load(DEFAULT)
    share_prev = F.offset_share(activations.run(lm.encoder, lm.tokenizer, ATT_A).attentions, -1)
    layer, head = (int(i) + 1 for i in np.unravel_index(int(share_prev.argmax()), share_prev.shape))
    assert (at.session_state["att_layer"], at.session_state["att_head"]) == (layer, head)
    assert f"Head **{layer}-{head}**" in measured(at)
    assert at.session_state["att_tab"] == "One head"


def test_the_weighted_sum_step_measures_alpha_times_the_value_vector_on_its_own_token():
    """Step 5 says what arrives is α × the size of the value vector, with both measured on the step's token."""
    from bertcore.analysis.attention import flows

    at = app("tour")
    at.button(key="tour_open_5").click().run()
    lm = load(DEFAULT)
    act = activations.run(lm.encoder, lm.tokenizer, ATT_A)
    layer, head = at.session_state["att_layer"], at.session_state["att_head"]
    query = act.tokens.index("it") if "it" in act.tokens else len(act.tokens) // 2
    block, h = layer - 1, head - 1  # the pickers' session values are the labels' numbers; bertcore counts from 0
    a = act.attentions[block, h, query]
    norms = flows.value_norms(lm.model, act.hidden_states[block], block)[h]
    most = int(a.argmax())
    text = measured(at)
    assert "α × the size of the value vector" in text and "arxiv.org/abs/2004.10102" in text
    assert f"α = {a[most]:.2f}" in text and f"size {norms[most]:.1f}, so {a[most] * norms[most]:.2f} arrives" in text


def test_back_leave_and_resume():
    at = app("tour")
    at.button(key="tour_open_3").click().run()
    assert_step(at, 3)
    at.button(key="tour_back").click().run()
    assert_step(at, 2)
    goto(at, "positions")  # the student wanders off through the sidebar
    assert_clean(at)
    assert at.title[0].value == "Positional embeddings" and "tour" not in query(at)
    at.button(key="tour_resume").click().run()
    assert_step(at, 2)
    at.button(key="tour_leave").click().run()
    assert_clean(at)
    assert at.title[0].value == "Embeddings" and "tour_step" not in at.session_state  # still on a working page
    assert not banner(at) and "tour" not in query(at)


@pytest.mark.parametrize("junk", ["junk", "0", "18", "-3", "2.5", "", "%00"])
def test_a_junk_step_number_falls_back_to_step_1(junk):
    at = app(tour=junk)
    assert_step(at, 1)
    assert at.title[0].value == "Tokenization"
    assert any("starts at step 1" in i for i in messages(at)["info"])


def test_a_step_link_reopens_the_step_with_the_link_s_inputs():
    at = app(tour="4")  # on the default page: switches to the step's page
    assert_step(at, 4)
    at = app("attention", tour="5", att_text="The cat sat on the mat and then the cat slept.")
    assert at.session_state["tour_step"] == 5
    assert at.text_area(key="att_text").value == "The cat sat on the mat and then the cat slept."
    assert "Measured on this model" in measured(at)


# the text key a step's link can carry, for each step that has one
TEXT_KEY = {n: next((k for k in s.inputs if k in s.shared and isinstance(s.state.get(k), str)), None)
            for n, s in enumerate(STEPS, 1)}


@pytest.mark.parametrize("n", [n for n, k in TEXT_KEY.items() if k])
def test_bad_text_in_a_step_link(n):
    """Empty, 600-token and odd-Unicode text in a step's URL: the page and the banner answer, never crash."""
    step = STEPS[n - 1]
    for case, text in BAD.items():
        at = app(step.page, tour=str(n), **{TEXT_KEY[n]: text})
        assert_clean(at)
        assert not messages(at)["error"], (n, case, messages(at)["error"])
        assert at.session_state["tour_step"] == n
        said = measured(at)
        if case == "empty":
            assert said.startswith("**Not measured here") and "empty" in said, (n, said)
        else:
            assert "Traceback" not in said


def test_bad_text_on_the_word_senses_step():
    at = app(tour="12")
    for case, text in BAD.items():
        at.text_area(key="ws_sentences").input(text).run()
        assert_clean(at)
        assert not messages(at)["error"], (case, messages(at)["error"])
        assert measured(at), case


def test_a_model_without_mlm_head():
    """all-MiniLM-L6-v2 (packaged, no MLM or NSP head): every step renders; the ones that need a head say so."""
    needs_head = {"fill_mask", "next_sentence", "logit_lens", "patching"}

    def check(at, n):
        step = STEPS[n - 1]
        assert_clean(at)
        assert at.session_state["tour_step"] == n
        said = measured(at)
        if step.slug in needs_head:
            assert said.startswith("**Not measured here") and "has no" in said and "MiniLM-MLM" in said, (n, said)
        else:
            assert "Measured on this model" in said, (n, said)

    at = walk(app("tour", model="packaged:"), check)
    assert at.session_state["model_source"] == PACKAGED
    quiz = tour_quiz.build(load(PACKAGED))
    assert len(quiz.questions) == 4 and len(quiz.skipped) == 2
    assert any("Left out for this model" in c.value for c in at.caption)


def test_another_model_gives_other_measured_text(mlm_source):
    """The banner's numbers come from the model in use: the same step and inputs on a tiny random MLM read
    differently (and the cache does not serve the packaged model's text)."""
    link = {"model": f"local:{mlm_source.ref}"}
    for n in (2, 4, 5, 8, 9):
        ours = measured(app(STEPS[n - 1].page, tour=str(n)))
        theirs_at = app(STEPS[n - 1].page, tour=str(n), **link)
        assert theirs_at.session_state["model_source"].ref == mlm_source.ref
        theirs = measured(theirs_at)
        assert "Measured on this model" in ours and "Measured on this model" in theirs
        assert ours != theirs, n


def test_the_quiz_accepts_the_measured_answer_and_rejects_another():
    at = app("tour")
    built = tour_quiz.build(load(DEFAULT))
    assert 4 <= len(built.questions) <= 6 and not built.skipped
    skey = source_key(DEFAULT)
    right, wrong = built.questions[1], next(q for q in built.questions if q.key == "blank")
    at.button(key=f"quiz_check_{right.key}").click().run()
    assert any("Pick an answer first" in i for i in messages(at)["info"])
    at.radio(key=tour_quiz.radio_key(skey, right)).set_value(right.answer).run()
    at.button(key=f"quiz_check_{right.key}").click().run()
    assert_clean(at)
    ok = [s for s in messages(at)["success"] if s.startswith("Right")]
    assert ok and right.answer in ok[0] and "%" in ok[0]  # the explanation shows the measured shares
    chosen = next(c for c in wrong.choices if c != wrong.answer)
    at.radio(key=tour_quiz.radio_key(skey, wrong)).set_value(chosen).run()
    at.button(key=f"quiz_check_{wrong.key}").click().run()
    no = [w for w in messages(at)["warning"] if w.startswith("Not quite")]
    assert no and f"the answer is **{wrong.answer}**" in no[0] and "%" in no[0]
    assert any("1 right of the 2 checked" in c.value for c in at.caption)


def test_quiz_answers_are_measured_on_the_model(mlm_source):
    ours = {q.key: q for q in tour_quiz.build(load(DEFAULT)).questions}
    theirs = {q.key: q for q in tour_quiz.build(load(mlm_source)).questions}
    assert set(theirs) == set(ours) - {"nsp"}  # the tiny BertForMaskedLM has no NSP head
    assert any(ours[k].answer != theirs[k].answer or ours[k].choices != theirs[k].choices for k in theirs)
    for q in ours.values():
        assert q.answer in q.choices and len(set(q.choices)) == len(q.choices) >= 2
