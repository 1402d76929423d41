"""The names of the flat ``bertcore.analysis`` (before its split into subpackages) keep working for one release,
with a DeprecationWarning that names the new place."""

import importlib

import pytest

import bertcore.analysis as analysis


@pytest.mark.parametrize("old, sub", sorted(analysis.MOVED_MODULES.items()))
def test_old_module_names_give_the_moved_module(old, sub):
    with pytest.warns(DeprecationWarning, match=f"moved to bertcore.analysis.{sub}.{old}"):
        module = getattr(analysis, old)
    assert module is importlib.import_module(f"bertcore.analysis.{sub}.{old}")


@pytest.mark.parametrize("name, owner", sorted(analysis.MOVED_NAMES.items()))
def test_old_flat_names_give_the_same_object(name, owner):
    with pytest.warns(DeprecationWarning, match=f"moved to {owner}.{name}"):
        obj = getattr(analysis, name)
    assert obj is getattr(importlib.import_module(owner), name)


def test_from_import_of_an_old_module_still_works():
    with pytest.warns(DeprecationWarning):
        from bertcore.analysis import syntax, patching  # noqa: F401
    assert syntax.run_syntax and patching.scan


def test_every_old_name_is_covered_and_unknown_names_fail():
    old_flat = {"Activations", "run_encoding", "run", "show_invisible", "normalize", "word_rows", "check_attention",
                "hide_tokens", "is_punctuation", "HeadStats", "head_stats", "word_pieces", "find_word", "pool",
                "Occurrences", "word_occurrences", "cosine_matrix", "similarity_by_layer", "random_pair_baseline",
                "pca_2d"}
    assert old_flat == set(analysis.MOVED_NAMES)
    assert len(analysis.MOVED_MODULES) == 22
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        analysis.nonsense  # noqa: B018
