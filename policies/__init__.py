"""RLModules and algorithm builders (env id + typed config -> RLlib AlgorithmConfig)."""
