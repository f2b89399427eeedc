"""Spanner's gRPC data protocol spoken directly, for a load's reads and commits.

A load reaches its first commit without importing google-cloud-spanner (which alone costs
more than the rest of the start-up): see :class:`loader.access.DatabaseAccess` for what goes
this way and what is left to the client library.

* ``proto``: protobuf wire framing and ``google.protobuf.Value`` decoding, by hand;
* ``requests``: the request messages (CreateSession, ExecuteSql, Read, Commit);
* ``results``: rows out of a ``PartialResultSet`` stream (chunk merging, resume tokens,
  values by type);
* ``access``: :class:`WireAccess` (session, RPCs, metadata, errors) and
  :class:`WireCommitter`.
"""

from .access import WireAccess, WireCommitter

__all__ = ["WireAccess", "WireCommitter"]
