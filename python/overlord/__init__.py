"""overlord: the trainer's side of the overlord data loader.

``overlord.frames`` reads ovl-frame(5) streams (per-rank FIFOs, files,
sockets) incrementally and checks them; see its docstrings.
"""

from .frames import (Barrier, Frame, FrameError, Image, NewStream, Reader, Seq,
                     StepEnd, read, steps)
from .live import LoaderGone
from ._crc import FAST as CRC_IN_C, crc32c

__all__ = ["Barrier", "Frame", "FrameError", "Image", "LoaderGone", "NewStream",
           "Reader", "Seq", "StepEnd", "read", "steps", "crc32c", "CRC_IN_C"]
__version__ = "0.1.0"
