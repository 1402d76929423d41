"""The guided tour's navigation and its banner: each step opens a real page with its inputs set, and a panel at
the top of that page says what to look at, with numbers measured on the model in use, and Back / Next.

Where the tour stands lives in ``st.session_state[STEP_KEY]`` (1-based) and in the URL (``?tour=5``, beside the
page's own parameters, so a step's link reopens it). ``app.py`` calls :func:`banner` before ``pg.run()``. A button
calls :func:`enter` (a callback: it sets the step's page state), and the next :func:`banner` switches page. A link
whose step number does not parse falls back to step 1. Leaving (:func:`leave`, or any page of the sidebar) keeps
the student on a working page; the banner then offers the way back.
"""

from __future__ import annotations

import streamlit as st

from bertcore.loading.sources import LoadedModel, SourceError

from .. import resources, widgets
from ..server import share
from . import facts as tour_facts
from . import facts_tasks as tour_facts_tasks
from .facts import Fact
from .steps import STEPS, Step, step_number

STEP_KEY = "tour_step"
PARAM = "tour"
_GOTO = "_tour_goto"
_NOTICE = "_tour_notice"

FACTS = {
    "tokens": tour_facts.tokens, "embeddings": tour_facts.embeddings, "positions": tour_facts.positions,
    "query_key": tour_facts.query_key, "one_head": tour_facts.one_head, "layer_heads": tour_facts.layer_heads,
    "all_layers": tour_facts.all_layers, "feed_forward": tour_facts.feed_forward, "fill_mask": tour_facts_tasks.fill,
    "masking": tour_facts_tasks.masking_draw, "next_sentence": tour_facts_tasks.nsp,
    "word_senses": tour_facts_tasks.word_senses, "syntax": tour_facts_tasks.syntax_head,
    "logit_lens": tour_facts_tasks.lens, "patching": tour_facts_tasks.patch, "train": tour_facts_tasks.train,
    "quiz": tour_facts_tasks.quiz,
}


def page_file(step: Step) -> str:
    return f"explorer/app_pages/{step.page}.py"


@st.cache_data(show_spinner="Measuring this step on the model ...", max_entries=256)
def measured(key: tuple[str, ...], slug: str, items: tuple, _loaded: LoadedModel) -> Fact:
    """:data:`FACTS` ``[slug]`` of the model (``key``: :func:`explorer.resources.source_key`) on the inputs
    ``items`` (sorted ``(session key, value)`` pairs), cached per model and inputs. Input the model cannot read
    (``ValueError`` and its kin: ``TextError``, ``FillMaskError``, ``PatchingError`` ...) gives a Fact that says
    why instead of raising."""
    try:
        return FACTS[slug](_loaded, dict(items))
    except ValueError as exc:
        return Fact(f"the model cannot read this input ({widgets.escape_md(exc)})", ok=False)


def _url_value(step: Step, key: str):
    """A shared key's value in the URL, parsed as the type of its default (the page checks its range); None when
    absent or unreadable."""
    if key not in step.shared or key not in st.query_params:
        return None
    default = step.state.get(key)
    parse = next((p for t, p in ((bool, share.boolean), (int, int), (float, float)) if isinstance(default, t)),
                 share.text)
    try:
        return parse(st.query_params[key])
    except (ValueError, TypeError):
        return None


def inputs(step: Step) -> tuple:
    """The step's measurement inputs as the page shows them: the session value, else the link's (before the page
    has read it), else the step's default."""
    values = {}
    for k in step.inputs:
        if k in st.session_state:
            values[k] = st.session_state[k]
        else:
            url = _url_value(step, k)
            values[k] = step.state.get(k) if url is None else url
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in values.items()))


def _model() -> LoadedModel | None:
    try:
        return resources.load_model(widgets.current_source())
    except (SourceError, ValueError):
        return None


def fact(step: Step, lm: LoadedModel, items: tuple | None = None) -> Fact:
    return measured(resources.source_key(lm.source), step.slug, inputs(step) if items is None else items, _loaded=lm)


def enter(n: int, callback: bool = True) -> None:
    """Go to step ``n`` (a button callback; ``callback=False`` from the script, after the sidebar is drawn): set
    its page's inputs and its focus (measured on the step's own inputs), then the next :func:`banner` switches
    page."""
    step = STEPS[n - 1]
    lm = _model()
    focus = {} if lm is None else fact(step, lm, tuple(sorted((k, step.state.get(k)) for k in step.inputs))).focus
    st.session_state.update({**step.state, **focus})
    if lm is not None and callback:  # st.switch_page's run gets no widget values: pin the sidebar's model
        widgets.use_source(lm.source)
    st.session_state[STEP_KEY] = n
    st.session_state[_GOTO] = n


