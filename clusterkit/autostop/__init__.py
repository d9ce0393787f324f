"""Autostop: a watchdog on every node shuts an idle cluster down (``policy``: the rules,
pure; ``watchdog``: the node-side daemon; ``files``: what the client ships to a node)."""
