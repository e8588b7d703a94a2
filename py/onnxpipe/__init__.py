"""onnxpipe: run generative ONNX pipelines declared as data (pipeline.json)."""

__version__ = "0.1.0"

from . import stages  # noqa: E402,F401  (fills config's registries: loop names, load-time checks)


def load(path, providers=None, **options):
    """Open the model bundle at ``path`` and return a ready Pipeline.

    ``providers`` picks execution providers (e.g. ``["cpu"]``); by default each session uses
    the ones its pipeline.json names, falling back to what the engine has. ``variant="wasm"``
    opens the files a bundle made for that provider (to compare one file across engines).
    """
    from .api import load as _load

    return _load(path, providers=providers, **options)


__all__ = ["load", "__version__"]
