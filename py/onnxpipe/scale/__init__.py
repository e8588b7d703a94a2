"""Past one machine (docs/scale-out.md): ``onnxpipe serve --ray`` deploys the server's own app as a
Ray Serve application, ``onnxpipe batch`` runs records through the pipeline calls in process or on
a Ray Data actor pool, with a resumable manifest.

Ray is an optional extra (``pip install 'onnxpipe[ray]'``): only ``ray_runtime.py`` and the
modules that run on Ray import it, and only when called; ``import onnxpipe`` never does.
"""
