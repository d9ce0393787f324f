"""Every program shipped to a node and what they share (DESIGN.md "node/"): stdlib only,
Python >= 3.8 on the node. ``bundle`` assembles what a node gets; ``paths`` is the only
place a node path is written."""
