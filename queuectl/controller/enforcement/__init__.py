"""Enforcement: what runs is held to its admission. The pure comparison of a Workload's pods with
its admission, and the loop that stops what runs beyond it, evicting through the reconciler with
the drainer's rule for what may be evicted (so it sits above nodes/).
"""
