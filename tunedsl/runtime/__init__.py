"""The runtime layer: what user code calls. Sites (the hot path), the miss path (decide,
tuner), the plain API, the DSL entry points, ranks that agree."""
