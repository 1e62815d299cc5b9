//! The fluid simulator of the IO-SETS paper (Boito, Pallez, Teylo, Vidal, TPDS 2023).
//!
//! **The model** (DESIGN.md, "The simulator's model"). Job `j` is released at `r_j`, then runs `n_j`
//! iterations of a compute phase (`t_cpu` seconds, unaffected by the others) followed by an I/O
//! phase (a volume `V = t_io · B`, taking `t_io` alone). The storage has bandwidth `B`. A
//! [`Heuristic`] puts each I/O phase into a *set*: inside a set one phase transfers at a time,
//! first come first served by the time the job asked; the phases transferring (one per non-empty
//! set) share `B` in proportion to their sets' priorities, `B · p_i / Σ p`. Nothing is time-stepped:
//! [`simulate`] jumps from event to event and is exact up to float rounding.
//!
//! **The measures** ([`Metrics`]): stretch, max and geometric-mean stretch, I/O slowdown and
//! utilization over a window `[T_begin, T_end]`, with phases cut by the window counting for their
//! part inside it.
//!
//! **The workloads**: built directly ([`Workload`]), drawn by the paper's generator
//! ([`generator::PaperGenerator`]), or read from a TOML scenario ([`scenario::Scenario`]) that may
//! sweep one variable; [`sweep`] runs a sweep over many random workloads in parallel and
//! aggregates it; [`plot`] draws each metric against the swept variable; [`report`] writes tables, CSV and JSON;
//! [`session`] is one `sim run` (a scenario or a workload under each heuristic), for every front end.
//!
//! What this module is not: it does not run the real policies (that is the request-level
//! simulator, [`crate::replay`]); it models the paper's idealised platform — a single shared
//! bandwidth, perfectly divisible, with no latency — so that its answers can be compared with the
//! paper's (and with SimGrid, see `bench/simgrid_check.py`).

mod engine;
mod error;
pub mod generator;
pub mod heuristic;
pub mod metrics;
pub mod model;
pub mod plot;
pub mod report;
pub mod scenario;
pub mod session;
pub mod sweep;

pub use engine::{
    simulate, JobOutcome, PhaseKind, PhaseRecord, RateSegment, RunResult, SimOptions,
};
pub use error::FluidError;
pub use heuristic::{
    online_estimator, Estimate, EstimatorKind, Heuristic, MeanGap, OnlineEstimator,
    PeriodEstimator, Placement, SetKey, UnknownPrior,
};
pub use iosets_policy::iosets::{ExclusiveBound, TurnBounds};
pub use metrics::{JobWork, Metrics, METRIC_NAMES};
pub use model::{Job, Window, Workload};
