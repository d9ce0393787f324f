"""Provisioning orchestration: up, down, status, plan (aws/ and remote/ verbs in order)."""
