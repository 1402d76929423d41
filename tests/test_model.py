"""bertcore.modeling.model: inputs the model cannot take are refused with a message."""

import pytest
import torch

from bertcore import InputError


def test_model_refuses_too_long_or_out_of_vocab_inputs(packaged):
    with pytest.raises(InputError, match="512 positions"):
        packaged.model(torch.zeros(1, 513, dtype=torch.long))
    with pytest.raises(InputError, match="input_ids must lie"):
        packaged.model(torch.tensor([[101, 40000, 102]]))
