"""mlm.decay_cont: the decay phase's control arm, on the mid languages only (tasks.mlm.phases)."""

from tasks.mlm.phases import phase_stage

STAGE = phase_stage("decay_cont")
