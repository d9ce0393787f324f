"""Autostop's client half: ``files``, what the client ships to a node and the commands
that run it there. The node side (the watchdog and its rules) is in ``clusterkit.node``:
``watchdog`` and ``autostop_policy``."""
