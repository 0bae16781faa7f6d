"""Typed, frozen records of the analysis JSON contract (reports/analysis.schema.json), read once from a
saved or fresh analysis's ``data`` by :func:`tracetriage.contract.load`: ``records.read(data)`` is the
whole analysis as an :class:`~tracetriage.records.analysis.AnalysisRecord`.

Each record mirrors one object of the schema, field for field (a key that is not a Python name is
read through ``contract.key``); maps keyed by names (gaps by cause, copies by direction, histograms,
claims) stay ``dict[str, X]``. A schema property with no field is declared in the record's
``UNTYPED`` with the reason; tests/test_view_records.py checks both against the schema. The modules, by
block: ``trace`` (inputs, window, phases, devices, processes, kernels, copies, collective skew),
``findings`` (findings, evidence, abstentions), ``efficiency``, ``side`` (topology, NCCL logs, py-spy),
``serving``, and ``analysis`` (the top level); beside the contract, ``series`` (what the charts draw)
and ``export`` (the Perfetto export written in this run)."""

from tracetriage.records.analysis import AnalysisRecord, read

__all__ = ["AnalysisRecord", "read"]
