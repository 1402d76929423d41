"""AppTest of the Train page's SAE recipe: the button starts an SAE run of the sidebar's model (a run directory with
task 'sae' and the command line), and the runs list shows its view."""

from bertcore import runs

from .conftest import assert_clean, page


def test_the_sae_recipe_launches_a_run_of_the_sidebar_model(mlm_source, runs_root):
    at = page("train", mlm_source)
    assert_clean(at)
    at.number_input(key="train_sae_minutes").set_value(1.0).run()
    at.button(key="train_sae_go").click().run()
    assert_clean(at)
    infos = runs.list_runs(runs_root)
    assert [i.task for i in infos] == ["sae"]
    config = runs.read_config(infos[0].path)
    argv = config["argv"]
    assert argv[:3] == ["-m", "bertcore.sae", "train"] and mlm_source.ref in argv
    # the input's default "Layer 2" is block 1 (SAE layers are 0-based blocks); the run.json says so
    assert config["args"]["layers"] == [1] and config["args"]["layers_are_blocks"]
    assert config["args"]["d_sae"] == 16 * 32
    runs.cancel(infos[0].path, timeout_s=20)  # the fixture stops it too, whatever happens
    at.run()
    assert_clean(at)


def test_the_transcoder_recipe_launches_one_run_for_every_block(mlm_source, runs_root):
    """The recipe's second kind trains a transcoder per block in one run (what the Circuits page needs)."""
    at = page("train", mlm_source, train_sae_kind="transcoder")
    assert_clean(at)
    at.number_input(key="train_sae_minutes").set_value(1.0).run()
    at.button(key="train_sae_go").click().run()
    assert_clean(at)
    infos = runs.list_runs(runs_root)
    config = runs.read_config(infos[0].path)
    n = config["args"]
    assert n["kind"] == "transcoder" and n["layers"] == list(range(len(n["layers"]))) and len(n["layers"]) >= 2
    assert "--kind" in config["argv"] and "transcoder" in config["argv"]
    runs.cancel(infos[0].path, timeout_s=20)
