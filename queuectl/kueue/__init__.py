"""`queuectl import kueue`: Kueue's queueing objects converted into queuectl's.

Pure (dicts in, dicts and a report out) so that it is tested without files or a cluster;
`queuectl.cli.importer` reads and writes around it. docs/design/kueue-import.md records the
mapping and why each difference is handled as it is.
"""

from queuectl.kueue.convert import Result, Source, convert
from queuectl.kueue.report import Action, Converted, ImportFailed, Note, Report

__all__ = [
    "Action",
    "Converted",
    "ImportFailed",
    "Note",
    "Report",
    "Result",
    "Source",
    "convert",
]
