"""Admission: the pure grammar of an admission (the Workload status edits, a Workload's check
entries, the pod placement an admission implies) and the check controllers that gate one (built-in
checks, provisioning). It imports only watch/.
"""
