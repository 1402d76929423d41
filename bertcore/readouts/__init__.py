"""What one forward pass predicts and how, step by step: fill-mask, next-sentence prediction, one forward pass
written out, the model's anatomy, the position table's views."""
