"""The aoeb area: the agent-oriented retrieval benchmark, its embedder, and retrieval metrics."""