def leave() -> None:
    """End the tour (a button callback); the page stays as it is."""
    st.session_state.pop(STEP_KEY, None)


def point(focus: dict) -> None:
    """Select what the step measured on the page (a button callback)."""
    st.session_state.update(focus)


def link_params(n: int) -> dict[str, str]:
    """The query string of step ``n``: ``tour`` and the page's own shared inputs as they are now."""
    step = STEPS[n - 1]
    params = {PARAM: str(n)}
    for k in step.shared:
        value = share.url_value(st.session_state.get(k, step.state.get(k)))
        if value is not None:
            params[k] = value
    return params


def _from_link(current: str) -> int | None:
    """On a session's first run with ``?tour=``: the step it names (junk: 1, with a notice), its state set; returns
    the step to switch to when the link's page is not the step's."""
    raw = st.query_params[PARAM]
    n = step_number(raw)
    if n is None:
        n = 1
        st.session_state[_NOTICE] = (f"This link's tour step ({widgets.escape_md(raw[:40])}) is not one of 1-"
                                     f"{len(STEPS)}: the tour starts at step 1.")
    step = STEPS[n - 1]
    if step.page != current:
        enter(n, callback=False)
        return n
    st.session_state[STEP_KEY] = n
    lm = _model()
    focus = {} if lm is None else fact(step, lm).focus  # measured on the link's inputs
    for k, v in {**step.state, **focus}.items():  # the link's own values stay for the page (explorer.server.share)
        if k not in st.query_params:
            st.session_state[k] = v
    return None


def banner(current: str) -> None:
    """The tour panel at the top of the page ``current`` (a file stem), when a tour is under way; also switches
    page after :func:`enter` and keeps ``?tour=`` in the URL of the step's page."""
    goto = st.session_state.pop(_GOTO, None)
    if goto is None and share.first_run("tour") and PARAM in st.query_params:
        goto = _from_link(current)
    if goto is not None:
        st.switch_page(page_file(STEPS[goto - 1]), query_params=link_params(goto))
    n = step_number(st.session_state.get(STEP_KEY))
    step = STEPS[n - 1] if n else None
    if step is None or step.page != current:
        st.query_params.pop(PARAM, None)
    else:
        st.query_params[PARAM] = str(n)
    if step is None:
        return
    with st.container(border=True, key="tour_banner"):
        st.markdown(f"**:material/tour: Guided tour · step {n} of {len(STEPS)}: {step.title}**")
        notice = st.session_state.pop(_NOTICE, None)
        if notice:
            st.info(notice, icon=":material/link_off:")
        if step.page != current:
            st.caption("You left the tour here: this page works as usual. Go back to the step, or end the tour.")
            c = st.columns([1, 1, 3])
            c[0].button(f"Back to step {n}", key="tour_resume", on_click=enter, args=(n,), icon=":material/undo:")
            c[1].button("End the tour", key="tour_end", on_click=leave, icon=":material/close:")
            return
        _step_body(step, n)


def _step_body(step: Step, n: int) -> None:
    st.markdown(step.what)
    lm = _model()
    measured_fact = None if lm is None else fact(step, lm)
    if measured_fact is not None:
        label = "**Measured on this model, now:** " if measured_fact.ok else "**Not measured here:** "
        st.markdown(label + measured_fact.text)
    focus = {} if measured_fact is None else measured_fact.focus
    layer = st.session_state.get("ws_layer" if step.page == "word_senses" else "att_layer", "?")
    st.markdown("**Look at** " + step.look.format(layer=layer, head=st.session_state.get("att_head", "?")))
    c = st.columns([1, 1, 2, 1])
    c[0].button("Back", key="tour_back", on_click=enter, args=(n - 1,), disabled=n == 1,
                icon=":material/arrow_back:")
    if n < len(STEPS):
        c[1].button("Next", key="tour_next", on_click=enter, args=(n + 1,), type="primary",
                    icon=":material/arrow_forward:")
    else:
        c[1].button("Finish", key="tour_finish", on_click=leave, type="primary", icon=":material/flag:")
    if any(st.session_state.get(k) != v for k, v in focus.items()):
        c[2].button("Point the page at the measured one", key="tour_point", on_click=point, args=(focus,),
                    icon=":material/my_location:", help="The numbers above were measured on the page's current "
                    "input; this selects the head, layer or token they name.")
    c[3].button("Leave the tour", key="tour_leave", on_click=leave, icon=":material/close:")
