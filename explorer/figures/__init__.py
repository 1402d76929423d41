"""Pure Plotly figure builders: arrays and labels in, ``go.Figure`` out; no Streamlit here.

Every builder validates shapes first and raises ``ValueError`` with a message that says how
to fix the input.
"""
