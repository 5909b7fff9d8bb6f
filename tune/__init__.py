"""Ray Tune over Arena runs: a trial is a :class:`training.run.Run` that reports every
iteration (with its checkpoint) to Tune (:mod:`tune.trainable`); ``arena sweep`` runs the
sweeps of :mod:`tune.sweeps` (:mod:`tune.runner`), ``arena report`` turns a sweep directory
(:mod:`tune.results`) into tables, bootstrap intervals and plots (:mod:`tune.analysis`,
:mod:`tune.report`)."""
