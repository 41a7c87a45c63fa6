"""`gitops-sched plan`: what a change to the config repo does, for a pull-request comment.

gitsource (the base read from Git) -> build (both sides checked, compiled, simulated) ->
objects / quotas / impact / warnings (the differences) -> summary, markdown, jsonout;
comment posts the Markdown on the pull request.
"""
