"""Lines of code (not blank, not comments, not docstrings) of some files at two git revisions.

    python bench/code_lines.py 0f0a2bf HEAD explorer/views/core.py explorer/server/heavy.py

Prints a Markdown table: file, lines at the first revision, at the second, the difference. A file missing at a
revision counts 0.
"""

from __future__ import annotations

import harness

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_lines(source: str) -> int:
    """Lines that hold code: not blank, not a comment, not part of a module, class or function docstring."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                   str):
                docs.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def at(rev: str, path: str) -> int:
    out = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, cwd=ROOT)
    return code_lines(out.stdout) if out.returncode == 0 else 0


def main() -> None:
    def options(p):
        p.add_argument("before")
        p.add_argument("after")
        p.add_argument("files", nargs="+")

    args = harness.parse(__doc__, options)
    print(f"| file | {args.before} | {args.after} | change |\n|---|---|---|---|")
    total = [0, 0]
    for f in args.files:
        a, b = at(args.before, f), at(args.after, f)
        total[0] += a
        total[1] += b
        print(f"| `{f}` | {a} | {b} | {b - a:+d} |")
    print(f"| all | {total[0]} | {total[1]} | {total[1] - total[0]:+d} |")


if __name__ == "__main__":
    main()
