"""bench/harness.py: the one harness every benchmark script uses (command line, pyperf timings with the reference
in the same run, results files), and a static check that no script goes around it."""

from __future__ import annotations

import ast
import sys
import time
from pathlib import Path

import pyperf
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402

SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "harness.py")


def test_paired_times_both_and_its_ratio_reads_the_pairs(tmp_path):
    pair = harness.paired("slow", lambda: time.sleep(0.004), "fast", lambda: time.sleep(0.001), reps=5)
    assert pair.bench.get_nvalue() == pair.reference.get_nvalue() == 5
    assert pair.ratio == pytest.approx(sorted(pair.ratios)[2])
    assert pair.ms > pair.ref_ms and pair.ratio > 1.5
    assert pair.bench.get_metadata()["ratio_to_reference"] == pytest.approx(pair.ratio)
    out = tmp_path / "t.json"
    harness.save(out, [pair.bench, pair.reference])
    suite = pyperf.BenchmarkSuite.load(str(out))
    assert set(suite.get_benchmark_names()) == {"slow", "slow | reference: fast"}
    assert suite.get_benchmark("slow").median() == pytest.approx(pair.bench.median())


def test_interleaved_keeps_one_benchmark_per_case_and_save_merges_repeats(tmp_path):
    cases = {"a": lambda: None, "b": lambda: time.sleep(0.002)}
    first = harness.interleaved(cases, reps=3)
    again = harness.interleaved(cases, reps=2)
    assert first["b"].median() > first["a"].median()
    out = tmp_path / "t.json"
    harness.save(out, [*first.values(), *again.values()])
    assert pyperf.BenchmarkSuite.load(str(out)).get_benchmark("a").get_nvalue() == 5


def test_parse_adds_the_common_options_and_sets_threads():
    import torch

    before = torch.get_num_threads()
    try:
        args = harness.parse("doc", lambda ap: ap.add_argument("--reps", type=int, default=3),
                             ["--threads", "1", "--json", "x.json"])
        assert (args.reps, args.threads, args.json) == (3, 1, Path("x.json"))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def _imports(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names.append(node.module or "")
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_script_goes_through_the_harness(script):
    """The first import is the harness (it puts the repository on sys.path), and nothing the harness owns is done by
    hand again: no sys.path edit, no parser of its own, no stopwatch."""
    source = script.read_text(encoding="utf-8")
    tree = ast.parse(source)
    imports = _imports(tree)
    assert imports and imports[0] == "harness", f"{script.name}: first import is {imports[:1]}, not harness"
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for by_hand in ("sys.path.insert", "argparse.ArgumentParser", "time.perf_counter", "time.time"):
        assert by_hand not in calls, f"{script.name} calls {by_hand}: the harness does it"


def test_the_static_check_sees_a_script_that_goes_around_the_harness(tmp_path):
    bad = tmp_path / "bench_bad.py"
    bad.write_text("import sys\nimport time\nsys.path.insert(0, '.')\nt = time.perf_counter()\n")
    with pytest.raises(AssertionError, match="first import"):
        test_every_script_goes_through_the_harness(bad)
    bad.write_text("import harness\nimport time\nt = time.perf_counter()\n")
    with pytest.raises(AssertionError, match="perf_counter"):
        test_every_script_goes_through_the_harness(bad)


def test_stopwatch_times_its_block_and_keeps_it():
    with harness.stopwatch("block") as sw:
        time.sleep(0.003)
        assert 0 < sw.elapsed() < 1
    assert 0.003 <= sw.seconds < 1 and sw.bench.get_values() == (sw.seconds,)
    assert harness.timings()[-1] is sw.bench
