"""Where a model comes from (packaged, folder, hub, run: sources), results shipped beside a model keyed by its files
(shipped_file), the re-export of old checkpoints (hf_export)."""
