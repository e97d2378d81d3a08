"""The hostile tool name and description the synthetic bad MCP server serves (``bad_mcp_server``).

A module of its own so that the tests can compare against them without importing the server,
which imports the ``mcp`` SDK's server side (most of a CPU second in every worker that collects).
Terminal escapes, a bidirectional override, JSON and HTML breakers and a shell fragment: they must
come out of the audit as inert data, encoded properly.
"""

HOSTILE_NAME = "evil\x1b[31m_tool\u202e"
HOSTILE_DESCRIPTION = 'Reads "things"\x1b[2J\x07 </script><script>alert(1)</script> $(rm -rf ~) `reboot` \\u0000 {"x": 1}'
