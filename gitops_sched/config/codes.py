"""Diagnostic codes: one stable code per kind of problem, defined here and nowhere else.

A code names the problem, not its wording: CI and `plan` compare problems by code and
object, so a message can be reworded (or its numbers change) without a known problem
showing up as new. Codes are grouped by family, the hundreds digit:

    GS1xx files and YAML         GS5xx workloads and fit
    GS2xx schemas                GS6xx GPUs and MIG
    GS3xx references and names   GS7xx templates
    GS4xx quotas and capacity    GS8xx Simulation documents
                                 GS9xx what `--target kai|kueue` cannot express

"Allow oversubscription" is the Cluster's `spec.policy.allowOversubscription: true` (the
sums become warnings). A code, once published, keeps its meaning: a retired one is not
reused. Every check refers to its code by the constant below; the README lists them all
(a test keeps that list complete).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    """A kind of problem: its code (`GS301`), a short title, and how it is usually fixed."""

    id: str
    title: str
    hint: str

    def __str__(self) -> str:
        return self.id


CODES: dict[str, Code] = {}


def _code(id: str, title: str, hint: str) -> Code:
    if id in CODES:
        raise ValueError(f"diagnostic code {id} is defined twice")
    code = CODES[id] = Code(id, title, hint)
    return code


# --- GS1xx: files and YAML -------------------------------------------------------------------

UNREADABLE_FILE = _code(
    "GS101",
    "file or folder cannot be read",
    "make it a readable regular file inside the repo (no FIFO, device, dangling or outside link)",
)
NO_YAML_FILES = _code(
    "GS102", "no YAML files found", "point at the config folder, or check the ignore file"
)
BAD_IGNORE_FILE = _code(
    "GS103", "unreadable .gitops-schedignore", "fix the file's encoding or pattern"
)
FILE_TOO_LARGE = _code("GS104", "file over the size limit", "split the file (4 MiB at most)")
NOT_UTF8 = _code("GS105", "file is not UTF-8", "save the file as UTF-8")
YAML_SYNTAX = _code("GS106", "YAML syntax error", "fix the YAML at the position shown")
DUPLICATE_KEY = _code("GS107", "duplicate mapping key", "remove or rename one of the two keys")
TOO_DEEP = _code("GS108", "nesting too deep", "flatten the document (64 levels at most)")
ALIAS_BOMB = _code(
    "GS109", "alias expansion too large", "write the values out instead of repeating aliases"
)
UNSUPPORTED_YAML = _code(
    "GS110", "unsupported YAML feature", "no merge keys (<<) and only plain scalars as keys"
)
BAD_SCALAR = _code(
    "GS111", "value does not match its tag", "fix the value or remove the explicit tag (!!int)"
)
NOT_A_MAPPING = _code(
    "GS112",
    "document is not a mapping",
    "write apiVersion, kind, metadata and spec as a mapping",
)
EMPTY_DOCUMENT = _code("GS113", "empty document", "remove the stray `---`")

# --- GS2xx: schemas ---------------------------------------------------------------------------

BAD_API_VERSION = _code(
    "GS201",
    "missing or unknown apiVersion",
    "set apiVersion: gitops-sched.io/v1alpha1; another API's file: leave it out "
    "(.gitops-schedignore or --exclude)",
)
BAD_KIND = _code("GS202", "missing or unknown kind", "use one of the kinds the message lists")
UNKNOWN_FIELD = _code(
    "GS203", "unknown field", "fix the spelling (see the suggestion) or remove the field"
)
MISSING_FIELD = _code("GS204", "missing required field", "add the field")
WRONG_TYPE = _code(
    "GS205", "value of the wrong type", "write the type the schema expects (quote strings)"
)
OUT_OF_RANGE = _code(
    "GS206", "value out of range", "use a value within the schema's minimum and maximum"
)
INVALID_VALUE = _code("GS207", "invalid value", "use a value of the form the message describes")
CONFLICTING_FIELDS = _code(
    "GS208", "fields that conflict or go together", "set exactly the fields the message names"
)
REPEATED_ITEM = _code("GS209", "repeated list item", "remove the repeated item")
IGNORED_FIELD = _code(
    "GS210",
    "deprecated field, ignored",
    "remove the field (the message says what replaced it)",
)

# --- GS3xx: references and names --------------------------------------------------------------

NO_CLUSTER = _code("GS301", "no Cluster document", "add one Cluster document to the repo")
TWO_CLUSTERS = _code("GS302", "more than one Cluster", "keep one Cluster document per repo")
DUPLICATE_NAME = _code(
    "GS303", "duplicate name", "rename or remove the later definition (the first one wins)"
)
UNKNOWN_REFERENCE = _code(
    "GS304", "unknown reference", "name an object the repo defines (see the list in the message)"
)
NODE_GROUP_NOT_ALLOWED = _code(
    "GS305",
    "node group not allowed for the workload",
    "pin a node group the project allows for this type, or allow it in the Project",
)
TWO_DEFAULT_TEMPLATES = _code(
    "GS306", "more than one default Template", "keep `default: true` on one Template"
)
NAME_TOO_LONG = _code("GS307", "derived name too long", "shorten the name (or the prefix)")
BAD_LABEL_VALUE = _code(
    "GS308", "invalid label value", "use at most 63 alphanumerics, '-', '_' and '.'"
)
NO_NODE_SELECTOR = _code(
    "GS309",
    "node group without a node selector",
    "add spec.nodeSelector.matchLabels: labels only the group's nodes carry",
)
RESERVED_NAMESPACE = _code(
    "GS310",
    "namespace taken",
    "rename the project (or change namespacePrefix or systemNamespace): not the system "
    "namespace, `default`, kube-*, crds, kueue-system or kai-scheduler",
)
BAD_LABEL_KEY = _code(
    "GS311",
    "invalid label key",
    "use a name of at most 63 alphanumerics, '-', '_' and '.', after an optional DNS "
    "subdomain and '/' (nvidia.com/gpu.product)",
)

# --- GS4xx: quotas and capacity ---------------------------------------------------------------

PROJECTS_OVER_DEPARTMENT = _code(
    "GS401",
    "projects' quotas over their department's",
    "lower the project's quota, raise the department's, or allow oversubscription",
)
DEPARTMENTS_OVER_CLUSTER = _code(
    "GS402",
    "departments' GPU quotas over the cluster's GPUs",
    "lower the department's quota, add GPU nodes, or allow oversubscription",
)
NODE_GROUP_QUOTAS_OVER_CAPACITY = _code(
    "GS403",
    "node group quotas over the group's GPUs",
    "lower the project's nodeGroupQuotas, grow the group, or allow oversubscription",
)
LIMIT_BELOW_QUOTA = _code("GS404", "limit below quota", "raise the limit to the quota or more")
NON_PREEMPTIBLE_OVER_QUOTA = _code(
    "GS405",
    "non-preemptible workload over its project's quota",
    "make it preemptible, ask for less, or raise the project's GPU quota",
)
NON_PREEMPTIBLE_TOGETHER_OVER_QUOTA = _code(
    "GS406",
    "non-preemptible workloads together over their project's quota",
    "make some preemptible, or raise the project's GPU quota",
)
STALE_GANG_GRACE = _code(
    "GS407",
    "stale-gang grace shorter than a cycle",
    "make staleGangGrace at least cyclePeriod, or 0s on purpose",
)
OVERLAPPING_SELECTORS = _code(
    "GS408",
    "node groups select the same nodes",
    "give each node group a selector label the other does not have",
)

# --- GS5xx: workloads and fit -----------------------------------------------------------------

GANG_TOO_LARGE = _code("GS501", "gang larger than replicas", "lower minAvailable to replicas")
BAD_GPU_COUNT = _code(
    "GS502", "GPU count not allocatable", "ask for whole GPUs or one fraction below 1"
)
GPU_MEMORY_TOO_LARGE = _code(
    "GS503", "gpuMemory more than one GPU has", "ask for less, or whole GPUs"
)
CLAIM_SIZE_ZERO = _code("GS504", "claim size zero", "give the claim a size above 0")
CLAIM_SIZE_NO_UNIT = _code("GS505", "claim size without a unit", "add the unit (100Gi)")
EMPTY_ACCESS_MODES = _code(
    "GS506", "empty accessModes", "list an access mode, or remove accessModes"
)
DUPLICATE_VOLUME = _code("GS507", "volume declared twice", "give each volume its own name")
CLAIMS_DISAGREE = _code(
    "GS508", "one claim declared differently", "declare the claim alike in every workload"
)
SINGLE_NODE_CLAIM = _code(
    "GS509",
    "single-node claim on pods that may spread",
    "use accessModes: [ReadWriteMany], or one replica",
)

POD_TOO_BIG = _code(
    "GS510",
    "pod bigger than any node it may use",
    "ask for fewer GPUs per pod, or allow a node group with larger nodes",
)
GANG_NEVER_FITS = _code(
    "GS511",
    "gang cannot fit on its node groups",
    "lower minAvailable or the pods' request, or allow more node groups",
)
NEEDS_NON_MIG = _code(
    "GS512",
    "non-MIG request only on MIG-only GPUs",
    "ask for a MIG profile, or allow a node group without MIG",
)
NO_GPUS_ALLOWED = _code(
    "GS513",
    "GPU request without GPU node groups",
    "allow a node group with GPUs for the workload's project and type",
)
POD_RESOURCES_TOO_LARGE = _code(
    "GS514",
    "pod CPU or memory more than any node has",
    "ask for less CPU or memory, or allow a node group with larger nodes",
)
MOUNT_PATH_TWICE = _code(
    "GS515",
    "two volumes mounted at one path",
    "mount each volume at a path of its own (sharedMemory takes /dev/shm)",
)
PORT_TWICE = _code(
    "GS516",
    "port declared twice",
    "give each port its own name, and each containerPort and protocol one entry",
)

# --- GS6xx: GPUs and MIG ----------------------------------------------------------------------

UNKNOWN_GPU_MODEL = _code(
    "GS601", "unknown GPU model", "use a model name from the catalogue (see the list)"
)
MIG_NOT_SUPPORTED = _code(
    "GS602", "GPU model without MIG", "disable MIG, or use a MIG-capable GPU model"
)
STATIC_WITHOUT_MIG = _code(
    "GS603", "static MIG strategy without MIG", "set mig.enabled: true, or remove the strategy"
)
LAYOUT_ON_DYNAMIC = _code(
    "GS604", "MIG layout on a dynamic group", "set strategy: static, or remove the layout"
)
MISSING_LAYOUT = _code(
    "GS605", "static MIG group without a layout", "declare `layout` or `byGpu` for every GPU"
)
LAYOUT_UNCHECKABLE = _code(
    "GS606", "static MIG layout on an unknown GPU model", "set a known spec.gpu.model"
)
BAD_GPU_INDEX = _code("GS607", "bad GPU index in byGpu", "name each GPU of a node once, from 0")
UNKNOWN_MIG_PROFILE = _code(
    "GS608", "MIG profile the GPU model lacks", "use a profile from the list in the message"
)
BAD_MIG_PLACEMENT = _code(
    "GS609", "MIG instance misplaced", "start it at a valid slice, clear of other instances"
)
BAD_MIG_LAYOUT = _code(
    "GS610", "invalid MIG layout", "use fewer or smaller instances (see the reason)"
)
NO_MIG_NODE_GROUP = _code(
    "GS611",
    "MIG request without a MIG node group",
    "enable MIG on a node group the workload may use, or ask for whole GPUs",
)
MIG_PROFILE_NOT_OFFERED = _code(
    "GS612",
    "MIG profile not offered",
    "ask for a profile the workload's node groups offer, or add it to the layout",
)
MIG_MODEL_WITHOUT_PROFILES = _code(
    "GS613",
    "MIG enabled on a GPU model without known profiles",
    "set a MIG-capable spec.gpu.model, or disable MIG",
)

# --- GS7xx: templates -------------------------------------------------------------------------

TEMPLATE_SYNTAX = _code(
    "GS701", "template syntax error", "fix the Jinja2 expression at the position shown"
)
TEMPLATE_UNKNOWN_NAME = _code(
    "GS702", "unknown name in a template expression", "use project, workload or cluster"
)
TEMPLATE_RENDER = _code(
    "GS703", "template expression fails to render", "fix the expression for this workload"
)
TEMPLATE_LIMIT = _code(
    "GS704", "template expression over a limit", "simplify the expression (see the limit)"
)
TEMPLATE_UNKNOWN_ATTRIBUTE = _code(
    "GS705",
    "unknown attribute in a template expression",
    "use the attribute the message suggests (the README lists them)",
)

# --- GS8xx: Simulation documents --------------------------------------------------------------

SIMULATION_COUNT = _code(
    "GS801", "not exactly one Simulation", "put one Simulation document in the file"
)
SIMULATION_DUPLICATE = _code(
    "GS802", "name listed twice in a Simulation", "list each node and workload once"
)
SIMULATION_NODE = _code(
    "GS803", "invalid simulated node", "fix the node's MIG settings as the message says"
)
SIMULATION_RUNNING = _code(
    "GS804",
    "running entry that does not fit",
    "match the running entry to its workload and node",
)
SIMULATION_UNKNOWN = _code(
    "GS805",
    "unknown name in a Simulation step",
    "name a node, node group, project or workload that exists",
)
SIMULATION_USAGE = _code(
    "GS806",
    "past usage that does not fit",
    "give the repo's projects' buckets, each once, starting before `time`, as printed",
)

# --- GS9xx: what another scheduler cannot express (render/plan --target) ---------------------

TARGET_NODE_GROUP_QUOTA = _code(
    "GS901",
    "per-node-group quota not expressible",
    "the target sees the sum; give the project one overall quota, or accept the difference",
)
TARGET_IDLE_TIMEOUT = _code(
    "GS902",
    "idle-GPU timeout not expressible",
    "stop idle workloads another way (a culling job) or drop idleGpuTimeout",
)
TARGET_GANG = _code(
    "GS903",
    "gang of a batch Job not expressible",
    "run the gang as a framework job the target groups (PyTorchJob, JobSet) or accept one by one",
)
TARGET_FRACTION = _code(
    "GS904",
    "GPU fraction not expressible",
    "request whole GPUs or a MIG profile, or run on a scheduler with GPU sharing",
)
TARGET_DYNAMIC_MIG = _code(
    "GS905",
    "dynamic MIG not expressible",
    "declare the layout (`mig.strategy: static`) and have the nodes partitioned in advance",
)
TARGET_FRACTION_POLICY = _code(
    "GS906",
    "fraction memory policy not expressible",
    "enforce GPU memory shares another way, or drop fractionPolicy",
)
TARGET_PRIORITY = _code(
    "GS907",
    "workload priority override not expressible",
    "use the type's priority, or create a priority class of that value in the target",
)
TARGET_RANK = _code(
    "GS908",
    "over-quota rank not expressible",
    "express the preference with over-quota weights instead",
)
TARGET_SPREAD_QUOTA = _code(
    "GS909",
    "overall quota over several node groups",
    "give the project its quota per node group (nodeGroupQuotas)",
)
TARGET_DEPARTMENT = _code(
    "GS910",
    "department quota or limit not expressible",
    "make the department quota the sum of its projects' quotas and drop its limit",
)
TARGET_NAME_CLASH = _code(
    "GS911",
    "two objects that would share a name in the target",
    "rename one of them: the target renders both as objects of one kind",
)
TARGET_UNKNOWN_CAPACITY = _code(
    "GS912",
    "node group capacity unknown to the target",
    "declare the group's cpuPerNode and memoryPerNode, or give the project a cpu/memory quota",
)
