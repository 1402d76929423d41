"""Every page's views: pure functions of a model source and a page's parameters, cached server-wide
(:mod:`.core`), whose own source is the page's "Show the code" (:mod:`.code`). One module per page; no Streamlit."""
