"""Ray Tune over Arena runs: a trial is a :class:`training.run.Run` that reports every
iteration (with its checkpoint) to Tune, so Tune's schedulers can stop or clone it and
``Tuner.restore`` resumes it (:mod:`tune.trainable`)."""
