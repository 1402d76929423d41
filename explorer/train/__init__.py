"""The Train and Evolution pages' parts: the launch form, uploads, a run's live view and notes, fine-tuning results,
the SAE launcher, cached reads of a run's checkpoints."""
