//! One replay from its inputs to its measures: where the requests come from, which policy with
//! which tunables, the device, and how shares are measured ([`Plan`]) in; the replay, its window
//! shares and its per-queue summary ([`Outcome`]) out.
//!
//! Every front end (`iosets replay`, `iosets demo-wfq`, the Python bindings) builds a [`Plan`] and
//! calls [`execute`], so that they replay, measure and summarise with the same code. Turning flags
//! or keyword arguments into a plan stays with each front end; [`device_from_units`] is the one
//! conversion they share (human units to a validated [`DeviceModel`]).

use std::path::{Path, PathBuf};

use iosets_period::trace::{parse_requests, requests::is_request_trace};
use iosets_policy::{Counted, Nanos, PolicyError, Request};

use crate::replay::{run, DeviceModel, ReplayResult, SeekModel};
use crate::shares::{window_shares, ShareKey, WindowShares};
use crate::summary::{expected_weights, Summary};
use crate::workload::{from_records, read_csv, WorkloadSpec};
use crate::SimError;

/// Where the requests of a replay come from.
#[derive(Debug)]
pub enum Source {
    /// A trace file, read by [`read_requests`].
    Trace(PathBuf),
    /// A generated workload.
    Generated(WorkloadSpec),
}

/// Everything one replay needs, already validated by the library types where they can.
#[derive(Debug)]
pub struct Plan {
    /// The policy's registry name (see [`iosets_policy::registry::POLICIES`]).
    pub policy: String,
    /// Its tunables, `(key, value)` as given.
    pub pairs: Vec<(String, String)>,
    /// The requests.
    pub source: Source,
    /// The modelled device.
    pub device: DeviceModel,
    /// Requests per sliding share window (at least 1).
    pub window: usize,
    /// What a queue is when measuring shares.
    pub share_by: ShareKey,
}

/// What a replay produced.
#[derive(Debug)]
pub struct Outcome {
    /// Every request's record, in dispatch order.
    pub result: ReplayResult,
    /// The sliding-window shares.
    pub shares: WindowShares,
    /// The per-queue summary (weights, expected and measured shares, drain times).
    pub summary: Summary,
}

/// Why a replay could not be done; each variant names the step that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The policy name or a tunable is wrong (the message lists the valid choices).
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The trace file could not be read or parsed.
    #[error("reading the trace {}: {message}", path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
        /// The kind of I/O error if the file could not be read (`None`: it was read but is
        /// malformed); front ends report a missing file apart (e.g. Python's FileNotFoundError).
        io: Option<std::io::ErrorKind>,
    },
    /// The workload spec could not generate requests.
    #[error("generating the workload: {0}")]
    Generate(SimError),
    /// The replay itself or its measures failed.
    #[error("replaying: {0}")]
    Replay(SimError),
}

/// The requests of a trace file: iosets' request trace if its header names `arrival_ns` (see
/// docs/trace-format.md), else the older `time_s,job,size[,...]` CSV dialect.
pub fn read_requests(path: &Path) -> Result<Vec<Request>, PlanError> {
    let fail = |message: String, io: Option<std::io::ErrorKind>| PlanError::Trace {
        path: path.to_path_buf(),
        message,
        io,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string(), Some(e.kind())))?;
    if is_request_trace(&text) {
        let records = parse_requests(&text).map_err(|e| fail(e.to_string(), None))?;
        Ok(from_records(&records))
    } else {
        read_csv(text.as_bytes()).map_err(|e| fail(e.to_string(), None))
    }
}

