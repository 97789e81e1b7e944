"""What a decoder or a model kind of your own is built from, in one public module: the base classes and the protocol
a spec checks, the requests a decode sends the model and the replies it gets, the steps it records and how its
output stops; a model kind and its registration.

    from sbd_viz.plugin import DecodeRun, ModelCall, Step, Stop, find_stop

A walk-through, with a decoder that drives ``DecodeRun`` itself: docs/own_decoder.md.
"""

from .decoders.base import Block, BlockLoop, Proposal, Stop, find_stop, greedy, propose
from .decoders.config import DecodeConfig
from .decoders.registry import DecoderSpec, Knob, register_decoder
from .decoders.run import Batchable, Decoder, DecodeRun, DraftAndCheck, greedy_settings
from .decoders.sbd import Decoding
from .decoders.steps import checked_step, draft, exact_commit, ntp_step, slot_views
from .models.call import CacheCut, Model, ModelCall, Reply
from .models.kinds import ModelKind, register_model_kind
from .trace.data import Candidate, Check, Commit, Rollback, SlotView, Step

__all__ = [
    # a decoder's class and its spec
    "Batchable",
    "Block",
    "BlockLoop",
    "DecodeConfig",
    "DecodeRun",
    "Decoder",
    "DecoderSpec",
    "Decoding",
    "DraftAndCheck",
    "Knob",
    "greedy_settings",
    "register_decoder",
    # what a decode asks of the model, and what it gets back
    "CacheCut",
    "Model",
    "ModelCall",
    "Reply",
    # reading a call: token choices, the commit rule's drafts
    "Proposal",
    "draft",
    "greedy",
    "propose",
    # the steps a decode records
    "Candidate",
    "Check",
    "Commit",
    "Rollback",
    "SlotView",
    "Step",
    "checked_step",
    "exact_commit",
    "ntp_step",
    "slot_views",
    # where an output ends
    "Stop",
    "find_stop",
    # a model kind of your own
    "ModelKind",
    "register_model_kind",
]
