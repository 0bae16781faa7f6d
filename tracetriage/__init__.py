"""tracetriage: the post-mortem of a slow or unstable LLM inference server.

    import tracetriage
    a = tracetriage.analyze(["bundle/"], symptom="tail")   # or analyze(open_case([...]))
    a.headline, a.findings, a.findings_frame(), a.devices_frame(), a.to_json(), a.to_html("r.html")
"""

__version__ = "0.1.0"


def __getattr__(name):
    # Imported on first use, so `tracetriage --version` and `--help` do not load pandas.
    if name in ("Case", "open_case"):
        from tracetriage import case

        return getattr(case, name)
    raise AttributeError(f"module 'tracetriage' has no attribute {name!r}")


def analyze(case_or_paths, **options):
    """Analyze a case or paths and return the :class:`tracetriage.api.Analysis` (see tracetriage/api.py)."""
    from tracetriage.api import analyze as _analyze

    return _analyze(case_or_paths, **options)


__all__ = ["Case", "open_case", "analyze", "__version__"]
