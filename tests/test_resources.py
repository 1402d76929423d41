"""explorer.resources: every cache key changes when what it stands for changes.

A model folder rewritten in place (a model saved over an older one, a run restarted into the same
directory) must be loaded and run again: the UI's model and forward caches are keyed on
``source_key``, which carries the files' sizes and modification times.
"""

import numpy as np

from bertcore.modeling.heads import BertForMaskedLM
from bertcore.loading.sources import ModelSource, files_stamp
from explorer import heldout, resources

from .conftest import save_tiny_bert


def test_a_rewritten_model_folder_is_loaded_and_run_again(tmp_path):
    folder = save_tiny_bert(tmp_path / "m", BertForMaskedLM, seed=0)
    source = ModelSource("local", str(folder), "tiny")
    first = resources.load_model(source)
    key1 = resources.source_key(source)
    act1 = resources.forward(key1, "the cat sat on the mat", None, _loaded=first)
    assert resources.load_model(source) is first  # cached while the files are unchanged
    assert resources.source_key(source) == key1

    save_tiny_bert(folder, BertForMaskedLM, seed=1)  # new weights over the old files
    second = resources.load_model(source)
    key2 = resources.source_key(source)
    assert key2 != key1 and second is not first
    w1 = first.model.state_dict()["bert.embeddings.word_embeddings.weight"]
    w2 = second.model.state_dict()["bert.embeddings.word_embeddings.weight"]
    assert not np.allclose(w1.numpy(), w2.numpy())
    act2 = resources.forward(key2, "the cat sat on the mat", None, _loaded=second)
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


def test_checkpoint_summary_segments_follow_the_run_tokenizer(tmp_path, monkeypatch):
    """The Evolution page's per-checkpoint summary shares held-out segments (packed to a token budget by the
    tokenizer) across a run's checkpoints; a run folder rewritten with another vocabulary gets new ones."""
    from bertcore.modeling.model import BertModel

    from .conftest import SMALL_VOCAB

    keys = []
    real = heldout.findings_segments

    def spy(tokenizer_key, *args, **kwargs):
        keys.append(tokenizer_key)
        return real(tokenizer_key, *args, **kwargs)

    monkeypatch.setattr(heldout, "findings_segments", spy)
    run = tmp_path / "run"
    for step, seed in ((10, 0), (20, 1)):  # two checkpoints of one run: one vocabulary, shared segments
        save_tiny_bert(run / "checkpoints" / f"step-{step:06d}", BertModel, seed=seed)
        heldout.checkpoint_summary(str(run / "checkpoints" / f"step-{step:06d}"), "a", str(run), 2, 32)
    save_tiny_bert(run / "checkpoints" / "step-000010", BertModel, tokenizer=SMALL_VOCAB, seed=2,
                   vocab_size=len(SMALL_VOCAB))  # the run folder reused with another vocabulary
    heldout.checkpoint_summary(str(run / "checkpoints" / "step-000010"), "b", str(run), 2, 32)
    assert keys[0] == keys[1] and keys[2] != keys[0]


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
    lm = resources.load_model(source)
    key = resources.source_key(source)
    a = resources.mixing_maps(key, "the cat sat on the mat", None, "alti", _loaded=lm)
    assert resources.mixing_maps(key, "the cat sat on the mat", None, "alti", _loaded=lm) is a
    assert not np.allclose(a, resources.mixing_maps(key, "the cat sat on the mat", None, "norm_res_ln", _loaded=lm))
    assert a.shape != resources.mixing_maps(key, "the dog sat", None, "alti", _loaded=lm).shape
    text = "the cat sat on the [MASK] today"
    w1 = resources.which_words(key, text, None, 6, 2024, None, _loaded=lm)
    w2 = resources.which_words(key, text, None, 6, 2003, None, _loaded=lm)
    assert not np.allclose(w1["occlusion"], w2["occlusion"])
    w3 = resources.which_words(key, "a dog ran to the [MASK] today", None, 6, 2024, None, _loaded=lm)
    assert not np.allclose(w1["ig"], w3["ig"])
    save_tiny_bert(folder, BertForMaskedLM, seed=1, tokenizer="full", max_position_embeddings=512)
    key2 = resources.source_key(source)
    lm2 = resources.load_model(source)
    assert not np.allclose(a, resources.mixing_maps(key2, "the cat sat on the mat", None, "alti", _loaded=lm2))
    f1 = resources.faithfulness(key, text, None, 6, 2024, _loaded=lm)
    f2 = resources.faithfulness(key2, text, None, 6, 2024, _loaded=lm2)
    assert not np.allclose(f1.effects["occlusion"], f2.effects["occlusion"])
