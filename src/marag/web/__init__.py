"""``marag serve``: an HTTP API and a web page to ask questions live and browse run directories.

:mod:`marag.web.app` builds the FastAPI app (imports fastapi; load it only when serving),
:mod:`marag.web.runs` reads run directories safely, :mod:`marag.web.live` turns a running
question's steps and node changes into server-sent events, and ``static/`` holds the page.
"""
