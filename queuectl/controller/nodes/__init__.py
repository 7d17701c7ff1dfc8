"""Nodes: auto-drain of nodes with an unhealthy GPU or not Ready too long, evicting their
Workloads through the reconciler (so it sits above workloads/); the unknown taint of nodes whose
agent went silent.
"""
