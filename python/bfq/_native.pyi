"""Type stubs of the extension module ``bfq._native`` (src/lib.rs); use the wrappers in :mod:`bfq`."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

Spec = Tuple[str, str, str, Optional[str], List[str], int, float, str]
Progress = Optional[Callable[[int, int], Any]]

def run(
    device: Optional[str] = ...,
    sched: Optional[str] = ...,
    workload: Optional[str] = ...,
    app: Optional[str] = ...,
    tune: Any = ...,
    seed: Optional[int] = ...,
    duration: Optional[float] = ...,
    profile: Optional[str] = ...,
    cpu_time: bool = ...,
) -> Dict[str, Any]: ...
def run_json(
    device: Optional[str] = ...,
    sched: Optional[str] = ...,
    workload: Optional[str] = ...,
    app: Optional[str] = ...,
    tune: Any = ...,
    seed: Optional[int] = ...,
    duration: Optional[float] = ...,
    profile: Optional[str] = ...,
    cpu_time: bool = ...,
) -> str: ...
def run_defaults() -> Dict[str, Any]: ...
def suite(
    benchmark: str,
    targets: Any = ...,
    scheds: Any = ...,
    workloads: Any = ...,
    apps: Any = ...,
    reps: Any = ...,
    profile: Optional[str] = ...,
    seed: Optional[int] = ...,
    tune: Any = ...,
    duration: Optional[float] = ...,
    file_size: Optional[int] = ...,
    cpu_time: bool = ...,
    allow_device: bool = ...,
    app_cmd: Optional[str] = ...,
    file_scale: Optional[float] = ...,
    warmup: Optional[float] = ...,
    jobs: Optional[int] = ...,
    out: Optional[str] = ...,
    progress: Progress = ...,
) -> Tuple[List[str], List[List[Any]], Optional[List[str]]]: ...

class SweepPlan:
    def __len__(self) -> int: ...
    def specs(self) -> List[Spec]: ...
    def frame(self, results: List[str]) -> Tuple[List[str], List[List[Any]]]: ...

def plan_sweep(grid: Any, seeds: Union[int, Sequence[int]]) -> SweepPlan: ...
def run_specs(specs: List[Spec], threads: int = ..., progress: Progress = ...) -> List[str]: ...
def schedulers() -> List[Dict[str, Any]]: ...
def devices() -> List[Dict[str, Any]]: ...
def workloads() -> List[Dict[str, Any]]: ...
def apps() -> List[Dict[str, Any]]: ...
def benchmarks() -> List[Dict[str, Any]]: ...
