"""The controller: watches -> cache -> core -> writes, in rooms.

The wiring (`manager.Controller` and what only it uses) sits at the top; below it the rooms,
each importing only the rooms under it: enforcement, nodes | queues, workloads, feed,
admission, watch (docs/design/controller.md, "Rooms"; the contract is in pyproject.toml).
"""
