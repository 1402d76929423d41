"""How long Findings' probing classifiers take, and what a looser lbfgs tolerance would change (a lead, not a change
yet): per task (pos, dep), layer (0, 3, 6) and target (the task, its control task), scikit-learn's
LogisticRegression as ``bertcore.analysis.representations.probes.probe`` fits it, at the default tol and at 1e-3:
seconds, iterations, test accuracy.

    python bench/bench_probe_tol.py [--segments 40] [--threads 1]      # --threads left out: torch's default
"""

from __future__ import annotations

import harness

import numpy as np


def main() -> None:
    args = harness.parse(__doc__, lambda ap: ap.add_argument("--segments", type=int, default=40))
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupShuffleSplit
    from sklearn.preprocessing import StandardScaler

    from bertcore.analysis import shipped
    from bertcore.analysis.representations import probes as P
    from bertcore.loading.sources import PACKAGED_MLM, load

    loaded = load(PACKAGED_MLM)
    parsed = shipped.syntax(loaded, args.segments).compute(None).segments
    feats = P.word_features(loaded.encoder, loaded.tokenizer, parsed)
    print(f"load average {harness.load_average():.2f}; {feats.vectors.shape[1]} words", flush=True)
    for task in ("pos", "dep"):
        y = np.asarray(feats.labels[task])
        y_ctrl = np.asarray(P.control_labels(feats.types, list(y), 0))
        train, test = next(GroupShuffleSplit(1, test_size=0.25, random_state=0).split(feats.vectors[0], y,
                                                                                        feats.groups))
        for layer in (0, 3, 6):
            x = StandardScaler().fit(feats.vectors[layer][train]).transform(feats.vectors[layer])
            for name, target in (("task", y), ("control", y_ctrl)):
                for kw in ({}, {"tol": 1e-3}):
                    with harness.stopwatch(f"{task} layer {layer} {name} {kw or 'default tol'}") as sw:
                        clf = LogisticRegression(max_iter=300, **kw).fit(x[train], target[train])
                        acc = float((clf.predict(x[test]) == target[test]).mean())
                    print(f"{sw.name}: {sw.seconds:.2f} s, {int(clf.n_iter_[0])} iterations, accuracy {acc:.4f}",
                          flush=True)
    harness.save(args.json)


if __name__ == "__main__":
    main()
