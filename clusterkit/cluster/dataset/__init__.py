"""Datasets: publishing a directory as an EBS snapshot, checking a snapshot, deploying its clones to the nodes."""
