"""tracetriage: the post-mortem of a slow or unstable LLM inference server.

    from tracetriage import open_case, analyze
    case = open_case(["bundle/"])
    analysis = analyze(case)
"""

__version__ = "0.1.0"


def __getattr__(name):
    # Imported on first use, so `tracetriage --version` and `--help` do not load pandas.
    if name in ("Case", "open_case"):
        from tracetriage import case

        return getattr(case, name)
    raise AttributeError(f"module 'tracetriage' has no attribute {name!r}")


def analyze(case, **options):
    """Run every analyzer on a case and return the :class:`Analysis`."""
    from tracetriage.analyzers.analysis import analyze as _analyze

    return _analyze(case, **options)


__all__ = ["Case", "open_case", "analyze", "__version__"]
