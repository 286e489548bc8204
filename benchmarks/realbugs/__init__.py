"""A benchmark of real K/V bugs that public projects shipped in a release and later fixed.

The manifest (``manifest.toml``) holds facts only: for each fix, the release that shipped the
buggy lines, the path and line numbers in it, the first release with the fix, the repository and
fix commit, a class and a one-line description. ``python -m benchmarks.realbugs`` downloads both
releases, lints the one file from each with kvlint and prints recall and the findings left on the
fixed files.
"""
