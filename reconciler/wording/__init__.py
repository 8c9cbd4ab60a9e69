"""Words: how the reconciler says things, and text from a commit made safe to show.

- ``escape``: text a commit controls, made safe for a terminal or an XML comment;
- ``problems``: the one place a ``Problem`` record becomes words: a line per error,
  warnings once per cause, failures grouped by cause for a reconcile's message;
- ``plan_errors``: a plan's own errors and warnings (``PlanError`` records) as the
  message of the ``Problem`` the plan builds;
- ``refusal``: the prune guard's refusal (``PruneRefusal``) as its one line;
- ``reasons``: a change's reasons as its line; ``health``: a probe's answer and Ready;
  ``images``: an image and its digest; ``rollout``: paced restarts;
- ``plan_lines``: the plan's sentences, which ``plan.text`` lays out, and its summary line;
- ``prdiff``: a PR diff's, per VM (its consequence and notes) and as a whole;
- ``events``: each notification's message, a commit status's description;
- ``outcome``: the daemon's messages (a hold, a rollback, ``/healthz``, sd_notify's
  status, what a plan waits for);
- ``imported``: an import's lines and summary; ``images`` also the image store's lines;
- ``status_lines``: the lines under the status table (the revisions, each host's);
- ``verified``: what ``apply FILE`` finds a saved plan claims that this host does not plan.

Records in, strings out: the renderers (``plan.text``, ``prdiff.report``) lay these out.
"""
