"""Training jobs: `train` (code sync, start, follow), `logs`, `stop`, job state read from the nodes."""
