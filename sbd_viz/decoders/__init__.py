"""The decoders: SBD (``sbd``; verified SBD in ``verified``), remasking, Jacobi, prompt lookup, DiffusionGemma's
sampler, and ``batch``, which serves any decoder's ``requests()`` many rows at a time. ``steps`` builds the
recorded steps they share."""
