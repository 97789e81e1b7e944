"""What plugins extend: a registry of named things (``registry.Registry``): built-ins, then what installed packages
declare under an entry-point group, then what a process registers. The decoders and the model kinds are two."""
