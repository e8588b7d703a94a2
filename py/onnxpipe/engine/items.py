"""Per-item pipeline input values: what a ``loop: per_image`` flow step runs once per item of.

An image front end gives each image's tensors as one item (their shapes differ from image to
image, so they can't be one batch); the executor feeds item i of every such input to run i.
"""

from __future__ import annotations


class Items(list):
    """A list of host values ``(flat values, shape)``, one per item."""
