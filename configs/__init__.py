"""Every config pkagent reads: pydantic models, loaded from YAML, with `key=value` overrides.

A bad config raises ConfigError, whose message is one line naming the file, the key and what
was expected; the command line turns it into exit code 2. Only pydantic and the standard
library are imported at module level (PyYAML is imported when a file is read), so the checker
can load a hardware profile in a bare GPU container.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from configs.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # no nan or inf in any setting


class HardwareProfile(Strict):
    """One machine: what the roofline and the prompts say about it.

    Bandwidths are GB/s (1e9 bytes/s) per GPU per direction; the *_peak fields are datasheet
    figures, the others the best measured, which the roofline uses.
    """

    name: str
    description: str
    gpu: str
    num_gpus: int = Field(ge=1)
    sm_count: int = Field(ge=1)
    hbm_gib: float = Field(gt=0)
    interconnect: Literal["nvlink", "nvswitch", "pcie"]
    nvlinks_per_gpu: int = Field(ge=0)
    link_gbs: float = Field(gt=0, description="measured peer bandwidth per GPU per direction")
    link_peak_gbs: float = Field(gt=0)
    link_latency_us: float | None = Field(default=None, ge=0, description="one-way flag latency, measured")
    hbm_gbs: float = Field(gt=0, description="measured device copy, bytes read + written")
    hbm_peak_gbs: float = Field(gt=0)
    bf16_tflops: float = Field(gt=0, description="measured dense bf16 matrix rate")
    bf16_peak_tflops: float = Field(gt=0)
    multicast: bool = Field(description="NVSwitch multicast (NVLS) exists on this machine")
    check_repro_pct: float | None = Field(
        default=None,
        ge=0,
        description=(
            "how far one check's speedup can move from the next check's of the same candidate on this machine, "
            "measured by benchmarks/check_repro.py: every reported interval is at least this wide on each side"
        ),
    )
    check_repro_graphs_pct: float | None = Field(
        default=None, ge=0, description="the same for checks whose calls were timed as CUDA-graph replays"
    )
    source: str = Field(description="where the numbers come from")


class ModelPrice(Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ModelsConfig(Strict):
    prices: dict[str, ModelPrice] = Field(default_factory=dict)


class SandboxConfig(Strict):
    backend: Literal["local", "docker"] = "local"
    isolation: Literal["auto", "none", "bwrap"] = Field(
        default="auto", description="local backend: auto is bwrap where bubblewrap runs, else none with a warning"
    )
    image: str = "pkagent-sandbox:latest"
    command_timeout_s: float = Field(default=600, gt=0)
    output_limit_chars: int = Field(default=20000, ge=200)
    memory_gb: float = Field(default=64, gt=0)
    cpus: float = Field(default=8, gt=0)
    max_file_gb: float = Field(default=16, gt=0, description="largest file a command may write")


class AgentConfig(Strict):
    step_limit: int = Field(default=40, ge=1, description="model calls per sample")
    cost_limit_usd: float = Field(default=5.0, ge=0, description="per sample; 0: no limit")
    wall_time_s: float = Field(default=3600, gt=0)
    max_format_errors: int = Field(default=3, ge=1, description="consecutive replies without a valid action")
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int = Field(default=16000, ge=1)
    actions: Literal["tools", "text"] = Field(
        default="tools", description="tools: the provider's tool calling; text: one fenced bash block per reply"
    )
    request_timeout_s: float = Field(default=600, gt=0, description="one model request")
    max_retries: int = Field(default=6, ge=0, description="retries of a transient model error")
    retry_wait_s: float = Field(default=2.0, ge=0, description="first backoff; doubles, with jitter")
    retry_max_wait_s: float = Field(default=120, ge=0, description="longest wait, Retry-After included")


class CheckConfig(Strict):
    trials: int = Field(default=5, ge=1)
    timeout_s: float = Field(default=300, gt=0)
    perf: bool = True
    repeats: int = Field(default=16, ge=1, description="calls per trial on identical inputs; outputs that differ are a race")
    time_budget_s: float | None = Field(
        default=None, gt=0, description="seconds of timed pairs at most (None: 6 on cuda, 2 on cpu)"
    )
    ci_width: float = Field(
        default=0.02, gt=0, description="stop timing once the speedup's 95 % interval is this narrow (relative)"
    )
    confine: Literal["auto", "bwrap", "none"] = Field(
        default="auto", description="the candidate's processes: bubblewrap where it works"
    )
    pass_env: list[str] = Field(default_factory=list, description="environment variables the candidate may see")
    graphs: Literal["auto", "on", "off"] = Field(
        default="auto", description="time CUDA-graph replays of both sides: auto = where a side is host-bound"
    )


class PkbConfig(Strict):
    """Runs on ParallelKernelBench problems (pkb:PATH): the names of its solution folders and,
    optionally, the zero-shot prompt taken from a file of the user's (its prompts.toml)."""

    backend: str = Field(default="cuda", pattern=r"^[A-Za-z0-9]+$", description="in file names: {stem}_{backend}.py")
    precision: str = Field(default="bf16", pattern=r"^[A-Za-z0-9]+$")
    prompt_file: str | None = Field(
        default=None,
        description=(
            "zero-shot prompt from this file, read at run time: a prompts.toml in that benchmark's layout, or a Jinja2 "
            "template; default: our own prompt"
        ),
    )
    prompt_option: str = Field(default="generate_kernel", description="prompts.toml: the [options.X] whose components are used")
    prompt_hardware: str | None = Field(default=None, description="prompts.toml: the [hardware_profiles.X] shown (default none)")


