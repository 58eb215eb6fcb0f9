"""Owners' own provider keys (and OpenAI-compatible base URLs): stored encrypted, write-only, used for that owner's
agents before the environment's keys. A Django app inside the providers package; the providers package itself
never imports it, so the adapters keep working without Django."""
