"""Sections a page is made of that are too long to sit in its file: Streamlit widgets wired to one page's views
(``explorer.views``) and figures. One module per page."""
