"""The feed: watch events become the core's inputs (what the core must not see, the node usage of
pods no admitted Workload stands behind), and the core runs its cycles on its own thread. It
imports watch/ and admission/ (to convert AdmissionChecks).
"""
