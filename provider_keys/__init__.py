"""Owners' own provider keys (and OpenAI-compatible base URLs): stored encrypted, write-only, used for that owner's
agents before the environment's keys (docs/security.md "Owners' provider keys"). The providers package never
imports this app; the runtime asks it for a ChatRequest's overrides (`selectors.owner_request_overrides`)."""
