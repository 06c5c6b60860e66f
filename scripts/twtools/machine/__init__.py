"""The machine layer: facts about this machine and its kernel, the mechanism registry,
and which mechanisms work here. Imports only core."""
