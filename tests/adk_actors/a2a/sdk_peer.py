"""The a2a-sdk server peer of the interop tests: an A2A 1.0 server built only from the
official SDK's server classes, running one of our scripted agents. It lives in
`benchmarks/_a2a_peer.py` (the benchmark runs against the same peer); this module
re-exports it for the tests."""

from __future__ import annotations

from benchmarks._a2a_peer import AdkAgentExecutor, LoopbackServer, SdkPeer, build_app, peer_card

__all__ = ["AdkAgentExecutor", "LoopbackServer", "SdkPeer", "build_app", "peer_card"]
