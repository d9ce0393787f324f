"""What a command waited for, as data: the bars of its timeline and the critical path
of AWS's waits under it. PURE (records in, numbers out)."""
