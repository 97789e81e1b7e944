"""What a model is and how it is called: the model kinds and their registry (``kinds``), the causal LM
(``causal_lm``), the SBD model (``sbd_model``), the adapted LM (``adapted_lm``) with its gated adapter
(``gated_adapter``) and sampler head (``sampler_head``), packed linear layers (``packed_linear``) and the token-tree
masks a call builds (``token_tree``)."""
