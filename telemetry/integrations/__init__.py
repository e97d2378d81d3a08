"""Drop-in instrumentation for agent frameworks: one module per framework, each optional.

``telemetry.integrations.pydantic_ai``, ``.langchain``, ``.openai_agents`` and ``.crewai`` each
offer ``instrument(...)``, which instruments the tools of an agent (or a list of tools) in place.
Each module imports its framework, so install the matching extra (``outcome-telemetry[pydantic-ai]``,
``[langchain]``, ``[openai-agents]``, ``[crewai]``) and import the module you use; importing
``telemetry`` never imports a framework. See ``docs/integrations.md`` and ``docs/crewai.md``.

``.llama_index`` (extra ``[llama-index]``) and ``.agno`` (extra ``[agno]``) offer the same
``instrument(...)``/``uninstrument(...)`` for LlamaIndex agents and workflows and Agno agents and teams.

:func:`skip_ours` keeps another instrumentation's span processor (OpenInference's) off our spans.
"""

from ._spans import skip_ours

__all__ = ["skip_ours"]
