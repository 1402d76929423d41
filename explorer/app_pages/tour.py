"""Start here: the guided tour's first page (what it is, every step, a button to start) and its quiz.

Wiring only: the steps are ``explorer.tour.steps``, navigation and the banner ``explorer.tour.banner``, the quiz
``explorer.tour.quiz``. Session-state keys start with ``tour_`` and ``quiz_``.
"""

import streamlit as st

from explorer import as_code, resources, widgets
from explorer.tour import banner as tour
from explorer.tour import quiz as tour_quiz
from explorer.tour.steps import STEPS

st.title("Start here: a guided tour of BERT")
st.markdown(
    f"""
New to BERT? Follow one sentence from text to prediction in **{len(STEPS)} steps**. Each step opens one of the
app's real pages with its inputs already set, and a panel at the top says what to look at. Every number in it is
measured on the model chosen in the sidebar while you watch, nothing is written in: pick another model and the
numbers change. **Next** and **Back** move through the tour. Change anything on a page (a sentence, a head, a
layer) and the panel measures your input instead. You can leave at any step: the page stays as it is, and the
panel offers the way back. The tour ends with a short quiz whose answers are measured on the model too.
"""
)


def quiz() -> None:
    st.subheader("Quiz")
    st.caption("Measured on the model in the sidebar: another model can give other right answers. Pick an answer, "
               "then press Check.")
    lm = widgets.current_model()
    tour_quiz.draw(lm, resources.source_key(lm.source))


current = tour.step_number(st.session_state.get(tour.STEP_KEY))
at_quiz = current == len(STEPS)  # the tour's last step: the quiz first, under the tour's panel (Back, Finish)
if at_quiz:
    quiz()
elif current:
    st.button(f"Continue the tour at step {current}: {STEPS[current - 1].title}", key="tour_continue", type="primary",
              on_click=tour.enter, args=(current,), icon=":material/play_arrow:")
else:
    st.button("Start the tour", key="tour_start", type="primary", on_click=tour.enter, args=(1,),
              icon=":material/play_arrow:")
st.subheader("The steps")
st.caption("Open any step directly; the tour goes on from there.")
for n, step in enumerate(STEPS, 1):
    c1, c2 = st.columns([5, 1], vertical_alignment="center")
    where = "this page" if step.page == "tour" else f"the {step.page.replace('_', ' ')} page"
    c1.markdown(f"**{n}. {step.title}** · *{where}*")
    c1.caption(step.what)
    c2.button("Open", key=f"tour_open_{n}", on_click=tour.enter, args=(n,), icon=":material/open_in_new:")
if not at_quiz:
    quiz()
as_code.nothing("tour", "The tour computes nothing itself: each step opens one of the app's pages, and each page's "
                "\"Show the code\" gives the Python of its view with the inputs the step set.")
