"""params.yaml `report:` section: what the reproduction report is called and which run
(profile) it describes."""

from __future__ import annotations

from tasks.core.strict_model import StrictModel


class ReportParams(StrictModel):
    title: str = "paperline: which paper claims hold at this scale"
    profile: str = "default"  # named in the report: the embedded default or a profile


SECTION = ReportParams  # params.yaml `report`, registered with tasks.core.params
