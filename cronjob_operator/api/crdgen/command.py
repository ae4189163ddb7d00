"""The command: ``python -m cronjob_operator.api.crdgen`` writes (or ``--check``s) the files.

Every CRD goes to ``<out>/bases`` and every conversion patch to ``<out>/patches``
(``config/crd`` by default); ``--check`` writes nothing and exits 1 naming each stale
file, which is what the unit test and CI run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cronjob_operator.api.crdgen.crds import generate_crds, webhook_patches
from cronjob_operator.api.crdgen.rendering import (
    crd_file_name,
    patch_file_name,
    render_patch_yaml,
    render_yaml,
)

__all__ = ["DEFAULT_OUT", "main"]

DEFAULT_OUT = Path("config/crd")
"""Where ``bases/`` (the CRDs) and ``patches/`` (their conversion webhook patches) go."""


def _files(out: Path) -> dict[Path, str]:
    """Every generated file under ``out`` (a ``config/crd`` directory) and its content."""
    files = {out / "bases" / crd_file_name(crd): render_yaml(crd) for crd in generate_crds()}
    for base, ops in webhook_patches():
        files[out / "patches" / patch_file_name(base)] = render_patch_yaml(ops)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the CRD and patch files; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cronjob_operator.api.crdgen",
        description="Generate the CustomResourceDefinitions from the API models.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="directory that gets bases/ (the CRDs) and patches/ (%(default)s)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a file differs from what would be generated",
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    files = _files(out)
    if args.check:
        stale = [
            path
            for path, text in files.items()
            if not path.is_file() or path.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            print(
                f"{path}: out of date; run python -m cronjob_operator.api.crdgen", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0
