"""Which of two sentences the model prefers.

    scoring        pseudo-log-likelihood of a sentence (Salazar et al. 2020): pseudo_log_likelihood
    minimal_pairs  a minimal-pair suite by paradigm (BLiMP-style, generated from a seed)
    agreement      which head links a verb to its subject (attention from the verb to the noun it agrees with)
"""

__all__ = ["scoring", "minimal_pairs", "agreement"]
