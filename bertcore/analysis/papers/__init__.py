"""What the papers measured, recomputed, and how training changes it.

    findings   attention patterns, anisotropy, self-similarity (Clark et al., Kovaleva et al., Ethayarajh)
    published  the published numbers for bert-base, with their sources
    emergence  what changes across a run's checkpoints (unigram line, phase changes)
    evalset    the held-out evaluation set those are computed on
"""

__all__ = ["findings", "published", "emergence", "evalset"]
