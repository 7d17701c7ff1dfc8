"""The Workload reconciler and its writes: the level-triggered steps (adoption, pending reasons,
pod groups), a cycle's decisions, the status writes they share (settled when a connection drops,
paced, with Events) and what a job's Workload follows (priority, drift). It imports feed/,
admission/ and watch/.
"""
