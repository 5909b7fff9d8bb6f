"""Arena's runtime: connecting to Ray, the training driver, the sampler and the `arena` CLI."""
