"""Nodes: auto-drain of nodes with an unhealthy GPU, evicting their Workloads through the
reconciler (so it sits above workloads/).
"""
