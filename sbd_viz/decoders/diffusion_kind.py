"""DiffusionGemma's model kind (``sbd_viz.model_kinds``), beside its model class and sampler
(``sbd_viz.decoders.diffusion``)."""

from ..model_kinds import ModelKind
from .diffusion import DiffusionModel, is_diffusion_folder

MODEL_KIND = ModelKind("diffusion", "a DiffusionGemma model (DiffusionModel)", DiffusionModel,
                       opens=is_diffusion_folder, load=DiffusionModel.from_pretrained)
