"""Type stubs of the native module (python/src/lib.rs); see iosets/__init__.py for the docs."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

def policies() -> List[Dict[str, Any]]: ...
def heuristics() -> Tuple[List[Dict[str, str]], str]: ...
def simulate(
    scenario: Optional[Union[str, PathLike[str], Dict[str, Any]]] = None,
    *,
    at: Optional[float] = None,
    heuristics: Optional[List[str]] = None,
    seed: int = 1,
    phases: bool = False,
    workload: Optional[Union[str, PathLike[str]]] = None,
    iosets_opt: Optional[List[str]] = None,
) -> Dict[str, Any]: ...
def sweep(
    scenario: Union[str, PathLike[str], Dict[str, Any]],
    *,
    workloads: int = 20,
    seed: int = 1,
    heuristics: Optional[List[str]] = None,
    threads: Optional[int] = None,
    full_runs: bool = False,
    out: Optional[Union[str, PathLike[str]]] = None,
    plots: bool = True,
    iosets_opt: Optional[List[str]] = None,
) -> List[Dict[str, Any]]: ...
def detect(
    trace: Union[str, PathLike[str]],
    format: Optional[str] = None,
    *,
    mode: Optional[str] = None,
    method: str = "offline",
    job: Optional[int] = None,
    segments: bool = True,
) -> List[Dict[str, Any]]: ...
def replay(
    source: Optional[Union[str, PathLike[str], Dict[str, Any]]] = None,
    policy: str = "wfq",
    options: Optional[Dict[str, Any]] = None,
    *,
    device: Optional[Union[str, Dict[str, float]]] = None,
    window: int = 300,
    share_by: str = "job",
) -> Dict[str, Any]: ...
