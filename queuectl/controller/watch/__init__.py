"""Watching and the cache: the API client, the watches, the slim in-memory mirror and the questions
answered from it (a pod's Workload, a pod group). Every other room reads through it; it imports
none.
"""
