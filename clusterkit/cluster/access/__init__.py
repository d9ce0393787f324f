"""Which cluster a command means and how its nodes are reached: the target (NAME or spec), the local record and node cache, host keys and first contact, exec/ssh."""
