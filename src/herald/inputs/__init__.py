"""Everything herald takes in at its edges (HTTP bodies, MCP tools' arguments, the hub's own
arguments where they come from outside), one pydantic model for each: ``events`` (publish),
``channel`` (what an agent does), ``agents`` (what the admin does). ``refusals`` turns a model's
``ValidationError`` into the ``InvalidInput`` that names the field and says what to send;
``schema`` makes an MCP tool's input schema from its model.

The submodules are imported by name, not from here, so that a module loads only the models it
uses.
"""
