"""A session's model graph, read from its file the first time a question needs it.

Any backend works that gives sessions a ``path`` and offers ``model_reader(path)`` (the Backend
protocol in backends/base.py): natively a file, in the browser range reads of the bytes the
worker holds. Reading costs the graph's structure, never its weights, and happens at most once.
"""

from __future__ import annotations

from .detect import GraphFacts
from .reader import read_model


class SessionGraph:
    def __init__(self, backend, session):
        self.backend = backend
        self.session = session
        self._facts: GraphFacts | None = None
        self.error: str | None = None    # why there are no facts, for the error that needed them

    @property
    def read(self) -> bool:
        return self._facts is not None

    def facts(self) -> GraphFacts | None:
        if self._facts is None and self.error is None:
            path = getattr(self.session, "path", "")
            opener = getattr(self.backend, "model_reader", None)
            if not path or opener is None:
                self.error = f'session "{self.session.name}" has no model file this backend can read'
                return None
            source = opener(path)
            try:
                self._facts = GraphFacts(read_model(source, path).graph)
            except Exception as exc:   # an unreadable graph: said in the error that needed it
                self.error = f"could not read {path}: {exc}"
            finally:
                source.close()
        return self._facts
