"""Verified SBD: the commit rule drafts, greedy NTP on the same weights checks every draft in the same calls; the
text is exactly greedy NTP's. Single drafting (``single``) and tree drafting, the chain and token trees
(``tree``)."""
