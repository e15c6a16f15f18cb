"""mlm.decay: the decay phase of the mmBERT encoder (see tasks.mlm.phases)."""

from tasks.mlm.phases import phase_stage

STAGE = phase_stage("decay")
