"""Circuits: attribution graphs of a [MASK] prediction through transcoders (``attribution``), and what is read from
them: influence, pruning, replacement and completeness scores (``graph``)."""
