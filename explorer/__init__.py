"""explorer: the Streamlit UI of BERT Explorer (pages, widgets, cached resources, Plotly figures).

Direction of imports: ``app.py -> explorer -> bertcore``. ``explorer.figures`` never imports
Streamlit (pure functions: arrays and labels in, ``plotly.graph_objects.Figure`` out).
"""
