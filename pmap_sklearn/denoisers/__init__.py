"""Denoisers with learned log-supermodular priors: binary images (:mod:`.binary`) and
grey-level signals and photos (:mod:`.continuous`)."""

from .binary import LogSupermodularDenoiser
from .continuous import ContinuousLogSupermodularDenoiser

__all__ = ["LogSupermodularDenoiser", "ContinuousLogSupermodularDenoiser"]
