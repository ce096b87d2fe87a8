"""The operator's commands (``herald agent``, ``send``, ``events``, ``status``...): each one a
call to a hub's HTTP API, so that they work alike against a local or a remote hub."""