/// Replays `plan`: builds the policy, reads or generates the requests, runs them on the device,
/// and measures the window shares and the per-queue summary.
pub fn execute(plan: &Plan) -> Result<Outcome, PlanError> {
    // The policy's errors name the policy and list the valid choices.
    let policy = Counted::build(&plan.policy, &plan.pairs)?;
    let workload: Vec<Request> = match &plan.source {
        Source::Trace(path) => read_requests(path)?,
        Source::Generated(spec) => spec.generate().map_err(PlanError::Generate)?,
    };
    let result = run(policy, workload, plan.device).map_err(PlanError::Replay)?;
    let shares =
        window_shares(&result.records, plan.window, plan.share_by).map_err(PlanError::Replay)?;
    let weights = expected_weights(&plan.policy, &plan.pairs, plan.share_by, &result.records);
    let summary = Summary::new(&result, &shares, &weights);
    Ok(Outcome {
        result,
        shares,
        summary,
    })
}

/// A device from human units: bandwidth in MiB/s shared by `slots` batches in service, a fixed
/// latency per batch in µs, and optionally a disk head (`seek_ms`: ms per GiB of distance within
/// a file, and the longest seek, also the cost of moving to another file, in ms).
///
/// # Errors
/// [`SimError::InvalidDevice`] naming the first bad value (negative or non-finite latency or seek
/// times, a bandwidth ≤ 0, no slot).
pub fn device_from_units(
    bandwidth_mib_s: f64,
    latency_us: f64,
    slots: usize,
    seek_ms: Option<(f64, f64)>,
) -> Result<DeviceModel, SimError> {
    let duration = |field: &'static str, v: f64, ms: bool| {
        if v.is_finite() && v >= 0.0 {
            Ok(Nanos::from_secs_f64(v * if ms { 1e-3 } else { 1e-6 }))
        } else {
            Err(SimError::InvalidDevice {
                field,
                value: v.to_string(),
                expected: if ms {
                    "a finite number of milliseconds ≥ 0"
                } else {
                    "a finite number of microseconds ≥ 0"
                },
            })
        }
    };
    let latency = duration("latency_us", latency_us, false)?;
    let device = DeviceModel::new(bandwidth_mib_s * 1_048_576.0, latency, slots)?;
    match seek_ms {
        None => Ok(device),
        Some((per_gib, max)) => Ok(device.with_seek(SeekModel {
            per_gib: duration("seek_ms_per_gib", per_gib, true)?,
            max: duration("max_seek_ms", max, true)?,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_replays_a_generated_workload_and_measures_it() {
        let plan = Plan {
            policy: "wfq".into(),
            pairs: vec![
                ("weight.1".into(), "1".into()),
                ("weight.2".into(), "3".into()),
            ],
            source: Source::Generated(WorkloadSpec::new(2, 400)),
            device: device_from_units(1024.0, 0.0, 1, None).unwrap(),
            window: 50,
            share_by: ShareKey::Job,
        };
        let o = execute(&plan).unwrap();
        assert_eq!(o.result.records.len(), 400);
        assert_eq!(o.summary.queues.len(), 2);
        let expected: Vec<f64> = o
            .summary
            .queues
            .iter()
            .map(|q| q.expected_share.unwrap())
            .collect();
        assert!((expected[0] - 0.25).abs() < 1e-9, "{expected:?}");
    }

    #[test]
    fn bad_inputs_name_what_is_wrong() {
        let e = device_from_units(1024.0, -1.0, 1, None).unwrap_err();
        assert!(e.to_string().contains("latency_us"), "{e}");
        let e = device_from_units(1024.0, 0.0, 1, Some((8.0, f64::NAN))).unwrap_err();
        assert!(e.to_string().contains("max_seek_ms"), "{e}");
        let e = read_requests(Path::new("/nonexistent/t.csv")).unwrap_err();
        assert!(
            matches!(
                e,
                PlanError::Trace {
                    io: Some(std::io::ErrorKind::NotFound),
                    ..
                }
            ),
            "{e}"
        );
        let plan = Plan {
            policy: "nope".into(),
            pairs: vec![],
            source: Source::Generated(WorkloadSpec::new(2, 10)),
            device: DeviceModel::ssd(),
            window: 5,
            share_by: ShareKey::Job,
        };
        assert!(matches!(execute(&plan), Err(PlanError::Policy(_))));
    }
}
