"""Resuming a load: where a table's load resumes (:mod:`.checkpoint`), the stores that keep
checkpoints (:mod:`.stores`: a table of the target database, a local file or a Cloud Storage
object), and the lease that lets one run of a job load at a time (:mod:`.lease`)."""

from .checkpoint import BATCHING_VERSION, Checkpoint, Opened
from .lease import Lease
from .stores import StateStore, open_state_store

__all__ = ["BATCHING_VERSION", "Checkpoint", "Lease", "Opened", "StateStore", "open_state_store"]
