"""graphrag-memory server."""

import os

# gRPC's fork handlers, on by default, print a raw "fork_posix.cc:71 ... skipping fork()
# handlers" line whenever the process forks while gRPC threads run, as it does at every
# shutdown (the embedded PostgreSQL is stopped through pg_ctl). No child of this server uses
# gRPC (each one execs at once), so the handlers have nothing to do. Read by gRPC when it
# initialises, hence here, before anything imports grpc; a deployment's own value wins.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
