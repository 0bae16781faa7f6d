"""tracetriage: the post-mortem of a slow or unstable LLM inference server.

    import tracetriage
    a = tracetriage.analyze(["bundle/"], symptom="tail")   # or analyze(open_case([...]))
    a.headline, a.findings, a.findings_frame(), a.devices_frame(), a.to_json(), a.to_html("r.html")
    tracetriage.compare("before/", "after/")               # a Comparison
    tracetriage.batch(["runs/"], "out/")                   # a BatchResult
    tracetriage.trend("out/")                              # a Trend

The library API lives in tracetriage/api.py; docs/workflows.md shows each call in a notebook.
"""

__version__ = "0.1.0"

_LAZY = {"Case": "tracetriage.case", "open_case": "tracetriage.case", "analyze": "tracetriage.api",
         "compare": "tracetriage.api", "trend": "tracetriage.api", "batch": "tracetriage.api",
         "Analysis": "tracetriage.api", "Comparison": "tracetriage.api", "Trend": "tracetriage.api",
         "BatchResult": "tracetriage.batches", "Options": "tracetriage.runtime", "Runtime": "tracetriage.runtime"}


def __getattr__(name):
    # Imported on first use, so `tracetriage --version` and `--help` do not load pandas.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tracetriage' has no attribute {name!r}")


__all__ = ["Case", "open_case", "analyze", "compare", "trend", "batch", "Analysis", "Comparison", "Trend", "BatchResult",
           "Options", "Runtime", "__version__"]
