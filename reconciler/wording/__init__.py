"""Words: how the reconciler says things, and text from a commit made safe to show.

- ``escape``: text a commit controls, made safe for a terminal or an XML comment;
- ``warngroup``: warnings once, one line per cause;
- ``causes``: failures grouped by cause, for a reconcile's one-line message.
"""
