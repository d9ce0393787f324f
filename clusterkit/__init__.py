"""clusterkit: one YAML file to a GPU training cluster on AWS."""

__version__ = "0.1.0"
