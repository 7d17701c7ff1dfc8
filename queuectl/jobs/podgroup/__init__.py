"""Plain pod groups: bare pods queued as one gang (group.py)."""
