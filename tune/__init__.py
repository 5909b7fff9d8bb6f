"""Ray Tune sweeps and their analysis (filled by the sweep issues)."""
