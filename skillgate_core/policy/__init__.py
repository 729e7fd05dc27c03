"""Model backends and the tiny-model factory (the embedded default policy)."""
