"""Why a prediction was made.

    attribution  integrated gradients over the input embeddings (Captum; Sundararajan et al. 2017)
    patching     activation patching: clean vs corrupted runs per site (residual stream, attention, MLP, head)
"""

__all__ = ["attribution", "patching"]
