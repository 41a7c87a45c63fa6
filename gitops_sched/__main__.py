"""`python -m gitops_sched ...`: the `gitops-sched` command where its console script is not
on the PATH (a venv not activated, a CI step with only the interpreter)."""

from gitops_sched.cli import main

main(prog_name="gitops-sched")
