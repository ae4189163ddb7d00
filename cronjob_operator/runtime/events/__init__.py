"""Events: the asynchronous, best-effort ``EventRecorder`` and its ``Recorder`` protocol.

Machinery: ``_recorder`` (the Runnable that writes), ``_correlator`` (client-go's event
aggregation and spam filter).
"""

from cronjob_operator.runtime.events._correlator import NORMAL, WARNING
from cronjob_operator.runtime.events._recorder import EventRecorder, Recorder, RecorderStats

__all__ = ["NORMAL", "WARNING", "EventRecorder", "Recorder", "RecorderStats"]
