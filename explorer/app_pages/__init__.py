"""One file per page; ``app.py`` lists them with ``st.navigation``."""
