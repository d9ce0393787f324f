"""What runs and what it needs: `status` (nodes, cost, jobs, kept EFS) and `iam-policy`."""
