"""clusterkit's sandbox: a local AWS endpoint (moto in server mode) and SSH nodes on
loopback, a package of its own beside clusterkit. It adds `clusterkit sandbox ...` to
clusterkit's CLI (an entry point) and hands clusterkit the configuration sandbox mode is
(``client.py``: mode.json in its state dir); clusterkit imports nothing of it."""

__version__ = "0.1.0"