class SampleSettings(Strict):
    """What every sample is run with, the same in `pkagent solve`, `run` and `search` (whose
    configs extend this one): the ranks and device, the problem size, the hardware profile, the
    agent's limits, the sandbox and the checks."""

    world_size: int = Field(default=2, ge=1)
    device: Literal["cuda", "cpu"] = "cuda"
    size: float = Field(default=1.0, gt=0, description="problem size scale for the checks")
    hardware: str = "h200_2"
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    check: CheckConfig = Field(default_factory=CheckConfig)
    pkb: PkbConfig = Field(default_factory=PkbConfig)

    def sample_settings(self) -> dict[str, Any]:
        """These settings as fields of a sample's config (agent.solve.SolveConfig), copied."""
        return {k: getattr(self, k) for k in SampleSettings.model_fields} | {
            k: getattr(self, k).model_copy(deep=True) for k in ("agent", "sandbox", "check", "pkb")
        }


class ExperimentConfig(SampleSettings):
    """A pass@k experiment (experiments/experiment.py): every problem x model x mode x sample."""

    name: str
    problems: list[str] = Field(
        default_factory=lambda: ["all"],
        description=(
            "problem ids, categories, `all`, `pkb:PATH` (every problem of a ParallelKernelBench checkout), `pkb:PATH::ID`, "
            "`pkb:PATH::1,4,9` or `pkb:PATH::1-8`"
        ),
    )
    models: list[str] = Field(min_length=1, description="PROVIDER:MODEL specs, or folder:PATH for existing generations")
    modes: list[Literal["zero-shot", "agent"]] = Field(default_factory=lambda: ["zero-shot"])
    samples: int = Field(default=1, ge=1, description="samples per problem, model and mode (the n of pass@k)")
    run_dir: str = Field(default="runs", description="the run is written to RUN_DIR/NAME")
    base_urls: dict[str, str] = Field(default_factory=dict, description="model spec -> API base URL")
    llm_concurrency: int = Field(default=8, ge=1, description="samples in flight, so model requests at once")
    cost_limit_usd: float | None = Field(default=None, ge=0, description="no new sample starts once the run has spent this")
    gpus: list[int] | None = Field(default=None, description="GPU indices the run may use (default: all visible)")
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = Field(default=None, description="executor ray: a cluster address (default: a local instance)")


M = TypeVar("M", bound=BaseModel)


def _expected(err: dict[str, Any]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    msg = err["msg"]
    for prefix in ("Input should be ", "Value should be ", "Input should have "):
        if msg.startswith(prefix):
            msg = "expected " + msg[len(prefix) :]
            break
    if "input" in err and kind not in ("model_type", "dict_type"):
        msg += f" (got {err['input']!r})"
    return msg


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys allowed at the parent of loc, to say what was expected for an unknown key."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        ann = getattr(field, "annotation", None)
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def _problem(model: type[BaseModel], err: dict[str, Any]) -> str:
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    what = _expected(err)
    if err["type"] == "extra_forbidden":
        known = _known_keys(model, err["loc"])
        if known:
            what += f" (expected one of: {', '.join(known)})"
    return f"{key}: {what}"


def _one_line(model: type[BaseModel], err: ValidationError, where: str) -> str:
    """Every problem of the config, in one line: `FILE: key: what` or `FILE: N problems: ...; ...`."""
    problems = [_problem(model, e) for e in err.errors()]
    if len(problems) == 1:
        return f"{where}: {problems[0]}"
    return f"{where}: {len(problems)} problems: " + "; ".join(problems)


def parse_override(text: str) -> tuple[list[str], Any]:
    """`agent.step_limit=40` -> (["agent", "step_limit"], 40); the value is read as YAML."""
    import yaml

    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or any(not p for p in key.strip().split(".")):
        raise ConfigError(f"override {text!r}: expected key=value, for example agent.step_limit=40")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"override {text!r}: {part} is not a section")
            node = child
        node[path[-1]] = value
    return data


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(unknown position)"
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}: {at}: bad YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping of keys, got {type(data).__name__}")
    return data


def validate(model: type[M], data: dict[str, Any], where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_one_line(model, e, where)) from None


def load(model: type[M], path: str | Path, overrides: list[str] | None = None) -> M:
    path = Path(path)
    data = apply_overrides(read_yaml(path), overrides or [])
    return validate(model, data, str(path))


def resolve(kind: str, name_or_path: str) -> Path:
    """A bundled config by name (`h200_2` under configs/hardware/) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    bundled = CONFIG_DIR / kind / f"{name_or_path}.yaml"
    if not bundled.exists():
        names = sorted(q.stem for q in (CONFIG_DIR / kind).glob("*.yaml"))
        raise ConfigError(f"{bundled}: file not found (bundled {kind}: {', '.join(names) or 'none'})")
    return bundled


def load_hardware(name_or_path: str = "h200_2", overrides: list[str] | None = None) -> HardwareProfile:
    return load(HardwareProfile, resolve("hardware", name_or_path), overrides)


def load_models(path: str | Path | None = None) -> ModelsConfig:
    return load(ModelsConfig, path or CONFIG_DIR / "models.yaml")


def load_experiment(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    return load(ExperimentConfig, resolve("experiments", str(path)), overrides)
