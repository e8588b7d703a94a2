"""What every bundle builder shares: the ``.built`` stamp and the command line.

The stamp holds what a bundle was built from (package versions, recipe version, sizes); a
second ``make models`` run compares it and the expected outputs and does nothing when both
match. ``finish`` writes manifest.json and then the stamp, so a build cut short is redone.
"""

from __future__ import annotations

import argparse
import json
import os

from .manifest import write_manifest

STAMP_NAME = ".built"


def up_to_date(out_dir: str, inputs: dict, outputs) -> bool:
    """True when the stamp records ``inputs`` and every file or folder in ``outputs`` exists."""
    stamp = os.path.join(out_dir, STAMP_NAME)
    if not os.path.exists(stamp):
        return False
    try:
        with open(stamp, encoding="utf-8") as f:
            built = json.load(f)
    except ValueError:   # a torn stamp: build again
        return False
    return built == inputs and all(os.path.exists(os.path.join(out_dir, n)) for n in outputs)


def finish(out_dir: str, inputs: dict, log) -> None:
    """manifest.json (sizes and sha256 of everything), then the stamp."""
    write_manifest(out_dir)
    with open(os.path.join(out_dir, STAMP_NAME), "w", encoding="utf-8") as f:
        json.dump(inputs, f, indent=2)
    log(f"built {out_dir}")


def main(doc: str, default_out: str, build, argv: list[str] | None = None) -> int:
    """``python -m onnxpipe.export.X [OUT_DIR] [--force]`` for a builder's ``build(out, force)``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default=default_out)
    parser.add_argument("--force", action="store_true", help="rebuild even if the .built stamp matches")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.out_dir, "pipeline.json")):
        raise SystemExit(f"{args.out_dir}/pipeline.json is missing (it is committed; run from the repo root)")
    build(args.out_dir, args.force)
    return 0
