# The one gitops-sched image: the `gitops-sched` CLI, whose first argument (each manifest's
# `args`) picks the process: `reconcile` (reconciler/), `scheduler` (scheduler/), `agent`
# (scheduler/agent/) and `reserve` (the scheduler's GPU reservation pods).
# Build from the repository root:  docker build -t <registry>/gitops-sched:<tag> .
FROM python:3.12-slim

# git and ssh: the reconciler fetches the config repo with the git CLI
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY gitops_sched ./gitops_sched
# the agent extra: the node agent's NVML bindings
RUN pip install --no-cache-dir -c constraints.txt '.[agent]' && rm -rf /src

# unprivileged by default (the agent's DaemonSet runs it as root: NVML's MIG calls need it);
# a home for the reconciler's clone and git's config (its Deployment mounts a volume there)
RUN useradd --uid 65532 --create-home --home-dir /home/gitops-sched gitops-sched
USER 65532:65532
WORKDIR /home/gitops-sched
ENV HOME=/home/gitops-sched \
    PYTHONDONTWRITEBYTECODE=1 \
    GIT_SSH_COMMAND="ssh -i /etc/git-secret/ssh -o UserKnownHostsFile=/etc/git-secret/known_hosts"

EXPOSE 8080
ENTRYPOINT ["gitops-sched"]
