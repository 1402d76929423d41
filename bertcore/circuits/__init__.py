"""Circuits: attribution graphs of a [MASK] prediction through transcoders (``attribution``), and what is read from
them: influence, pruning, replacement and completeness scores (``graph``), the viewer's JSON (``export``), steering
features in the real model against the graph's prediction (``steer``) and the check over held-out sentences
(``check``; ``python -m bertcore.circuits check``)."""
