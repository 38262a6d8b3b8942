"""The example gallery: run every example in ``examples/`` and report what each one chose.

Layers, one per module:

- ``result``: the JSON an example hands to the gallery (schema, atomic write, validated read);
- ``kit``: what an example script uses to check and report itself (imports torch lazily);
- ``runner``: finds the examples and runs each in a fresh ``tunedsl run`` subprocess;
- ``report``: the Markdown table and ``report.json``;
- ``plots``: one PNG per example of every configuration's time (matplotlib, optional).
"""
