"""explorer.resources: every cache key changes when what it stands for changes.

A model folder rewritten in place (a model saved over an older one, a run restarted into the same
directory) must be loaded and run again: the UI's model and forward caches are keyed on
``source_key``, which carries the files' sizes and modification times.
"""

import numpy as np

from bertcore.modeling.heads import BertForMaskedLM
from bertcore.loading.sources import ModelSource, files_stamp
from explorer import resources
from explorer.views import attention as attention_views
from explorer.views import masking as mask_views

from .conftest import save_tiny_bert


def test_a_rewritten_model_folder_is_loaded_and_run_again(tmp_path):
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM, seed=0)
    source = ModelSource("local", str(folder), "tiny")
    first = resources.load_model(source)
    key1 = resources.source_key(source)
    act1 = attention_views.forward(source, "the cat sat on the mat", None)
    assert resources.load_model(source) is first  # cached while the files are unchanged
    assert resources.source_key(source) == key1

    save_tiny_bert(folder, BertForMaskedLM, seed=1)  # new weights over the old files
    second = resources.load_model(source)
    key2 = resources.source_key(source)
    assert key2 != key1 and second is not first
    w1 = first.model.state_dict()["bert.embeddings.word_embeddings.weight"]
    w2 = second.model.state_dict()["bert.embeddings.word_embeddings.weight"]
    assert not np.allclose(w1.numpy(), w2.numpy())
    act2 = attention_views.forward(source, "the cat sat on the mat", None)
    assert not np.allclose(act1.hidden_states, act2.hidden_states)


def test_files_stamp_follows_every_model_file(tmp_path):
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM, seed=0)
    source = ModelSource("local", str(folder))
    before = files_stamp(source)
    assert "model.safetensors" in before and "vocab.txt" in before
    (folder / "vocab.txt").write_text((folder / "vocab.txt").read_text() + "extra\n")
    assert files_stamp(source) != before
    assert files_stamp(ModelSource("local", str(tmp_path / "missing"))) == ""
    assert files_stamp(ModelSource("hub", "bert-base-uncased")) == ""


def test_evolution_maps_follow_a_rewritten_checkpoint(tmp_path):
    """The Evolution page's per-checkpoint views are keyed on each checkpoint's files (files_stamp of its model
    source): a step rewritten by a resumed run shows the new weights' attention and positions."""
    from explorer.views import evolution as evo_views

    ckpt = tmp_path / "run" / "checkpoints" / "step-000010"
    save_tiny_bert(ckpt, BertForMaskedLM, seed=0)
    source = ModelSource("run", str(ckpt))
    stamps = files_stamp(source)
    maps = [evo_views.attention_at(source, "the cat sat", 0, 0).attention]
    sims = evo_views.position_similarity_at(source, 8)
    save_tiny_bert(ckpt, BertForMaskedLM, seed=1)
    assert files_stamp(source) != stamps
    maps2 = [evo_views.attention_at(source, "the cat sat", 0, 0).attention]
    sims2 = evo_views.position_similarity_at(source, 8)
    assert not np.allclose(maps[0], maps2[0]) and not np.allclose(sims, sims2)


def test_what_flows_caches_follow_the_text_the_method_the_position_and_the_model(tmp_path):
    """The what-flows caches (mixing maps, which words, faithfulness) answer anew when any part of their key changes."""
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM, seed=0, tokenizer="full", max_position_embeddings=512)
    source = ModelSource("local", str(folder), "tiny")
    a = attention_views.mixing_maps(source, "the cat sat on the mat", None, "alti")
    assert attention_views.mixing_maps(source, "the cat sat on the mat", None, "alti") is a
    assert not np.allclose(a, attention_views.mixing_maps(source, "the cat sat on the mat", None, "norm_res_ln"))
    assert a.shape != attention_views.mixing_maps(source, "the dog sat", None, "alti").shape
    text = "the cat sat on the [MASK] today"
    w1 = mask_views.explanations(source, text, None, 6, 2024, None)
    w2 = mask_views.explanations(source, text, None, 6, 2003, None)
    assert not np.allclose(w1.occlusion, w2.occlusion)
    w3 = mask_views.explanations(source, "a dog ran to the [MASK] today", None, 6, 2024, None)
    assert not np.allclose(w1.ig, w3.ig)
    f1 = mask_views.faithfulness_table(source, text, None, 6, 2024)
    save_tiny_bert(folder, BertForMaskedLM, seed=1, tokenizer="full", max_position_embeddings=512)
    assert not np.allclose(a, attention_views.mixing_maps(source, "the cat sat on the mat", None, "alti"))
    f2 = mask_views.faithfulness_table(source, text, None, 6, 2024)
    assert not np.allclose(f1.effects["occlusion"], f2.effects["occlusion"])
