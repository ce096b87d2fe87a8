"""The web console's files (``static/``): one page, one script, one stylesheet and an icon,
written by hand and shipped as they are (no build step, nothing fetched from elsewhere).
``herald.http.console`` serves them at ``/console/``."""
