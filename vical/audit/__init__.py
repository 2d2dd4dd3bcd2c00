"""Trajectory audits (paper Section 4.3, Appendix 3): what an episode shows the model learned
from the demonstrations, and where its decisions went wrong.

An auditor model, reached through the same backends and retry rules as an
evaluation, reads each episode's complete trajectory and answers two criteria
in separate requests (:mod:`~vical.audit.verdict`): information transfer (rule
and strategy transfer) and sequential failure attribution (the most upstream
deficient stage). Modules, one concern each:

* :mod:`~vical.audit.verdict`   the labels, the strict reading of a reply, contradictions
* :mod:`~vical.audit.evidence`  an episode's trajectory rebuilt from its folder
* :mod:`~vical.audit.prompt`    the auditor's instructions and the request message
* :mod:`~vical.audit.runner`    auditing a run folder (``<run>/audit/<episode>.json``)
* :mod:`~vical.audit.tables`    Tables 3 and 4, and Figure 4 with its Table 15 denominators
* :mod:`~vical.audit.sample`    the stratified blind sample for human verification
* :mod:`~vical.audit.label`     the local labelling page
* :mod:`~vical.audit.agreement` human-auditor agreement (Tables 11-14)
"""
