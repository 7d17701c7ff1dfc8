"""Queue status: ClusterQueue and LocalQueue status computed from the core between cycles and
written when it changed. It needs nothing from the reconciler: it imports feed/, admission/ and
watch/.
"""
