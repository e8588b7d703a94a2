"""CPython-only builders that turn registry packages into model bundles (`make models`).

`manifest` is the exception: it is pure standard library so it also runs in Pyodide.
"""
