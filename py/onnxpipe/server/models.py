"""The served bundles: id = the folder's name (unless given), kind from pipe.kind, one scheduler each."""

from __future__ import annotations

import time
from pathlib import Path

from .errors import APIError
from .scheduler import Scheduler

# which pipe method each kind serves, and the endpoints that take it
ENDPOINTS = {"text": ["/v1/chat/completions", "/v1/completions"], "speech": ["/v1/audio/speech"],
             "transcription": ["/v1/audio/transcriptions"]}


def model_id(path: str) -> tuple[str, str]:
    """``ID=PATH`` names a bundle; a bare PATH is named by its folder."""
    if "=" in path and not Path(path).exists():
        name, _, folder = path.partition("=")
        return name, folder
    return Path(path).resolve().name, path


class Model:
    def __init__(self, model_id: str, path: str, pipe, scheduler: Scheduler):
        self.id, self.path, self.pipe, self.scheduler = model_id, path, pipe, scheduler
        self.created = int(time.time())

    @property
    def kind(self) -> str:
        return self.pipe.kind

    def card(self) -> dict:
        """OpenAI's model object plus onnxpipe's fields."""
        voice = next((c for c in self.pipe.controls if c.name == "voice"), None)
        return {"id": self.id, "object": "model", "created": self.created, "owned_by": "onnxpipe",
                "kind": self.kind, "endpoints": ENDPOINTS.get(self.kind, []),
                "batching": self.scheduler.batching, "batching_reason": self.scheduler.batching_reason,
                "voices": list(voice.options) if voice is not None else (["default"] if self.kind == "speech" else []),
                "controls": [c.to_dict() for c in self.pipe.controls], **self.scheduler.stats()}


class Registry:
    def __init__(self):
        self.models: dict[str, Model] = {}

    def add(self, model_id: str, path: str, pipe, scheduler: Scheduler) -> None:
        if model_id in self.models:
            raise ValueError(f"two bundles are named {model_id!r} ({self.models[model_id].path} and {path}): "
                             "name one ID=PATH")
        if pipe.kind not in ENDPOINTS:
            raise ValueError(f"{path}: a {pipe.kind} bundle has no OpenAI endpoint (served: "
                             f"{', '.join(ENDPOINTS)})")
        self.models[model_id] = Model(model_id, path, pipe, scheduler)

    def get(self, model_id: str, kind: str, endpoint: str) -> Model:
        """The model a request names; 404 when none has that id, 400 when it serves another endpoint."""
        model = self.models.get(model_id)
        if model is None:
            raise APIError(404, f"model {model_id!r} is not served here (models: {', '.join(self.models) or 'none'})",
                           "model", "model_not_found")
        if model.kind != kind:
            raise APIError(400, f"model: {model_id!r} is a {model.kind} bundle; {endpoint} takes a {kind} bundle "
                                f"(its endpoints: {', '.join(ENDPOINTS[model.kind])})", "model", "invalid_value")
        return model

    def close(self) -> None:
        for model in self.models.values():
            model.scheduler.close()
